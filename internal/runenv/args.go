package runenv

import (
	"regexp"
	"strings"
)

// argTemplate is a parameter reference in a command argument: {name}, with
// the characters a parameter name usually has.
var argTemplate = regexp.MustCompile(`\{([A-Za-z_][A-Za-z0-9_.-]*)\}`)

// ExpandArgs returns args with each {name} that names a parameter replaced
// by the parameter's value, so that `--lr {lr}` in a recorded command takes
// the value a clone changed. A brace that names no parameter is left as it
// is (a JSON argument, a shell-looking literal): the command is the user's,
// and only what they declared is theirs to template. args itself is not
// changed; with nothing to replace it is returned as it is.
func ExpandArgs(args []string, params map[string]string) []string {
	if len(params) == 0 {
		return args
	}
	var out []string
	for i, a := range args {
		if !strings.Contains(a, "{") {
			continue
		}
		e := argTemplate.ReplaceAllStringFunc(a, func(m string) string {
			if v, ok := params[m[1:len(m)-1]]; ok {
				return v
			}
			return m
		})
		if e == a {
			continue
		}
		if out == nil {
			out = append([]string(nil), args...)
		}
		out[i] = e
	}
	if out == nil {
		return args
	}
	return out
}

// ArgTemplates returns the parameter names args refer to as {name}, in
// order of first use.
func ArgTemplates(args []string) []string {
	var names []string
	seen := map[string]bool{}
	for _, a := range args {
		for _, m := range argTemplate.FindAllStringSubmatch(a, -1) {
			if !seen[m[1]] {
				seen[m[1]] = true
				names = append(names, m[1])
			}
		}
	}
	return names
}
