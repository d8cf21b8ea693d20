package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/sqlstore/sqlbase"
)

// modelCallTable is the model-call ledger, model_calls.
var modelCallTable = sqlbase.Table[model.ModelCall]{
	sqlbase.C("id", func(c *model.ModelCall) any { return &c.ID }),
	sqlbase.C("tenant_id", func(c *model.ModelCall) any { return &c.TenantID }),
	sqlbase.C("at", func(c *model.ModelCall) any { return sqlbase.Time(&c.At) }),
	sqlbase.C("user_id", func(c *model.ModelCall) any { return &c.UserID }),
	sqlbase.C("user_name", func(c *model.ModelCall) any { return &c.UserName }),
	sqlbase.C("project_id", func(c *model.ModelCall) any { return &c.ProjectID }),
	sqlbase.C("project_name", func(c *model.ModelCall) any { return &c.ProjectName }),
	sqlbase.C("group_id", func(c *model.ModelCall) any { return &c.GroupID }),
	sqlbase.C("group_name", func(c *model.ModelCall) any { return &c.GroupName }),
	sqlbase.C("endpoint", func(c *model.ModelCall) any { return &c.Endpoint }),
	sqlbase.C("alias", func(c *model.ModelCall) any { return &c.Alias }),
	sqlbase.C("model", func(c *model.ModelCall) any { return &c.Model }),
	sqlbase.C("target", func(c *model.ModelCall) any { return &c.Target }),
	sqlbase.C("stream", func(c *model.ModelCall) any { return sqlbase.BoolInt(&c.Stream) }),
	sqlbase.C("input_tokens", func(c *model.ModelCall) any { return &c.InputTokens }),
	sqlbase.C("output_tokens", func(c *model.ModelCall) any { return &c.OutputTokens }),
	sqlbase.C("cost_micros", func(c *model.ModelCall) any { return &c.CostMicros }),
	sqlbase.C("currency", func(c *model.ModelCall) any { return &c.Currency }),
	sqlbase.C("latency_micros", func(c *model.ModelCall) any { return &c.LatencyMicros }),
	sqlbase.C("status", func(c *model.ModelCall) any { return &c.Status }),
	sqlbase.C("outcome", func(c *model.ModelCall) any { return &c.Outcome }),
	sqlbase.C("guardrail", func(c *model.ModelCall) any { return &c.Guardrail }),
}

// modelCallChunks are the row counts of the INSERT statements a batch of
// calls is cut into, largest first. The gateway's meter writes batches of
// any size, and a statement text of its own for every size would be parsed
// afresh each time (SQLite parses a 200-row INSERT slower than it runs it,
// and pgx would fill its statement cache); with a few fixed sizes every
// text is prepared once per connection and reused.
var modelCallChunks = [...]int{128, 32, 8, 1}

// modelCallInserts holds the INSERT text of each size in modelCallChunks.
var modelCallInserts = func() (out [len(modelCallChunks)]string) {
	row := "(" + sqlbase.Placeholders(len(modelCallTable)) + ")"
	for i, n := range modelCallChunks {
		rows := make([]string, n)
		for j := range rows {
			rows[j] = row
		}
		out[i] = `INSERT INTO model_calls (` + modelCallTable.List() + `) VALUES ` + strings.Join(rows, ", ") + ` ON CONFLICT (id) DO NOTHING`
	}
	return out
}()

// InsertModelCalls records calls, skipping ids already recorded, in one
// transaction: multi-row inserts of the fixed sizes of modelCallChunks.
func (q *queries) InsertModelCalls(ctx context.Context, calls []*model.ModelCall) error {
	if len(calls) == 0 {
		return nil
	}
	insert := func(q *queries) error {
		args := make([]any, 0, min(len(calls), modelCallChunks[0])*len(modelCallTable))
		for rest := calls; len(rest) > 0; {
			size := 0
			for size < len(modelCallChunks)-1 && modelCallChunks[size] > len(rest) {
				size++
			}
			n := modelCallChunks[size]
			args = args[:0]
			for _, c := range rest[:n] {
				args = append(args, modelCallTable.Values(c)...)
			}
			rest = rest[n:]
			if _, err := q.ExecKept(ctx, modelCallInserts[size], args...); err != nil {
				return q.MapErr(err, fmt.Sprintf("record %d model calls", n), store.ErrNotFound)
			}
		}
		return nil
	}
	if len(calls) == 1 {
		return insert(q)
	}
	return q.atomic(ctx, insert)
}

// modelDimensions maps a dimension to its id and name columns. Model calls
// have no pool, GPU class, compute resource or profile: they fall under an
// empty key there (see ledgerGroupBy).
var modelDimensions = map[string][2]string{
	store.ByUser:            {"user_id", "user_name"},
	store.ByProject:         {"project_id", "project_name"},
	store.ByGroup:           {"group_id", "group_name"},
	store.ByAlias:           {"alias", "alias"},
	store.ByModel:           {"model", "model"},
	store.ByPool:            {},
	store.ByGPUClass:        {},
	store.ByComputeResource: {},
	store.ByProfile:         {},
}

// modelWhere is the WHERE clause of a model-usage query.
func modelWhere(tenantID string, u store.ModelUsageQuery) (string, []any) {
	where := `tenant_id = ? AND at >= ? AND at < ?`
	args := []any{tenantID, sqlbase.Micros(u.From), sqlbase.Micros(u.To)}
	if u.UserID != "" {
		where += ` AND user_id = ?`
		args = append(args, u.UserID)
	}
	if u.ProjectID != "" {
		where += ` AND project_id = ?`
		args = append(args, u.ProjectID)
	}
	if len(u.GroupIDs) > 0 {
		where += ` AND group_id IN (` + sqlbase.Placeholders(len(u.GroupIDs)) + `)`
		for _, g := range u.GroupIDs {
			args = append(args, g)
		}
	}
	if len(u.ExceptIDs) > 0 {
		where += ` AND id NOT IN (` + sqlbase.Placeholders(len(u.ExceptIDs)) + `)`
		for _, id := range u.ExceptIDs {
			args = append(args, id)
		}
	}
	return where, args
}

// SumModelCalls adds up the model-call ledger, grouped by u.By. A call
// with no currency (refused, blocked or unanswered: it cost nothing) does
// not make its row's currency "mixed".
func (q *queries) SumModelCalls(ctx context.Context, tenantID string, u store.ModelUsageQuery) ([]store.ModelUsageRow, error) {
	if !u.To.After(u.From) {
		return nil, fmt.Errorf("sum model calls: the range must end after it starts")
	}
	selects, idCols, err := ledgerGroupBy("sum model calls", modelDimensions, u.By)
	if err != nil {
		return nil, err
	}
	where, args := modelWhere(tenantID, u)
	query := `SELECT ` + strings.Join(append(selects, `COUNT(*)`, `SUM(input_tokens)`, `SUM(output_tokens)`, `SUM(cost_micros)`,
		`MIN(NULLIF(currency, ''))`, `MAX(NULLIF(currency, ''))`), ", ") + ` FROM model_calls WHERE ` + where
	if len(idCols) > 0 {
		query += ` GROUP BY ` + strings.Join(idCols, ", ") + ` ORDER BY ` + strings.Join(idCols, ", ")
	}
	rows, err := q.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("sum model calls: %w", err)
	}
	defer rows.Close()
	out := []store.ModelUsageRow{}
	for rows.Next() {
		keys := make([]store.UsageKey, len(u.By))
		dest := make([]any, 0, 2*len(u.By)+6)
		for i := range keys {
			keys[i].Dimension = u.By[i]
			dest = append(dest, &keys[i].ID, &keys[i].Name)
		}
		var calls int64
		var in, outTok, cost sql.NullInt64
		var curMin, curMax sql.NullString
		dest = append(dest, &calls, &in, &outTok, &cost, &curMin, &curMax)
		if err := rows.Scan(dest...); err != nil {
			return nil, fmt.Errorf("sum model calls: %w", err)
		}
		if calls == 0 {
			continue // no call in range: an aggregate over nothing
		}
		row := store.ModelUsageRow{Keys: keys, Calls: calls, InputTokens: in.Int64, OutputTokens: outTok.Int64, CostMicros: cost.Int64, Currency: curMin.String}
		if curMin.String != curMax.String {
			row.Currency = "mixed"
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sum model calls: %w", err)
	}
	return out, nil
}

// ListModelCalls lists calls newest first.
func (q *queries) ListModelCalls(ctx context.Context, tenantID string, u store.ModelUsageQuery, page store.Page) ([]*model.ModelCall, error) {
	where, args := modelWhere(tenantID, u)
	if page.After != "" {
		where += ` AND id < ?`
		args = append(args, page.After)
	}
	limit := page.Limit
	if limit <= 0 || limit > 1000 {
		limit = 1000
	}
	return sqlbase.GetAll(ctx, q.Q, "list model calls", modelCallTable.Scan,
		`SELECT `+modelCallTable.List()+` FROM model_calls WHERE `+where+` ORDER BY id DESC LIMIT `+fmt.Sprint(limit), args...)
}

// GetGateway reads a tenant's gateway configuration.
func (q *queries) GetGateway(ctx context.Context, tenantID string) (*model.Gateway, error) {
	var g model.Gateway
	if err := q.GetDoc(ctx, "gateway_configs", "gateway configuration", tenantID, &g); err != nil {
		return nil, err
	}
	return &g, nil
}

// PutGateway stores a tenant's gateway configuration whole.
func (q *queries) PutGateway(ctx context.Context, tenantID string, g *model.Gateway, at time.Time) error {
	return q.PutDoc(ctx, "gateway_configs", "gateway configuration", tenantID, g, at)
}
