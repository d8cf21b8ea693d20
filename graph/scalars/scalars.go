// Package scalars holds the custom GraphQL scalars of the schema.
package scalars

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/99designs/gqlgen/graphql"
)

// MarshalStringMap writes a map of strings as a JSON object with sorted keys,
// so that responses are stable.
func MarshalStringMap(m map[string]string) graphql.Marshaler {
	return graphql.WriterFunc(func(w io.Writer) {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		_, _ = io.WriteString(w, "{")
		for i, k := range keys {
			if i > 0 {
				_, _ = io.WriteString(w, ",")
			}
			kb, _ := json.Marshal(k)
			vb, _ := json.Marshal(m[k])
			_, _ = w.Write(kb)
			_, _ = io.WriteString(w, ":")
			_, _ = w.Write(vb)
		}
		_, _ = io.WriteString(w, "}")
	})
}

// UnmarshalStringMap reads a JSON object whose values are strings. Numbers
// and booleans are taken as their text, so {"lr": 0.1} works as {"lr": "0.1"};
// nested objects and lists are refused.
func UnmarshalStringMap(v any) (map[string]string, error) {
	if v == nil {
		return nil, nil
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("expected a JSON object of strings, such as {\"lr\": \"0.1\"}")
	}
	out := make(map[string]string, len(obj))
	for k, val := range obj {
		switch x := val.(type) {
		case string:
			out[k] = x
		case json.Number:
			out[k] = x.String()
		case float64:
			out[k] = strconv.FormatFloat(x, 'f', -1, 64)
		case int64:
			out[k] = strconv.FormatInt(x, 10)
		case int:
			out[k] = strconv.Itoa(x)
		case bool:
			out[k] = strconv.FormatBool(x)
		case nil:
			return nil, fmt.Errorf("value of %q is null; give a string", k)
		default:
			return nil, fmt.Errorf("value of %q must be a string, not a list or an object", k)
		}
	}
	return out, nil
}

// UsageDimension is a dimension the ledger groups by, as the store names it
// ("user", "gpu_class"); GraphQL spells it USER, GPU_CLASS.
type UsageDimension string

// MarshalGQL writes the dimension in GraphQL's spelling.
func (d UsageDimension) MarshalGQL(w io.Writer) {
	_, _ = io.WriteString(w, strconv.Quote(strings.ToUpper(string(d))))
}

// UnmarshalGQL reads a dimension in GraphQL's spelling.
func (d *UsageDimension) UnmarshalGQL(v any) error {
	s, ok := v.(string)
	if !ok {
		return fmt.Errorf("a usage dimension is a name such as GROUP or POOL")
	}
	*d = UsageDimension(strings.ToLower(s))
	return nil
}
