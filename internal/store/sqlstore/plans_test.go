package sqlstore_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/pgtest"
	"github.com/klique-ai/klique/internal/store/postgres"
	"github.com/klique-ai/klique/internal/store/sqlite"
	"github.com/klique-ai/klique/internal/store/sqlstore"
)

// planRows is how many rows each listed table gets before the plans are
// read: enough that a scan of a project, a group or the tenant reads
// thousands of rows where an index-ordered page reads a few hundred.
const planRows = 30000

// maxRowsRead bounds the rows a page of 50 may read from the big tables on
// PostgreSQL (EXPLAIN ANALYZE, rows returned plus rows filtered out, over
// every scan): at most a page per branch of the member rule, and the page.
// A plan that scans a project (3,000 tasks), a group or the tenant reads
// more, whatever its shape.
const maxRowsRead = 1000

// planCase is a list as a channel asks for it, and the indexes its plan
// must use ("a|b": either). A tenant's audit trail or model calls may also
// be read backwards through the primary key (seq, id) with a tenant filter
// when the statistics say the tenant holds much of the table; the bound on
// rows read keeps that choice honest on PostgreSQL.
type planCase struct {
	name    string
	list    func(ctx context.Context, q store.Queries) error
	indexes []string
}

// planWorld is what the seed made: ids the cases filter on.
type planWorld struct {
	tenant, member, other string
	projects, users       []string
}

func groupID(i int) string    { return fmt.Sprintf("g%02d", i) }
func resourceID(i int) string { return fmt.Sprintf("cr%02d", i) }

func planCases(w planWorld) []planCase {
	page := store.Page{Limit: 50}
	tasks := func(f store.TaskFilter, p store.Page, newest bool) func(context.Context, store.Queries) error {
		return func(ctx context.Context, q store.Queries) error {
			_, err := q.ListTasks(ctx, w.tenant, f, p, newest)
			return err
		}
	}
	member := store.TaskFilter{RestrictToGroups: true, GroupIDs: []string{groupID(1), groupID(2)}, VisibleToUserID: w.member}
	inProject := member
	inProject.ProjectID = w.projects[1]
	running := member
	running.Statuses = []model.TaskStatus{model.TaskRunning}
	mine := member
	mine.OwnerID = w.member
	audit := func(f store.AuditFilter, p store.Page) func(context.Context, store.Queries) error {
		return func(ctx context.Context, q store.Queries) error {
			_, err := q.ListAudit(ctx, w.tenant, f, p)
			return err
		}
	}
	from, to := time.Unix(0, 0), time.Unix(1<<40, 0)
	calls := func(u store.ModelUsageQuery) func(context.Context, store.Queries) error {
		u.From, u.To = from, to
		return func(ctx context.Context, q store.Queries) error {
			_, err := q.ListModelCalls(ctx, w.tenant, u, page)
			return err
		}
	}
	logs := func(tail bool) func(context.Context, store.Queries) error {
		return func(ctx context.Context, q store.Queries) error {
			_, err := q.ListLogs(ctx, w.tenant, "t1", 100, 50, tail)
			return err
		}
	}
	return []planCase{
		{"all tasks", tasks(store.TaskFilter{}, page, true), []string{"tasks_seq"}},
		{"all tasks, oldest first", tasks(store.TaskFilter{}, page, false), []string{"tasks_seq"}},
		{"all tasks, next page", tasks(store.TaskFilter{}, store.Page{Limit: 50, After: "15000"}, true), []string{"tasks_seq"}},
		{"a project", tasks(store.TaskFilter{ProjectID: w.projects[1]}, page, true), []string{"tasks_project"}},
		{"a project's queued tasks", tasks(store.TaskFilter{ProjectID: w.projects[1], Statuses: []model.TaskStatus{model.TaskQueued}}, page, true),
			[]string{"tasks_project_status"}},
		{"running tasks", tasks(store.TaskFilter{Statuses: []model.TaskStatus{model.TaskRunning}}, page, true), []string{"tasks_status"}},
		{"queued or running tasks", tasks(store.TaskFilter{Statuses: []model.TaskStatus{model.TaskQueued, model.TaskRunning}}, page, true),
			[]string{"tasks_status"}},
		{"a member's tasks", tasks(member, page, true), []string{"tasks_group_seq", "tasks_owner"}},
		{"a member's tasks in a project", tasks(inProject, page, true), []string{"tasks_project_group", "tasks_project_owner"}},
		{"a member's tasks in a project, next page", tasks(inProject, store.Page{Limit: 50, After: "15000"}, true),
			[]string{"tasks_project_group", "tasks_project_owner"}},
		{"a member's running tasks", tasks(running, page, true), []string{"tasks_group", "tasks_owner_status"}},
		{"a member's own tasks", tasks(mine, page, true), []string{"tasks_owner"}},
		{"a group's tasks", tasks(store.TaskFilter{RestrictToGroups: true, GroupIDs: []string{groupID(3)}}, page, true),
			[]string{"tasks_group_seq"}},
		{"a compute resource", tasks(store.TaskFilter{ComputeResourceID: resourceID(1)}, page, true), []string{"tasks_compute_resource"}},
		{"a compute resource's queue", tasks(store.TaskFilter{ComputeResourceID: resourceID(1), Statuses: []model.TaskStatus{model.TaskQueued}},
			store.Page{Limit: 50}, false), []string{"tasks_queue"}},
		{"the audit trail", audit(store.AuditFilter{}, page), []string{"audit_log_tenant|audit_log_pkey"}},
		{"the audit trail, next page", audit(store.AuditFilter{}, store.Page{Limit: 50, After: "15000"}), []string{"audit_log_tenant|audit_log_pkey"}},
		{"an actor's audit trail", audit(store.AuditFilter{ActorID: w.member}, page), []string{"audit_log_actor|audit_log_pkey"}},
		{"an object kind's audit trail", audit(store.AuditFilter{ObjectKind: "project"}, page), []string{"audit_log_kind|audit_log_pkey"}},
		{"an object's audit trail", audit(store.AuditFilter{ObjectID: "o7"}, page), []string{"audit_log_object|audit_log_pkey"}},
		{"model calls", calls(store.ModelUsageQuery{}), []string{"model_calls_id|model_calls_pkey"}},
		{"a project's model calls", calls(store.ModelUsageQuery{ProjectID: w.projects[1]}), []string{"model_calls_project_id|model_calls_pkey"}},
		{"a user's model calls", calls(store.ModelUsageQuery{UserID: w.member}), []string{"model_calls_user_id|model_calls_pkey"}},
		{"a task's log", logs(false), []string{"task_logs"}},
		{"a task's log tail", logs(true), []string{"task_logs"}},
	}
}

// TestListPlansUseIndexes seeds 30,000 tasks, audit entries, model calls
// and log lines, has the planner analyse them, and checks the plan of every
// list a channel asks for: read in order from the intended index, no scan of
// a whole table, project or group, no sort of more than a few pages.
func TestListPlansUseIndexes(t *testing.T) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "plans.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		checkPlans(t, s, false)
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		s, err := postgres.Open(t.Context(), pgtest.RequirePostgresURL(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		checkPlans(t, s, true)
	})
}

func checkPlans(t *testing.T, s store.Store, pg bool) {
	ctx := t.Context()
	w := seedPlanWorld(t, s, pg)
	db := sqlstore.DB(s)
	for _, c := range planCases(w) {
		recs := sqlstore.RecordQueries(s, func(q store.Queries) { _ = c.list(ctx, q) })
		if len(recs) != 1 {
			t.Fatalf("%s: ran %d statements, want 1", c.name, len(recs))
		}
		r := recs[0]
		if pg {
			checkPostgresPlan(t, db, c, r)
		} else {
			checkSQLitePlan(t, db, c, r)
		}
	}
}

// checkSQLitePlan reads EXPLAIN QUERY PLAN: every table is searched through
// an index (no "SCAN tasks"), the intended indexes are used, and a temporary
// B-tree sorts only the union of the branches' pages (the outer SEARCH by
// queue sequence number), never a branch.
func checkSQLitePlan(t *testing.T, db *sql.DB, c planCase, r sqlstore.Recorded) {
	rows, err := db.QueryContext(t.Context(), `EXPLAIN QUERY PLAN `+r.Query, r.Args...)
	if err != nil {
		t.Fatalf("%s: explain: %v\n%s", c.name, err, r.Query)
	}
	defer rows.Close()
	var lines []string
	parents := map[int]int{}
	sorts := []int{}
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			t.Fatal(err)
		}
		parents[id] = parent
		lines = append(lines, detail)
		if strings.Contains(detail, "TEMP B-TREE FOR ORDER BY") {
			sorts = append(sorts, parent)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	plan := strings.Join(lines, "\n")
	for _, tbl := range []string{"tasks", "audit_log", "model_calls", "task_logs"} {
		for _, l := range lines {
			if l == "SCAN "+tbl || strings.HasPrefix(l, "SCAN "+tbl+" ") && !strings.Contains(l, "COVERING INDEX") && !strings.Contains(l, "USING INDEX") {
				t.Errorf("%s: scans %s without an index:\n%s", c.name, tbl, plan)
			}
		}
	}
	for _, p := range sorts {
		if p != 0 || !strings.Contains(plan, "LIST SUBQUERY") {
			t.Errorf("%s: sorts rows a branch read rather than the union of pages:\n%s", c.name, plan)
		}
	}
	for _, alts := range c.indexes {
		if !slices.ContainsFunc(strings.Split(alts, "|"), func(ix string) bool {
			return strings.Contains(plan+"\n", "INDEX "+ix+" ") || strings.Contains(plan+"\n", "INDEX "+ix+"\n") ||
				ix == "task_logs" && strings.Contains(plan, "sqlite_autoindex_task_logs") ||
				strings.HasSuffix(ix, "_pkey") && strings.Contains(plan, "INTEGER PRIMARY KEY")
		}) {
			t.Errorf("%s: does not use index %s:\n%s", c.name, alts, plan)
		}
	}
}

// checkPostgresPlan runs EXPLAIN ANALYZE: no Seq Scan of a big table, the
// intended indexes used, and at most maxRowsRead rows read from the big
// tables in all (a Sort above a scan of a project would read thousands).
func checkPostgresPlan(t *testing.T, db *sql.DB, c planCase, r sqlstore.Recorded) {
	var out string
	var bad []string
	if err := db.QueryRowContext(t.Context(), `EXPLAIN (ANALYZE, FORMAT JSON) `+r.Query, r.Args...).Scan(&out); err != nil {
		t.Fatalf("%s: explain: %v\n%s", c.name, err, r.Query)
	}
	var doc []struct{ Plan map[string]any }
	if err := json.Unmarshal([]byte(out), &doc); err != nil || len(doc) != 1 {
		t.Fatalf("%s: explain output: %v", c.name, err)
	}
	used := map[string]bool{}
	read := 0.0
	var walk func(n map[string]any)
	walk = func(n map[string]any) {
		rel, _ := n["Relation Name"].(string)
		big := rel == "tasks" || rel == "audit_log" || rel == "model_calls" || rel == "task_logs"
		if ix, ok := n["Index Name"].(string); ok {
			used[ix] = true
		}
		if big {
			if n["Node Type"] == "Seq Scan" {
				bad = append(bad, "Seq Scan on "+rel)
			}
			loops, _ := n["Actual Loops"].(float64)
			rows, _ := n["Actual Rows"].(float64)
			removed, _ := n["Rows Removed by Filter"].(float64)
			read += loops * (rows + removed)
		}
		kids, _ := n["Plans"].([]any)
		for _, k := range kids {
			if m, ok := k.(map[string]any); ok {
				walk(m)
			}
		}
	}
	walk(doc[0].Plan)
	for _, alts := range c.indexes {
		if !slices.ContainsFunc(strings.Split(alts, "|"), func(ix string) bool { return used[ix] || used[ix+"_pkey"] }) {
			bad = append(bad, fmt.Sprintf("does not use index %s (uses %v)", alts, used))
		}
	}
	if read > maxRowsRead {
		bad = append(bad, fmt.Sprintf("reads %.0f rows for a page of 50, want at most %d", read, maxRowsRead))
	}
	if len(bad) > 0 {
		t.Errorf("%s: %s\n%s\n%s", c.name, strings.Join(bad, "; "), r.Query, out)
	}
}

// seedPlanWorld makes a tenant with 10 projects, 5 users and planRows
// tasks, audit entries, model calls and log lines spread over them, then
// has the planner analyse the tables. Most tasks have ended, as in a
// long-lived installation: queued and running ones are a few percent.
func seedPlanWorld(t *testing.T, s store.Store, pg bool) planWorld {
	ctx := t.Context()
	tn := &model.Tenant{Name: "plans"}
	if err := s.CreateTenant(ctx, tn); err != nil {
		t.Fatal(err)
	}
	w := planWorld{tenant: tn.ID}
	// A second tenant holds three quarters of the audit trail, so that reading
	// the trail in seq order alone (SQLite's rowid) is not a fair plan.
	other := &model.Tenant{Name: "others"}
	if err := s.CreateTenant(ctx, other); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		u := &model.User{TenantID: tn.ID, Name: fmt.Sprintf("u%d", i), Role: model.RoleMember}
		if err := s.CreateUser(ctx, u); err != nil {
			t.Fatal(err)
		}
		w.users = append(w.users, u.ID)
	}
	w.member, w.other = w.users[0], w.users[1]
	for i := range 10 {
		p := &model.Project{TenantID: tn.ID, Name: fmt.Sprintf("p%d", i)}
		if err := s.CreateProject(ctx, p); err != nil {
			t.Fatal(err)
		}
		w.projects = append(w.projects, p.ID)
	}
	var groups, resources []string
	for i := range 20 {
		groups = append(groups, groupID(i))
		resources = append(resources, resourceID(i))
	}
	statuses := []string{"completed", "completed", "completed", "completed", "failed", "aborted",
		"completed", "completed", "completed", "completed", "completed", "completed", "completed", "completed",
		"completed", "completed", "completed", "completed", "completed", "completed", "completed", "completed",
		"completed", "completed", "completed", "completed", "completed", "completed", "completed", "completed",
		"completed", "completed", "completed", "completed", "completed", "completed", "completed", "completed",
		"completed", "queued", "running", "placed"}
	ten := "'" + tn.ID + "'"
	series(t, s, pg, `tasks (id, tenant_id, project_id, owner_id, compute_resource_id, policy_id, profile_id, group_id,
		name, spec, size_nodes, size_per_node_milli, status, reason, queue_seq, pool_id, cloned_from_id, created_at, updated_at)`,
		`'t' || i, `+ten+`, `+pick(w.projects, "i")+`, `+pick(w.users, "i / 7")+`, `+pick(resources, "i / 3")+`, 'pol', 'prof', `+
			pick(groups, "i / 11")+`, 'task', '{}', 1, 1000, `+pick(statuses, "i / 13")+`, '', i, `+pick([]string{"pool1", "pool2"}, "i")+`, '', i, i`)
	series(t, s, pg, `audit_log (seq, id, tenant_id, at, actor_id, actor_name, channel, action, object_kind, object_id, object_name, detail)`,
		`i, 'a' || i, `+pick([]string{tn.ID, other.ID, other.ID, other.ID}, "i")+`, i, `+pick(w.users, "i")+`, 'n', 'graph', 'update', `+pick([]string{"task", "project", "pool", "user"}, "i / 5")+
			`, 'o' || (i % 3000), 'n', ''`)
	series(t, s, pg, `model_calls (id, tenant_id, at, user_id, user_name, project_id, project_name, group_id, group_name, endpoint, alias,
		model, target, stream, input_tokens, output_tokens, cost_micros, currency, latency_micros, status, outcome, guardrail)`,
		`'mc' || (1000000 + i), `+ten+`, i, `+pick(w.users, "i")+`, 'n', `+pick(w.projects, "i / 5")+`, 'p', `+pick(groups, "i")+
			`, 'g', 'chat', 'a', 'm', 't', 0, 1, 1, 1, 'USD', 1, 200, 'ok', ''`)
	series(t, s, pg, `task_logs (tenant_id, task_id, seq, attempt, at, stream, line)`,
		ten+`, 't' || (i % 3), i, 1, i, 'stdout', 'line'`)
	analyze := `ANALYZE`
	if _, err := sqlstore.DB(s).ExecContext(ctx, analyze); err != nil {
		t.Fatalf("analyze: %v", err)
	}
	return w
}

// pick is a SQL expression choosing one of vals by an integer expression,
// the same on both dialects.
func pick(vals []string, expr string) string {
	var sb strings.Builder
	sb.WriteString("CASE (" + expr + ") % " + fmt.Sprint(len(vals)))
	for i, v := range vals {
		fmt.Fprintf(&sb, " WHEN %d THEN '%s'", i, v)
	}
	sb.WriteString(" END")
	return sb.String()
}

// series inserts planRows rows into table, i running from 1: with
// generate_series on PostgreSQL, a recursive CTE on SQLite.
func series(t *testing.T, s store.Store, pg bool, table, values string) {
	q := `WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < ` + fmt.Sprint(planRows) + `)
		INSERT INTO ` + table + ` SELECT ` + values + ` FROM s`
	if pg {
		q = `INSERT INTO ` + table + ` SELECT ` + values + ` FROM generate_series(1, ` + fmt.Sprint(planRows) + `) AS s(i)`
	}
	if _, err := sqlstore.DB(s).ExecContext(t.Context(), q); err != nil {
		t.Fatalf("seed %s: %v", strings.Fields(table)[0], err)
	}
}
