package cli

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"text/tabwriter"

	"github.com/goccy/go-yaml"
)

// Print writes v as JSON or YAML, for -o json and -o yaml.
func (c *CLI) Print(v any) error {
	switch c.Output {
	case "json":
		enc := json.NewEncoder(c.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case "yaml":
		// Through JSON, so that field names are the API's.
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		var generic any
		if err := json.Unmarshal(b, &generic); err != nil {
			return err
		}
		out, err := yaml.Marshal(generic)
		if err != nil {
			return err
		}
		_, err = c.Out.Write(out)
		return err
	case "table":
		return nil
	}
	return Usagef("output format %q is not known: use table, json or yaml", c.Output)
}

// Table writes rows under a header, aligned.
func (c *CLI) Table(header []string, rows [][]string) {
	w := tabwriter.NewWriter(c.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(w, strings.Join(r, "\t"))
	}
	_ = w.Flush()
}

func OrDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// PrintData writes an answer of the server (a generated type of
// internal/cli/gql) as JSON or YAML with the API's field names in the
// order the API's JSON objects sort them, so that a command's -o json is
// the same whichever Go type carried the answer.
func (c *CLI) PrintData(v any) error {
	b, err := marshalAnswer(v)
	if err != nil {
		return fmt.Errorf("encode the answer: %w", err)
	}
	var generic any
	if err := json.Unmarshal(b, &generic); err != nil {
		return fmt.Errorf("encode the answer: %w", err)
	}
	return c.Print(generic)
}

// Recast reads a generated answer (internal/cli/gql) into a type of the
// command's own, field by field as encoding/json matches names, as the
// server's JSON was read into it: for the commands whose -o json has
// always printed that type (its Go field names), so that it stays the same.
func Recast(from, to any) error {
	b, err := marshalAnswer(from)
	if err != nil {
		return fmt.Errorf("read the answer: %w", err)
	}
	if err := json.Unmarshal(b, to); err != nil {
		return fmt.Errorf("read the answer: %w", err)
	}
	return nil
}

// marshalAnswer encodes a generated answer. genqlient gives a type that
// spreads a fragment its MarshalJSON on the pointer only (the fragment's
// fields sit in an embedded struct tagged json:"-"), so a struct passed by
// value is encoded from an addressable copy: otherwise it would encode as {}.
func marshalAnswer(v any) ([]byte, error) {
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Struct {
		p := reflect.New(rv.Type())
		p.Elem().Set(rv)
		v = p.Interface()
	}
	return json.Marshal(v)
}
