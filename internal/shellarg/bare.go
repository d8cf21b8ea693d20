package shellarg

import (
	"fmt"
	"strconv"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// Bare reports, for each span [start, end) of script (in order, not
// overlapping), whether a value Quote quoted and put in place of the span
// is read by the shell as literal text of one word. That holds where the
// span is plain text of a word: an argument, an assignment's value, a
// redirection's target, a word of a loop or a case, at the top level or
// inside $(...). It does not hold inside single or double quotes (the
// quotes would end early: "$(...)" then runs), a here-document, backquotes,
// an arithmetic or parameter expansion, or a comment. The script is
// parsed with mvdan.cc/sh (as bash, a superset of POSIX sh for this); a
// script it cannot parse is an error. A script that evaluates its text
// again (eval, a nested sh -c, ssh HOST CMD) undoes the quoting: the
// documentation says to read the environment there instead.
func Bare(script string, spans [][2]int) ([]bool, error) {
	out := make([]bool, len(spans))
	if len(spans) == 0 {
		return out, nil
	}
	// Each span becomes a placeholder of letters and digits, which the
	// parser reads as plain text wherever it stands.
	prefix := "KliqueTemplate"
	for strings.Contains(script, prefix) {
		prefix += "X"
	}
	var b strings.Builder
	last := 0
	for i, sp := range spans {
		if sp[0] < last || sp[1] < sp[0] || sp[1] > len(script) {
			return nil, fmt.Errorf("template spans out of order")
		}
		b.WriteString(script[last:sp[0]])
		b.WriteString(prefix + strconv.Itoa(i) + "Z")
		last = sp[1]
	}
	b.WriteString(script[last:])
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(b.String()), "")
	if err != nil {
		return nil, fmt.Errorf("the script does not parse as shell: %v", err)
	}
	hdocs := map[*syntax.Word]bool{}
	var stack []syntax.Node
	syntax.Walk(f, func(n syntax.Node) bool {
		if n == nil {
			stack = stack[:len(stack)-1]
			return true
		}
		if r, ok := n.(*syntax.Redirect); ok && r.Hdoc != nil {
			hdocs[r.Hdoc] = true
		}
		if lit, ok := n.(*syntax.Lit); ok && strings.Contains(lit.Value, prefix) && plainWordText(stack, hdocs) {
			for i := range spans {
				if strings.Contains(lit.Value, prefix+strconv.Itoa(i)+"Z") {
					out[i] = true
				}
			}
		}
		stack = append(stack, n)
		return true
	})
	return out, nil
}

// plainWordText reports whether a literal under the given ancestors (the
// innermost last) is plain text of a word that the shell reads with its
// quotes: its parent is a word, and no ancestor quotes, re-reads or
// evaluates its text.
func plainWordText(ancestors []syntax.Node, hdocs map[*syntax.Word]bool) bool {
	if len(ancestors) == 0 {
		return false
	}
	if _, ok := ancestors[len(ancestors)-1].(*syntax.Word); !ok {
		return false // a name: a function's, an assignment's, a parameter's
	}
	for _, a := range ancestors {
		switch x := a.(type) {
		case *syntax.DblQuoted, *syntax.SglQuoted, *syntax.ParamExp, *syntax.ArithmExp,
			*syntax.ArithmCmd, *syntax.LetClause, *syntax.ExtGlob:
			return false
		case *syntax.CmdSubst:
			if x.Backquotes {
				return false
			}
		case *syntax.Word:
			if hdocs[x] {
				return false
			}
		}
	}
	return true
}
