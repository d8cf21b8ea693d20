package cli

import (
	"encoding/json"
	"fmt"
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
