package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/goccy/go-yaml"
)

// print writes v as JSON or YAML, for -o json and -o yaml.
func (c *cli) print(v any) error {
	switch c.output {
	case "json":
		enc := json.NewEncoder(c.out)
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
		_, err = c.out.Write(out)
		return err
	case "table":
		return nil
	}
	return usagef("output format %q is not known: use table, json or yaml", c.output)
}

// table writes rows under a header, aligned.
func (c *cli) table(header []string, rows [][]string) {
	w := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(w, strings.Join(r, "\t"))
	}
	_ = w.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
