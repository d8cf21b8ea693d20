// Command gentools rewrites the README's table of MCP tools from the tools
// the server registers. It is run by `go generate ./mcp`.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/klique-ai/klique/mcp"
)

// everyModel stands in for the gateway so that call_model, offered only
// when the server can call models, is registered and listed.
type everyModel struct{}

func (everyModel) ChatCompletion(context.Context, string, string, []byte) (int, []byte, error) {
	return 0, nil, fmt.Errorf("not a server")
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: gentools README.md")
		os.Exit(2)
	}
	path := os.Args[1]
	readme, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	s := mcp.New(mcp.Options{Models: everyModel{}})
	out, err := mcp.ReplaceToolTable(string(readme), s.ToolTable())
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", path, err)
		os.Exit(1)
	}
	if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
