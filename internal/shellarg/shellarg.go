// Package shellarg holds the rules for putting values into commands
// (docs/pipelines.md, "Parameters and the shell"; docs/apps.md,
// "Templates"): a value filled into a command is one argument, never
// shell. Pipelines ({{params.lr}}), a task's own {lr} templates (filled by
// the fleet from its parameters) and app templates ({model}, filled from a
// launch form) all fill values into commands; they share this package so
// that one command is read one way everywhere:
//
//   - ScriptIndex finds the argument a known shell runs as its script
//     (sh -c SCRIPT, bash -lc SCRIPT, env X=1 sh -c SCRIPT, ...). A value
//     substituted into that argument as text would be read as shell, so
//     the templates refuse it unless it is quoted explicitly with the
//     shell filter ({{params.lr|shell}}, {lr|shell}).
//   - Quote is that filter: POSIX single quotes, which the shell reads as
//     the literal value, whatever it holds.
//   - Bare says whether a place in a script is one where a quoted value is
//     read as literal text of one word: not inside quotes, a
//     here-document, backquotes, or an arithmetic or parameter expansion,
//     where single quotes do not protect it.
//
// Everything else a command holds is an argument vector: a template there
// is filled with the value as it is, as one argument.
package shellarg

import (
	"path"
	"strings"
)

// posixShells are the shells whose -c script is checked: POSIX shells and
// their relatives, which read single quotes the POSIX way.
var posixShells = map[string]bool{
	"sh": true, "bash": true, "rbash": true, "dash": true, "ash": true, "zsh": true,
	"ksh": true, "ksh93": true, "mksh": true, "pdksh": true, "yash": true, "posh": true,
}

// ScriptIndex returns the index of the argument of argv that a POSIX shell
// runs as its script (the one after -c and the shell's other options), or
// -1 when argv runs no shell script. The shell is argv's program, named
// by its name or a path, possibly after env (with its options and
// NAME=VALUE assignments) or busybox. Arguments after the script are the
// script's positional parameters ($0, $1, ...): values, not shell.
func ScriptIndex(argv []string) int {
	i := 0
	if i < len(argv) && path.Base(argv[i]) == "env" {
		for i++; i < len(argv); i++ {
			a := argv[i]
			if a == "--" {
				i++
				break
			}
			if strings.HasPrefix(a, "-") {
				if a == "-u" || a == "-C" || a == "--unset" || a == "--chdir" {
					i++
				}
				continue
			}
			if !strings.Contains(a, "=") {
				break
			}
		}
	}
	if i < len(argv) && path.Base(argv[i]) == "busybox" {
		i++
	}
	if i >= len(argv) || !posixShells[path.Base(argv[i])] {
		return -1
	}
	command := false
	for i++; i < len(argv); i++ {
		a := argv[i]
		if a == "--" || a == "-" {
			i++
			break
		}
		if strings.HasPrefix(a, "--") {
			if a == "--rcfile" || a == "--init-file" {
				i++
			}
			continue
		}
		if len(a) < 2 || (a[0] != '-' && a[0] != '+') {
			break
		}
		for _, c := range a[1:] {
			switch c {
			case 'c':
				command = command || a[0] == '-'
			case 'o', 'O':
				i++ // -o pipefail: the option's name is the next argument
			}
		}
	}
	if !command || i >= len(argv) {
		return -1
	}
	return i
}

// Quote quotes s for a POSIX shell: in single quotes, with each single
// quote in s closed, escaped and reopened:
//
//	it's  →  'it'\''s'
//
// The shell reads the result as exactly s, one word, wherever Bare allows
// it.
func Quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Shells names the shells ScriptIndex knows, for messages.
const Shells = "sh, bash, dash, ash, zsh, ksh, mksh, yash, posh"
