package access

import (
	"context"
	"strings"
	"unicode/utf8"

	"github.com/klique-ai/klique/internal/platform/kernel"
)

// What the MCP server needs beyond the operations every channel shares.
// Its tools call the same operations as GraphQL, so a change made through
// MCP writes its own audit entry (task.enqueued, task.aborted) with channel
// mcp. A tool call that changes nothing, or is refused, is recorded here,
// so that the audit trail holds every call an agent made for its user.

// ToolCallAction is the audit action of an MCP tool call recorded by
// RecordToolCall; its object kind is ToolCallKind and its object name the
// tool's name.
const (
	ToolCallAction = "mcp.tool_called"
	ToolCallKind   = "mcp_tool"
)

// maxToolCallDetail bounds the account of one tool call in the audit trail.
const maxToolCallDetail = 1000

// RecordToolCall writes the audit entry of one MCP tool call by the caller:
// the tool and a one-line account of what it read or why it was refused.
func (s *Access) RecordToolCall(ctx context.Context, tool, detail string) error {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return err
	}
	if tool = strings.TrimSpace(tool); tool == "" || len(tool) > 128 {
		return kernel.Invalid("a tool call needs the tool's name (at most 128 characters)")
	}
	detail = strings.Join(strings.Fields(strings.ToValidUTF8(detail, "?")), " ")
	if len(detail) > maxToolCallDetail {
		cut := maxToolCallDetail
		for cut > 0 && !utf8.RuneStart(detail[cut]) {
			cut--
		}
		detail = detail[:cut] + "…"
	}
	return s.k.Write(ctx, p, func(t *kernel.Txn) error {
		t.Record(ToolCallAction, ToolCallKind, "", tool, "", detail)
		return nil
	})
}
