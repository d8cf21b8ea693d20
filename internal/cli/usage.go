package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// groupAnnotation marks a command that only groups others (klique create,
// klique task): given an unknown word, it names the nearest subcommand.
const groupAnnotation = "klique/group"

// checkUsage makes every mistake on the command line a usage error (exit
// code 2) whichever layer finds it: cobra's argument checks, pflag's flag
// parsing, or a group given an unknown subcommand. Cobra itself only
// checks the root's subcommands and shows a group's help, with exit code 0,
// for `klique create tsk`.
func checkUsage(cmd *cobra.Command) {
	switch {
	case cmd.HasSubCommands() && !cmd.Runnable():
		if cmd.Annotations == nil {
			cmd.Annotations = map[string]string{}
		}
		cmd.Annotations[groupAnnotation] = "true"
		cmd.Args = cobra.ArbitraryArgs
		cmd.RunE = runGroup
	case cmd.Args != nil:
		check := cmd.Args
		cmd.Args = func(cmd *cobra.Command, args []string) error {
			if err := check(cmd, args); err != nil {
				return UsageError{err}
			}
			return nil
		}
	}
	for _, sub := range cmd.Commands() {
		checkUsage(sub)
	}
}

// runGroup shows a group's help when no subcommand is given, and refuses
// an unknown one.
func runGroup(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return cmd.Help()
	}
	return unknownCommand(cmd, args[0])
}

// unknownCommand says that name is not a subcommand of cmd, and which
// subcommands are nearest to it.
func unknownCommand(cmd *cobra.Command, name string) error {
	var names, explicit []string
	for _, sub := range cmd.Commands() {
		if !sub.IsAvailableCommand() {
			continue
		}
		names = append(names, sub.Name())
		for _, s := range sub.SuggestFor {
			if strings.EqualFold(s, name) {
				explicit = append(explicit, sub.Name())
			}
		}
	}
	msg := fmt.Sprintf("unknown command %q for %q", name, cmd.CommandPath())
	if s := append(explicit, Nearest(name, names)...); len(s) > 0 {
		msg += "; did you mean " + OrList(s, "") + "?"
	} else {
		msg += ": use one of " + strings.Join(names, ", ")
	}
	return UsageError{errors.New(msg)}
}

// flagError is every command's FlagErrorFunc: a flag pflag does not know
// is answered with the nearest one the command has; a group given an
// unknown subcommand and then flags says the subcommand is unknown, which
// is the mistake, rather than that its flags are.
func flagError(cmd *cobra.Command, err error) error {
	if cmd.Annotations[groupAnnotation] != "" {
		if args := cmd.Flags().Args(); len(args) > 0 {
			return unknownCommand(cmd, args[0])
		}
	}
	var ne *pflag.NotExistError
	if !errors.As(err, &ne) {
		return UsageError{err}
	}
	if short := ne.GetSpecifiedShortnames(); short != "" {
		in := ""
		if len(short) > 1 {
			in = " (in -" + short + ")"
		}
		return UsageError{fmt.Errorf("unknown shorthand flag -%s%s for %q", ne.GetSpecifiedName(), in, cmd.CommandPath())}
	}
	name := ne.GetSpecifiedName()
	var known []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if !f.Hidden {
			known = append(known, f.Name)
		}
	})
	msg := fmt.Sprintf("unknown flag --%s for %q", name, cmd.CommandPath())
	if s := Nearest(name, known); len(s) > 0 {
		msg += "; did you mean " + OrList(s, "--") + "?"
	}
	return UsageError{errors.New(msg)}
}

// Nearest returns the candidates closest to what was typed: within two
// edits (the distance cobra uses for commands), or starting with it, the
// closest first.
func Nearest(typed string, candidates []string) []string {
	best, out := -1, []string(nil)
	for _, c := range candidates {
		d := editDistance(strings.ToLower(typed), strings.ToLower(c))
		if d > 2 && !(len(typed) >= 3 && strings.HasPrefix(c, typed)) {
			continue
		}
		switch {
		case best < 0 || d < best:
			best, out = d, []string{c}
		case d == best:
			out = append(out, c)
		}
	}
	return out
}

// OrList writes names as "a", "a or b", "a, b or c", each with prefix.
func OrList(names []string, prefix string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = prefix + n
	}
	if len(q) == 1 {
		return q[0]
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
