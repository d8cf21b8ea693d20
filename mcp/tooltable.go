package mcp

import (
	"fmt"
	"strings"
)

// README markers: the table of tools between them is generated from the
// tools the server registers (ToolTable), so that the README cannot list
// fewer tools than an agent is offered. `go generate ./mcp` rewrites it;
// TestTheREADMEListsEveryTool fails when the two differ.
const (
	TableBegin = "<!-- mcp-tools:begin (generated from the tool list by `go generate ./mcp`) -->"
	TableEnd   = "<!-- mcp-tools:end -->"
)

// ToolTable renders the tools as the README's markdown table: each tool's
// name, the first sentence of the description an agent reads, and whether
// a viewer (a read-only role) is offered it.
func (s *Server) ToolTable() string {
	var b strings.Builder
	b.WriteString("| tool | does | viewers |\n|---|---|---|\n")
	for _, d := range s.defs {
		viewers := "yes"
		if d.writes {
			viewers = "no"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", d.name, firstSentence(d.description), viewers)
	}
	return b.String()
}

// firstSentence is the text up to the first full stop that ends a
// sentence, with the table's cell separator escaped.
func firstSentence(text string) string {
	if i := strings.Index(text, ". "); i >= 0 {
		text = text[:i+1]
	}
	return strings.ReplaceAll(strings.TrimSpace(text), "|", `\|`)
}

// ReplaceToolTable returns readme with the text between TableBegin and
// TableEnd replaced by table, or an error when the markers are missing.
func ReplaceToolTable(readme, table string) (string, error) {
	start := strings.Index(readme, TableBegin)
	end := strings.Index(readme, TableEnd)
	if start < 0 || end < start {
		return "", fmt.Errorf("the README has no %q … %q markers around the MCP tool table: put them back around it", TableBegin, TableEnd)
	}
	return readme[:start+len(TableBegin)] + "\n" + table + readme[end:], nil
}
