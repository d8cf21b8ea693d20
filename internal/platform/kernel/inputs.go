package kernel

import (
	"sort"
	"strconv"
	"strings"

	"github.com/klique-ai/klique/internal/model"
)

// Mutations of the allocation model. Each one describes its change on a copy
// of the estate; changeEstate does the rest.

// SetString sets a field from an input. Values are taken as given: a name
// with a leading or trailing space is refused by validation, the same as in
// an estate file, rather than quietly changed.
func SetString(dst *string, v *string) {
	if v != nil {
		*dst = *v
	}
}

func SetInt(dst *int, v *int) {
	if v != nil {
		*dst = *v
	}
}

func RequireName(kind string, name *string) error {
	if name == nil || strings.TrimSpace(*name) == "" {
		return Invalid("a %s needs a name", kind)
	}
	return nil
}

func Remove[T comparable](list []T, v T) []T {
	out := list[:0:0]
	for _, x := range list {
		if x != v {
			out = append(out, x)
		}
	}
	return out
}

func Names[T any](list []T, name func(T) string) string {
	var out []string
	for _, v := range list {
		out = append(out, name(v))
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

func SortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// CheckSeqCursor refuses a page cursor that is not a sequence number, for
// the lists paged by one (tasks, the audit trail): a cursor this server
// did not give is the caller's mistake, not an internal error.
func CheckSeqCursor(page model.Page) error {
	if page.After == "" {
		return nil
	}
	if _, err := strconv.ParseInt(page.After, 10, 64); err != nil {
		return Invalid("the page cursor is not valid; start from the first page")
	}
	return nil
}
