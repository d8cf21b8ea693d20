package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/sqlstore/sqlbase"
)

// workerCredentialTable is the worker_credentials table.
var workerCredentialTable = sqlbase.Table[model.WorkerCredential]{
	sqlbase.C("id", func(c *model.WorkerCredential) any { return &c.ID }),
	sqlbase.C("tenant_id", func(c *model.WorkerCredential) any { return &c.TenantID }),
	sqlbase.C("pool_id", func(c *model.WorkerCredential) any { return &c.PoolID }),
	sqlbase.C("name", func(c *model.WorkerCredential) any { return &c.Name }),
	sqlbase.C("prefix", func(c *model.WorkerCredential) any { return &c.Prefix }),
	sqlbase.C("hash", func(c *model.WorkerCredential) any { return &c.Hash }),
	sqlbase.C("created_by", func(c *model.WorkerCredential) any { return &c.CreatedBy }),
	sqlbase.C("created_at", func(c *model.WorkerCredential) any { return sqlbase.Time(&c.CreatedAt) }),
	sqlbase.C("revoked_at", func(c *model.WorkerCredential) any { return sqlbase.TimePtr(&c.RevokedAt) }),
}

// CreateWorkerCredential stores a worker credential (its hash).
func (q *queries) CreateWorkerCredential(ctx context.Context, c *model.WorkerCredential) error {
	undo := sqlbase.AssignID(&c.ID)
	_, err := q.Write(ctx, "create worker credential "+c.Name, store.ErrNotFound,
		workerCredentialTable.Insert("worker_credentials"), workerCredentialTable.Values(c)...)
	if err != nil {
		undo()
	}
	return err
}

// GetWorkerCredentialByHash finds a credential by the hash of its secret.
func (q *queries) GetWorkerCredentialByHash(ctx context.Context, hash []byte) (*model.WorkerCredential, error) {
	if len(hash) == 0 {
		return nil, fmt.Errorf("get worker credential: %w", store.ErrNotFound)
	}
	return sqlbase.GetOne(ctx, q.Q, "get worker credential", workerCredentialTable.Scan,
		`SELECT `+workerCredentialTable.List()+` FROM worker_credentials WHERE hash = ?`, hash)
}

// ListWorkerCredentials lists a tenant's worker credentials, newest first.
func (q *queries) ListWorkerCredentials(ctx context.Context, tenantID string) ([]*model.WorkerCredential, error) {
	return sqlbase.GetAll(ctx, q.Q, "list worker credentials", workerCredentialTable.Scan,
		`SELECT `+workerCredentialTable.List()+` FROM worker_credentials WHERE tenant_id = ? ORDER BY created_at DESC, id DESC`, tenantID)
}

// RevokeWorkerCredential revokes a credential, keeping the first revocation
// time.
func (q *queries) RevokeWorkerCredential(ctx context.Context, tenantID, id string, at time.Time) error {
	return q.WriteOne(ctx, "revoke worker credential "+id, store.ErrNotFound,
		`UPDATE worker_credentials SET revoked_at = COALESCE(revoked_at, ?) WHERE tenant_id = ? AND id = ?`, sqlbase.Micros(at), tenantID, id)
}

// workerTable is the workers table.
var workerTable = sqlbase.Table[model.Worker]{
	sqlbase.C("id", func(w *model.Worker) any { return &w.ID }),
	sqlbase.C("tenant_id", func(w *model.Worker) any { return &w.TenantID }),
	sqlbase.C("pool_id", func(w *model.Worker) any { return &w.PoolID }),
	sqlbase.C("credential_id", func(w *model.Worker) any { return &w.CredentialID }),
	sqlbase.C("hostname", func(w *model.Worker) any { return &w.Hostname }),
	sqlbase.C("version", func(w *model.Worker) any { return &w.Version }),
	sqlbase.C("mode", func(w *model.Worker) any { return &w.Mode }),
	sqlbase.C("kind", func(w *model.Worker) any { return &w.Kind }),
	sqlbase.C("gpus", func(w *model.Worker) any { return sqlbase.List(&w.GPUs) }),
	sqlbase.C("labels", func(w *model.Worker) any { return sqlbase.Dict(&w.Labels) }),
	sqlbase.C("registered_at", func(w *model.Worker) any { return sqlbase.Time(&w.RegisteredAt) }),
	sqlbase.C("last_heartbeat_at", func(w *model.Worker) any { return sqlbase.Time(&w.LastHeartbeatAt) }),
}

// RegisterWorker creates or updates the worker of (tenant, pool, hostname).
func (q *queries) RegisterWorker(ctx context.Context, w *model.Worker) error {
	if w.ID == "" {
		w.ID = model.NewID()
	}
	var id string
	err := q.QueryRow(ctx, workerTable.Insert("workers")+`
		ON CONFLICT (tenant_id, pool_id, hostname) DO UPDATE SET credential_id = excluded.credential_id,
			version = excluded.version, mode = excluded.mode, kind = excluded.kind, gpus = excluded.gpus, labels = excluded.labels,
			registered_at = excluded.registered_at, last_heartbeat_at = excluded.last_heartbeat_at
		RETURNING id`, workerTable.Values(w)...).Scan(&id)
	if err != nil {
		return q.MapErr(err, "register worker "+w.Hostname, store.ErrNotFound)
	}
	w.ID = id
	return nil
}

// GetWorker returns a worker.
func (q *queries) GetWorker(ctx context.Context, tenantID, id string) (*model.Worker, error) {
	return sqlbase.GetOne(ctx, q.Q, "get worker "+id, workerTable.Scan,
		`SELECT `+workerTable.List()+` FROM workers WHERE tenant_id = ? AND id = ?`, tenantID, id)
}

// ListWorkers lists a tenant's workers by pool and hostname.
func (q *queries) ListWorkers(ctx context.Context, tenantID string) ([]*model.Worker, error) {
	return sqlbase.GetAll(ctx, q.Q, "list workers", workerTable.Scan,
		`SELECT `+workerTable.List()+` FROM workers WHERE tenant_id = ? ORDER BY pool_id, hostname`, tenantID)
}

// TouchWorker records a heartbeat.
func (q *queries) TouchWorker(ctx context.Context, tenantID, id string, at time.Time) error {
	return q.WriteOne(ctx, "touch worker "+id, store.ErrNotFound,
		`UPDATE workers SET last_heartbeat_at = ? WHERE tenant_id = ? AND id = ?`, sqlbase.Micros(at), tenantID, id)
}

// ClaimTask claims the first fitting task of a pool's hidden queue, as
// store.Queries documents: one UPDATE whose subquery picks the row (and on
// PostgreSQL skips rows another claim holds).
func (q *queries) ClaimTask(ctx context.Context, tenantID, poolID, workerID, reason string, fit store.ClaimFit, at, leaseUntil time.Time) (*model.Task, error) {
	cond, condArgs := claimCond(tenantID, poolID, fit)
	args := append([]any{string(model.TaskRunning), workerID, sqlbase.Micros(leaseUntil), sqlbase.Micros(at), sqlbase.Micros(at), reason, tenantID}, condArgs...)
	t, err := sqlbase.GetOne(ctx, q.Q, "claim a task of pool "+poolID, taskTable.Scan,
		`UPDATE tasks SET status = ?, worker_id = ?, attempt = attempt + 1, lease_expires_at = ?, started_at = ?,
			updated_at = ?, reason = ?, app_address = '', app_allow = '', app_refused = '', app_active_at = NULL, app_warned_at = NULL
		WHERE tenant_id = ? AND id = (
			SELECT id FROM tasks WHERE `+cond+`
			ORDER BY placed_at, queue_seq LIMIT 1`+q.Dialect().SkipLocked()+`)
		RETURNING `+taskTable.List(), args...)
	return t, err
}

// claimCond selects the placed tasks of a pool that fit a claim.
func claimCond(tenantID, poolID string, fit store.ClaimFit) (string, []any) {
	cond := `tenant_id = ? AND pool_id = ? AND status = ? AND size_nodes = 1 AND size_per_node_milli <= ?`
	if !fit.Fractions {
		cond += ` AND size_per_node_milli % 1000 = 0`
	}
	args := []any{tenantID, poolID, string(model.TaskPlaced), int64(fit.MaxPerNode)}
	if fit.ProjectID != "" {
		cond += ` AND project_id = ?`
		args = append(args, fit.ProjectID)
	}
	return cond, args
}

func (q *queries) Claimable(ctx context.Context, tenantID, poolID string, fit store.ClaimFit) (bool, error) {
	cond, args := claimCond(tenantID, poolID, fit)
	var one int
	err := q.QueryRow(ctx, `SELECT 1 FROM tasks WHERE `+cond+` LIMIT 1`, args...).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("look for claimable tasks of pool %s: %w", poolID, err)
	}
	return true, nil
}

// ExtendLeases extends the leases of a worker's running tasks whose attempt
// matches, and returns every task asked about as it is now. The tasks are
// read and written in chunks of idChunk, so that no statement has more
// variables than a driver takes (SQLite 32,766, PostgreSQL 65,535).
func (q *queries) ExtendLeases(ctx context.Context, tenantID, workerID string, attempts map[string]int, until time.Time) ([]*model.Task, error) {
	if len(attempts) == 0 {
		return []*model.Task{}, nil
	}
	ids := make([]string, 0, len(attempts))
	for id := range attempts {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var out []*model.Task
	err := q.atomic(ctx, func(q *queries) error {
		out = []*model.Task{}
		for chunk := range slices.Chunk(ids, idChunk) {
			args := []any{tenantID}
			for _, id := range chunk {
				args = append(args, id)
			}
			tasks, err := sqlbase.GetAll(ctx, q.Q, "read heartbeat tasks", taskTable.Scan,
				`SELECT `+taskTable.List()+` FROM tasks WHERE tenant_id = ? AND id IN (`+sqlbase.Placeholders(len(chunk))+`) ORDER BY id`, args...)
			if err != nil {
				return err
			}
			var live []any
			for _, t := range tasks {
				if t.Status == model.TaskRunning && t.Run.WorkerID == workerID && t.Run.Attempt == attempts[t.ID] {
					live = append(live, t.ID)
					u := sqlbase.FromMicros(sqlbase.Micros(until))
					t.Run.LeaseExpiresAt = &u
				}
			}
			if len(live) > 0 {
				args := append([]any{sqlbase.Micros(until), tenantID, workerID, string(model.TaskRunning)}, live...)
				if _, err := q.Write(ctx, "extend leases", store.ErrNotFound,
					`UPDATE tasks SET lease_expires_at = ? WHERE tenant_id = ? AND worker_id = ? AND status = ? AND id IN (`+
						sqlbase.Placeholders(len(live))+`)`, args...); err != nil {
					return err
				}
			}
			out = append(out, tasks...)
		}
		return nil
	})
	return out, err
}

// SetAppAddress records where an app instance's attempt answers (empty:
// not ready), as store.Queries documents.
func (q *queries) SetAppAddress(ctx context.Context, tenantID, workerID, taskID string, attempt int, a model.AppAddress) error {
	_, err := q.Write(ctx, "set the address of app instance "+taskID, store.ErrNotFound,
		`UPDATE tasks SET app_address = ?, app_allow = ?, app_refused = ? WHERE tenant_id = ? AND id = ? AND worker_id = ? AND attempt = ? AND status = ?`,
		a.Address, a.Allow, a.Refused, tenantID, taskID, workerID, attempt, string(model.TaskRunning))
	return err
}

// TouchAppActivity notes an app instance's use, coarsely, as
// store.Queries documents.
func (q *queries) TouchAppActivity(ctx context.Context, taskID string, at time.Time) (bool, error) {
	n, err := q.Write(ctx, "note the activity of app instance "+taskID, store.ErrNotFound,
		`UPDATE tasks SET app_active_at = ? WHERE id = ? AND status = ? AND (app_active_at IS NULL OR app_active_at <= ?)`,
		sqlbase.Micros(at), taskID, string(model.TaskRunning), sqlbase.Micros(at.Add(-store.AppActivityGrain)))
	return n > 0, err
}

// SetAppIdleWarned records (at set) or clears (at nil) an app instance's
// idle warning, as store.Queries documents.
func (q *queries) SetAppIdleWarned(ctx context.Context, tenantID, taskID string, attempt int, at *time.Time) (bool, error) {
	cond := `app_warned_at IS NOT NULL`
	if at != nil {
		cond = `app_warned_at IS NULL`
	}
	n, err := q.Write(ctx, "set the idle warning of app instance "+taskID, store.ErrNotFound,
		`UPDATE tasks SET app_warned_at = ? WHERE tenant_id = ? AND id = ? AND attempt = ? AND status = ? AND `+cond,
		sqlbase.NullMicros(at), tenantID, taskID, attempt, string(model.TaskRunning))
	return n > 0, err
}

// idChunk is how many ids one statement lists.
const idChunk = 1000

// lockTaskRow takes the write lock on a task's row for the rest of the
// transaction (ErrNotFound when there is none). A read-then-write of the
// task's counters (log_seq, metric_seq) made after it sees the latest
// committed values, so concurrent appends for one task number their rows
// one after the other instead of colliding on the same numbers
// (PostgreSQL's READ COMMITTED lets two transactions read the same
// counter; SQLite runs writers one at a time anyway).
func (q *queries) lockTaskRow(ctx context.Context, what, tenantID, taskID string) error {
	return q.WriteOne(ctx, what, store.ErrNotFound,
		`UPDATE tasks SET log_seq = log_seq WHERE tenant_id = ? AND id = ?`, tenantID, taskID)
}

// ListExpiredLeases lists a tenant's running tasks whose lease has run out.
func (q *queries) ListExpiredLeases(ctx context.Context, tenantID string, now time.Time) ([]*model.Task, error) {
	return sqlbase.GetAll(ctx, q.Q, "list expired leases", taskTable.Scan,
		`SELECT `+taskTable.List()+` FROM tasks WHERE status = ? AND lease_expires_at < ? AND tenant_id = ? ORDER BY queue_seq`,
		string(model.TaskRunning), sqlbase.Micros(now), tenantID)
}

// truncationNote is the line a log gets when it reaches its limit.
const truncationNote = "[klique: the log of this task reached its limit of %d bytes; later lines were not kept]"

// AppendLogs adds a batch of log lines, as store.Queries documents.
func (q *queries) AppendLogs(ctx context.Context, tenantID, taskID string, attempt int, lines []model.LogLine, limitBytes int64) (int, bool, error) {
	accepted := 0
	truncated := false
	err := q.atomic(ctx, func(q *queries) error {
		if err := q.lockTaskRow(ctx, "append logs of task "+taskID, tenantID, taskID); err != nil {
			return err
		}
		var used, seq, received int64
		var trunc, receivedAttempt int
		if err := q.QueryRow(ctx, `SELECT log_bytes, log_seq, log_truncated, log_received_attempt, log_received FROM tasks WHERE tenant_id = ? AND id = ?`,
			tenantID, taskID).Scan(&used, &seq, &trunc, &receivedAttempt, &received); err != nil {
			if err == sql.ErrNoRows {
				return fmt.Errorf("append logs of task %s: %w", taskID, store.ErrNotFound)
			}
			return fmt.Errorf("append logs of task %s: %w", taskID, err)
		}
		if trunc != 0 {
			truncated = true
			return nil
		}
		if receivedAttempt != attempt {
			received = 0 // numbering starts again with each attempt
		}
		// Lines the worker numbered and this attempt already has are a
		// batch sent again after its answer was lost: skipped. A number
		// far ahead is refused rather than taken as the highest, which
		// would make every later line look stored.
		highest := received
		fresh := lines[:0:0]
		for _, l := range lines {
			if l.N > highest+store.MaxLogNumberGap || l.N < 0 {
				return &store.LogNumberError{TaskID: taskID, Attempt: attempt, N: l.N, Highest: highest}
			}
			if l.N > 0 && l.N <= received {
				continue
			}
			received = max(received, l.N)
			fresh = append(fresh, l)
		}
		lines = fresh
		var keep []model.LogLine
		for _, l := range lines {
			n := int64(len(l.Line))
			if used+n > limitBytes {
				truncated = true
				break
			}
			used += n
			seq++
			l.Seq, l.Attempt = seq, attempt
			keep = append(keep, l)
		}
		if truncated {
			seq++
			at := time.Now()
			if len(lines) > 0 {
				at = lines[len(keep)].At
			}
			keep = append(keep, model.LogLine{Seq: seq, Attempt: attempt, At: at, Stream: "worker", Line: fmt.Sprintf(truncationNote, limitBytes)})
		}
		if err := sqlbase.InsertBatches(ctx, q.Q, "append logs of task "+taskID,
			`INSERT INTO task_logs (tenant_id, task_id, seq, attempt, at, stream, line) VALUES `, 7, len(keep),
			func(i int) []any {
				l := keep[i]
				return []any{tenantID, taskID, l.Seq, l.Attempt, sqlbase.Micros(l.At), l.Stream, l.Line}
			}); err != nil {
			return err
		}
		accepted = len(keep)
		if truncated {
			accepted--
		}
		flag := 0
		if truncated {
			flag = 1
		}
		_, err := q.Write(ctx, "count logs of task "+taskID, store.ErrNotFound,
			`UPDATE tasks SET log_bytes = ?, log_seq = ?, log_truncated = ?, log_received_attempt = ?, log_received = ? WHERE tenant_id = ? AND id = ?`,
			used, seq, flag, attempt, received, tenantID, taskID)
		return err
	})
	return accepted, truncated, err
}

func scanLogLine(r sqlbase.Scanner) (model.LogLine, error) {
	var l model.LogLine
	var at int64
	if err := r.Scan(&l.Seq, &l.Attempt, &at, &l.Stream, &l.Line); err != nil {
		return l, err
	}
	l.At = sqlbase.FromMicros(at)
	return l, nil
}

// ListLogs pages through a task's log.
func (q *queries) ListLogs(ctx context.Context, tenantID, taskID string, afterSeq int64, limit int, tail bool) ([]model.LogLine, error) {
	if limit <= 0 {
		limit = 1000
	}
	if tail {
		lines, err := sqlbase.GetAll(ctx, q.Q, "tail logs of task "+taskID, scanLogLine,
			`SELECT seq, attempt, at, stream, line FROM task_logs WHERE tenant_id = ? AND task_id = ? AND seq > ?
			ORDER BY seq DESC LIMIT ?`, tenantID, taskID, afterSeq, limit)
		if err != nil {
			return nil, err
		}
		for i, j := 0, len(lines)-1; i < j; i, j = i+1, j-1 {
			lines[i], lines[j] = lines[j], lines[i]
		}
		return lines, nil
	}
	return sqlbase.GetAll(ctx, q.Q, "list logs of task "+taskID, scanLogLine,
		`SELECT seq, attempt, at, stream, line FROM task_logs WHERE tenant_id = ? AND task_id = ? AND seq > ?
		ORDER BY seq LIMIT ?`, tenantID, taskID, afterSeq, limit)
}

// AppendMetrics adds a batch of metric points, numbering them.
func (q *queries) AppendMetrics(ctx context.Context, tenantID, taskID string, attempt int, points []model.MetricPoint) error {
	if len(points) == 0 {
		return nil
	}
	return q.atomic(ctx, func(q *queries) error {
		if err := q.lockTaskRow(ctx, "append metrics of task "+taskID, tenantID, taskID); err != nil {
			return err
		}
		var seq int64
		if err := q.QueryRow(ctx, `SELECT metric_seq FROM tasks WHERE tenant_id = ? AND id = ?`, tenantID, taskID).Scan(&seq); err != nil {
			if err == sql.ErrNoRows {
				return fmt.Errorf("append metrics of task %s: %w", taskID, store.ErrNotFound)
			}
			return fmt.Errorf("append metrics of task %s: %w", taskID, err)
		}
		base := seq
		if err := sqlbase.InsertBatches(ctx, q.Q, "append metrics of task "+taskID,
			`INSERT INTO task_metrics (tenant_id, task_id, seq, attempt, at, name, value, step) VALUES `, 8, len(points),
			func(i int) []any {
				p := points[i]
				return []any{tenantID, taskID, base + int64(i) + 1, attempt, sqlbase.Micros(p.At), p.Name, p.Value, p.Step}
			}); err != nil {
			return err
		}
		_, err := q.Write(ctx, "count metrics of task "+taskID, store.ErrNotFound,
			`UPDATE tasks SET metric_seq = ? WHERE tenant_id = ? AND id = ?`, base+int64(len(points)), tenantID, taskID)
		return err
	})
}

func scanMetric(r sqlbase.Scanner) (model.MetricPoint, error) {
	var p model.MetricPoint
	var at int64
	if err := r.Scan(&p.Seq, &p.Attempt, &at, &p.Name, &p.Value, &p.Step); err != nil {
		return p, err
	}
	p.At = sqlbase.FromMicros(at)
	return p, nil
}

// ListMetrics pages through a task's metric points.
func (q *queries) ListMetrics(ctx context.Context, tenantID, taskID, name string, afterSeq int64, limit int) ([]model.MetricPoint, error) {
	if limit <= 0 {
		limit = 1000
	}
	query := `SELECT seq, attempt, at, name, value, step FROM task_metrics WHERE tenant_id = ? AND task_id = ? AND seq > ?`
	args := []any{tenantID, taskID, afterSeq}
	if name != "" {
		query += ` AND name = ?`
		args = append(args, name)
	}
	query += ` ORDER BY seq LIMIT ?`
	return sqlbase.GetAll(ctx, q.Q, "list metrics of task "+taskID, scanMetric, query, append(args, limit)...)
}

// LastMetrics returns the newest point of each of a task's metrics.
func (q *queries) LastMetrics(ctx context.Context, tenantID, taskID string) ([]model.MetricPoint, error) {
	return sqlbase.GetAll(ctx, q.Q, "last metrics of task "+taskID, scanMetric,
		`SELECT m.seq, m.attempt, m.at, m.name, m.value, m.step FROM task_metrics m
		JOIN (SELECT name, MAX(seq) AS seq FROM task_metrics WHERE tenant_id = ? AND task_id = ? GROUP BY name) last
			ON last.name = m.name AND last.seq = m.seq
		WHERE m.tenant_id = ? AND m.task_id = ? ORDER BY m.name`, tenantID, taskID, tenantID, taskID)
}

// secretTable is the secrets table.
var secretTable = sqlbase.Table[model.Secret]{
	sqlbase.C("tenant_id", func(s *model.Secret) any { return &s.TenantID }),
	sqlbase.C("scope", func(s *model.Secret) any { return &s.Scope }),
	sqlbase.C("scope_id", func(s *model.Secret) any { return &s.ScopeID }),
	sqlbase.C("name", func(s *model.Secret) any { return &s.Name }),
	sqlbase.C("ciphertext", func(s *model.Secret) any { return &s.Ciphertext }),
	sqlbase.C("updated_by", func(s *model.Secret) any { return &s.UpdatedBy }),
	sqlbase.C("created_at", func(s *model.Secret) any { return sqlbase.Time(&s.CreatedAt) }),
	sqlbase.C("updated_at", func(s *model.Secret) any { return sqlbase.Time(&s.UpdatedAt) }),
}

// PutSecret creates or replaces a secret.
func (q *queries) PutSecret(ctx context.Context, s *model.Secret) error {
	_, err := q.Write(ctx, "put secret "+s.Name, store.ErrNotFound,
		secretTable.Insert("secrets")+`
		ON CONFLICT (tenant_id, scope, scope_id, name) DO UPDATE SET ciphertext = excluded.ciphertext,
			updated_by = excluded.updated_by, updated_at = excluded.updated_at`,
		secretTable.Values(s)...)
	return err
}

// GetSecret returns one secret.
func (q *queries) GetSecret(ctx context.Context, tenantID, scope, scopeID, name string) (*model.Secret, error) {
	return sqlbase.GetOne(ctx, q.Q, "get secret "+name, secretTable.Scan,
		`SELECT `+secretTable.List()+` FROM secrets WHERE tenant_id = ? AND scope = ? AND scope_id = ? AND name = ?`,
		tenantID, scope, scopeID, name)
}

// ListSecrets lists a scope's secrets by name.
func (q *queries) ListSecrets(ctx context.Context, tenantID, scope, scopeID string) ([]*model.Secret, error) {
	return sqlbase.GetAll(ctx, q.Q, "list secrets", secretTable.Scan,
		`SELECT `+secretTable.List()+` FROM secrets WHERE tenant_id = ? AND scope = ? AND scope_id = ? ORDER BY name`,
		tenantID, scope, scopeID)
}

// DeleteSecret deletes a secret.
func (q *queries) DeleteSecret(ctx context.Context, tenantID, scope, scopeID, name string) error {
	return q.WriteOne(ctx, "delete secret "+name, store.ErrNotFound,
		`DELETE FROM secrets WHERE tenant_id = ? AND scope = ? AND scope_id = ? AND name = ?`, tenantID, scope, scopeID, name)
}
