package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strings"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
)

// argError is a bad argument: the message says which and what to send
// instead. It becomes a tool error, never a protocol failure.
type argError struct{ msg string }

func (e *argError) Error() string { return e.msg }

func badArg(format string, args ...any) error { return &argError{msg: fmt.Sprintf(format, args...)} }

// rawArguments returns a call's arguments as JSON ({} when there are none).
func rawArguments(req mcpgo.CallToolRequest) (json.RawMessage, error) {
	switch a := req.GetRawArguments().(type) {
	case nil:
		return json.RawMessage("{}"), nil
	case json.RawMessage:
		if len(bytes.TrimSpace(a)) == 0 || bytes.Equal(bytes.TrimSpace(a), []byte("null")) {
			return json.RawMessage("{}"), nil
		}
		return a, nil
	default:
		b, err := json.Marshal(a)
		if err != nil {
			return nil, badArg("the arguments could not be read as JSON")
		}
		return b, nil
	}
}

// decodeArgs reads the arguments strictly into v, a pointer to a struct:
// an unknown argument or one of the wrong type is refused with a message
// that names it.
func decodeArgs(raw json.RawMessage, v any) error {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return badArg("the arguments must be a JSON object of named arguments")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		if _, more := dec.Token(); more != io.EOF {
			return badArg("the arguments must be one JSON object")
		}
		return nil
	}
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			return badArg("the arguments must be a JSON object of named arguments")
		}
		declared := fieldType(reflect.TypeOf(v), field)
		if declared == nil || declared == te.Type {
			return badArg("argument %s must be %s, not %s", quoteArg(field), describeType(te.Type), article(te.Value))
		}
		return badArg("argument %s must be %s; one of its values is %s", quoteArg(field), describeType(declared), article(te.Value))
	case errors.As(err, &se):
		return badArg("the arguments are not valid JSON")
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return badArg("unknown argument %s; this tool takes %s", quoteArg(name), argNames(v))
	}
	return badArg("the arguments could not be read: %s", strings.TrimPrefix(err.Error(), "json: "))
}

func quoteArg(s string) string { return "'" + s + "'" }

// argNames lists the JSON names of the fields of the struct v points to.
func argNames(v any) string {
	t := reflect.TypeOf(v)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var names []string
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	if len(names) == 0 {
		return "no arguments"
	}
	return strings.Join(names, ", ")
}

// fieldType is the declared type of the argument at a dotted JSON path
// (messages.role) of the struct t points to, or nil.
func fieldType(t reflect.Type, path string) reflect.Type {
	var cur reflect.Type
	for _, name := range strings.Split(path, ".") {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct {
			return nil
		}
		found := false
		for i := range t.NumField() {
			if tag, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ","); tag == name {
				cur, t, found = t.Field(i).Type, t.Field(i).Type, true
				break
			}
		}
		if !found {
			return nil
		}
	}
	return cur
}

// describeType says in words what a Go type of an argument holds.
func describeType(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		inner := describeType(t.Elem())
		switch inner {
		case "a string":
			return "a list of strings"
		case "an object":
			return "a list of objects"
		}
		return "a list"
	case reflect.Map:
		if t.Elem().Kind() == reflect.String {
			return "an object whose values are strings"
		}
		return "an object"
	case reflect.Struct:
		return "an object"
	}
	return "a " + t.String()
}

// article puts "a"/"an" before a JSON type name from encoding/json.
func article(v string) string {
	switch v {
	case "object", "array":
		return "an " + v
	case "":
		return "something else"
	}
	if strings.HasPrefix(v, "number") {
		return "a number"
	}
	return "a " + v
}

// need refuses a missing required argument.
func need(value, name, what string) error {
	if strings.TrimSpace(value) == "" {
		return badArg("argument %s is missing: give %s", quoteArg(name), what)
	}
	return nil
}

// parseTime reads an RFC 3339 time or a date (YYYY-MM-DD, 00:00 UTC).
func parseTime(name, v string) (time.Time, error) {
	v = strings.TrimSpace(v)
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t.UTC(), nil
	}
	if t, err := time.Parse("2006-01-02", v); err == nil {
		return t.UTC(), nil
	}
	return time.Time{}, badArg("argument %s must be an RFC 3339 time (2026-11-01T00:00:00Z) or a date (2026-11-01), not %q", quoteArg(name), v)
}

// stamp formats a time for a tool's output.
func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

func stampPtr(t *time.Time) string {
	if t == nil {
		return ""
	}
	return stamp(*t)
}
