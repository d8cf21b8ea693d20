package mcp_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/klique-ai/klique/mcp"
)

type anyModel struct{}

func (anyModel) ChatCompletion(context.Context, string, string, []byte) (int, []byte, error) {
	return 0, nil, fmt.Errorf("not called")
}

// TestTheREADMEListsEveryTool fails when the README's table of MCP tools
// is not the one the tool list generates: a tool added, renamed or made a
// write without `go generate ./mcp`.
func TestTheREADMEListsEveryTool(t *testing.T) {
	s := mcp.New(mcp.Options{Models: anyModel{}})
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	want, err := mcp.ReplaceToolTable(string(readme), s.ToolTable())
	if err != nil {
		t.Fatal(err)
	}
	if want != string(readme) {
		t.Fatalf("the README's MCP tool table differs from the tool list: run `go generate ./mcp`; the table should be:\n%s", s.ToolTable())
	}
	for _, name := range s.Tools() {
		if !strings.Contains(string(readme), "| `"+name+"` |") {
			t.Errorf("the README does not list tool %s", name)
		}
	}
	if n := len(s.Tools()); n < 22 {
		t.Errorf("the server registers %d tools; expected every tool (22 or more)", n)
	}
}

// TestTheMCPDocDescribesEveryTool fails when docs/mcp.md has no row of
// arguments and answers for a tool the server offers.
func TestTheMCPDocDescribesEveryTool(t *testing.T) {
	s := mcp.New(mcp.Options{Models: anyModel{}})
	doc, err := os.ReadFile("../docs/mcp.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range s.Tools() {
		if !strings.Contains(string(doc), "| `"+name+"` |") {
			t.Errorf("docs/mcp.md has no row for tool %s in its table of tools", name)
		}
	}
}
