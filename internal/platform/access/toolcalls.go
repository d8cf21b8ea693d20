package access

import (
	"context"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
	"github.com/klique-ai/klique/internal/store"
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
	tool = strings.TrimSpace(tool)
	detail = strings.Join(strings.Fields(strings.ToValidUTF8(detail, "?")), " ")
	if len(detail) > maxToolCallDetail {
		cut := maxToolCallDetail
		for cut > 0 && !utf8.RuneStart(detail[cut]) {
			cut--
		}
		detail = detail[:cut] + "…"
	}
	_, err := kernel.Run(ctx, s.k, kernel.Op[struct{}]{
		Name: "recordToolCall", Right: kernel.RightRead, What: "call tools",
		Check: func(*identity.Principal) error {
			if tool == "" || len(tool) > 128 {
				return kernel.Invalid("a tool call needs the tool's name (at most 128 characters)")
			}
			return nil
		},
		Body: func(*kernel.Txn) (struct{}, kernel.Audit, error) {
			return struct{}{}, kernel.Audit{Action: ToolCallAction, Kind: ToolCallKind, Name: tool, Detail: detail}, nil
		},
	})
	return err
}

// AuditFilter narrows the audit trail. Actor is a user id or name.
type AuditFilter struct {
	Actor      string
	ObjectKind string
	ObjectID   string
	Since      time.Time
	Until      time.Time
}

// AuditLog returns the tenant's audit trail, newest first, for admins.
// Page.After is the Seq of the last entry of the previous page.
func (s *Access) AuditLog(ctx context.Context, f AuditFilter, page model.Page) ([]*model.AuditEntry, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	if err := kernel.RequireAdmin(p, "read the audit trail"); err != nil {
		return nil, err
	}
	if err := kernel.CheckSeqCursor(page); err != nil {
		return nil, err
	}
	sf := store.AuditFilter{ObjectKind: f.ObjectKind, ObjectID: f.ObjectID, Since: f.Since, Until: f.Until}
	if f.Actor != "" {
		u, err := kernel.FindUser(ctx, s.k.Store, p.TenantID, f.Actor)
		if err != nil {
			return nil, s.k.Internal(ctx, err)
		}
		sf.ActorID = u.ID
	}
	es, err := s.k.Store.ListAudit(ctx, p.TenantID, sf, page)
	return es, s.k.Internal(ctx, err)
}
