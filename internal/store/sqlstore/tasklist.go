package sqlstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/sqlstore/sqlbase"
)

// maxTaskBranches bounds the branches one task list is split into (groups
// and own tasks, times statuses); past it the list is one scan with an OR.
const maxTaskBranches = 64

// ListTasks lists the tasks that match f in queue order, oldest first or
// newest first, with keyset pagination on QueueSeq.
//
// A page costs the same at a million tasks as at a thousand: it is read by
// ordered index scans that stop at its LIMIT (indexes of migration 0012). An
// OR over a member's groups and own tasks, or a status IN, cannot be read in
// queue order from one index, so the database would fetch every match and
// sort it; such a filter is split into equality branches, one per group,
// owner and status, each reading at most a page of queue sequence numbers
// from its index, and the page is the first of their union (IN lists a task
// two branches found once).
func (q *queries) ListTasks(ctx context.Context, tenantID string, f store.TaskFilter, page store.Page, newestFirst bool) ([]*model.Task, error) {
	order, cursor := ` ORDER BY queue_seq`, ` AND queue_seq > ?`
	if newestFirst {
		order, cursor = order+` DESC`, ` AND queue_seq < ?`
	}
	var cursorArgs []any
	if page.After == "" {
		cursor = ""
	} else if after, err := strconv.ParseInt(page.After, 10, 64); err != nil {
		return nil, fmt.Errorf("list tasks: page after %q is not a queue sequence number", page.After)
	} else {
		cursorArgs = []any{after}
	}
	if f.OwnerID != "" && f.OwnerID == f.VisibleToUserID {
		f.RestrictToGroups, f.GroupIDs = false, nil // their own tasks are visible to them
	}
	branches := taskBranches(f)
	if len(branches) > maxTaskBranches {
		branches = []branch{{}}
	} else {
		f.Statuses, f.RestrictToGroups, f.GroupIDs = nil, false, nil
	}
	where, common := taskWhere(tenantID, f)
	where += cursor
	common = append(common, cursorArgs...)
	if len(branches) == 1 {
		query, args := sqlbase.WithLimit(`SELECT `+taskTable.List()+` FROM tasks`+where+branches[0].sql+order,
			append(common, branches[0].args...), page.Limit)
		return sqlbase.GetAll(ctx, q.Q, "list tasks", taskTable.Scan, query, args...)
	}
	subs, args := make([]string, len(branches)), []any{tenantID}
	for i, b := range branches {
		sub := `SELECT queue_seq FROM tasks` + where + b.sql
		if args = append(append(args, common...), b.args...); page.Limit > 0 {
			sub, args = sqlbase.WithLimit(sub+order, args, page.Limit)
		}
		subs[i] = `SELECT queue_seq FROM (` + sub + `) AS b` + strconv.Itoa(i)
	}
	query, args := sqlbase.WithLimit(`SELECT `+taskTable.List()+` FROM tasks WHERE tenant_id = ? AND queue_seq IN (`+
		strings.Join(subs, ` UNION ALL `)+`)`+order, args, page.Limit)
	return sqlbase.GetAll(ctx, q.Q, "list tasks", taskTable.Scan, query, args...)
}

// branch is one branch of a task list: " AND ..." and its arguments.
type branch struct {
	sql  string
	args []any
}

// taskBranches is the product of f's group rule and statuses as equality
// branches; one empty branch when f has neither. An empty group rule keeps
// nothing, as in taskWhere.
func taskBranches(f store.TaskFilter) []branch {
	visible := []branch{{}}
	if f.RestrictToGroups || len(f.GroupIDs) > 0 {
		visible = nil
		for _, g := range f.GroupIDs {
			visible = append(visible, branch{` AND group_id = ?`, []any{g}})
		}
		if f.VisibleToUserID != "" {
			visible = append(visible, branch{` AND owner_id = ?`, []any{f.VisibleToUserID}})
		}
		if len(visible) == 0 {
			visible = []branch{{` AND 1 = 0`, nil}}
		}
	}
	if len(f.Statuses) == 0 {
		return visible
	}
	var out []branch
	for _, v := range visible {
		for _, s := range f.Statuses {
			out = append(out, branch{v.sql + ` AND status = ?`, append(append([]any{}, v.args...), string(s))})
		}
	}
	return out
}
