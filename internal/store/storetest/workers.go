package storetest

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
)

// placedTask enqueues a task of the given size on q and places it on pool at
// placedAt.
func placedTask(t *testing.T, b *testBundle, q *queue, owner *model.User, pool string, size model.Size, placedAt time.Time) *model.Task {
	t.Helper()
	tk := b.task(t, q, owner, func(tk *model.Task) { tk.Size = size })
	_, err := b.store.PlaceTasks(b.ctx, b.tenant.ID, []*model.Placement{placement(tk, pool, placedAt)}, placedReason)
	must(t, err)
	return tk
}

func exerciseWorkers(t *testing.T, setup setupFunc) {
	one := model.Size{Nodes: 1, PerNode: 1000}

	t.Run("worker credentials are found by hash across tenants, listed and revoked", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		pool := b.pool(t)
		c := &model.WorkerCredential{TenantID: b.tenant.ID, PoolID: pool.ID, Name: "rack 1", Prefix: "kqw_abc",
			Hash: []byte("hash-of-rack-1"), CreatedBy: "ada", CreatedAt: b.now}
		must(t, b.store.CreateWorkerCredential(b.ctx, c))
		got, err := b.store.GetWorkerCredentialByHash(b.ctx, []byte("hash-of-rack-1"))
		must(t, err)
		if got.ID != c.ID || got.PoolID != pool.ID || got.TenantID != b.tenant.ID || got.RevokedAt != nil {
			t.Fatalf("credential %s", show(got))
		}
		dup := *c
		dup.ID = ""
		wantErr(t, b.store.CreateWorkerCredential(b.ctx, &dup), store.ErrConflict)
		_, err = b.store.GetWorkerCredentialByHash(b.ctx, []byte("other"))
		wantErr(t, err, store.ErrNotFound)
		wantErr(t, b.store.RevokeWorkerCredential(b.ctx, b.other.ID, c.ID, b.now), store.ErrNotFound)
		must(t, b.store.RevokeWorkerCredential(b.ctx, b.tenant.ID, c.ID, b.now))
		list, err := b.store.ListWorkerCredentials(b.ctx, b.tenant.ID)
		must(t, err)
		if len(list) != 1 || list[0].RevokedAt == nil {
			t.Fatalf("credentials %s", show(list))
		}
	})

	t.Run("a worker registering again from its host is the same worker", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		pool := b.pool(t)
		w := &model.Worker{TenantID: b.tenant.ID, PoolID: pool.ID, CredentialID: "c1", Hostname: "gpu-01", Version: "1.0",
			Mode: "process", Kind: "bare_metal", GPUs: []model.WorkerGPU{{Index: 0, UUID: "GPU-a", MemoryMB: 81920}},
			Labels: map[string]string{"rack": "r7"}, RegisteredAt: b.now, LastHeartbeatAt: b.now}
		must(t, b.store.RegisterWorker(b.ctx, w))
		first := w.ID
		got, err := b.store.GetWorker(b.ctx, b.tenant.ID, first)
		must(t, err)
		if len(got.GPUs) != 1 || got.GPUs[0].MemoryMB != 81920 || got.Labels["rack"] != "r7" {
			t.Fatalf("worker %s", show(got))
		}
		again := &model.Worker{TenantID: b.tenant.ID, PoolID: pool.ID, CredentialID: "c2", Hostname: "gpu-01", Version: "1.1",
			Mode: "docker", Kind: "bare_metal", RegisteredAt: b.now.Add(time.Hour), LastHeartbeatAt: b.now.Add(time.Hour)}
		must(t, b.store.RegisterWorker(b.ctx, again))
		checkEqual(t, "id on re-registration", again.ID, first)
		got, err = b.store.GetWorker(b.ctx, b.tenant.ID, first)
		must(t, err)
		if got.Version != "1.1" || got.Mode != "docker" || len(got.GPUs) != 0 || len(got.Labels) != 0 {
			t.Fatalf("worker %s", show(got))
		}
		must(t, b.store.TouchWorker(b.ctx, b.tenant.ID, first, b.now.Add(2*time.Hour)))
		list, err := b.store.ListWorkers(b.ctx, b.tenant.ID)
		must(t, err)
		if len(list) != 1 || !list[0].LastHeartbeatAt.Equal(b.now.Add(2*time.Hour).Truncate(time.Microsecond)) {
			t.Fatalf("workers %s", show(list))
		}
		_, err = b.store.GetWorker(b.ctx, b.other.ID, first)
		wantErr(t, err, store.ErrNotFound)
	})

	t.Run("ClaimTask takes the pool's hidden queue in order and only what fits", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		owner, q := b.user(t), b.queue(t)
		pool, other := b.pool(t), b.pool(t)
		first := placedTask(t, b, q, owner, pool.ID, one, b.now)
		eighth := placedTask(t, b, q, owner, pool.ID, model.Size{Nodes: 1, PerNode: 125}, b.now.Add(time.Second))
		four := placedTask(t, b, q, owner, pool.ID, model.Size{Nodes: 1, PerNode: 4000}, b.now.Add(2*time.Second))
		placedTask(t, b, q, owner, pool.ID, model.Size{Nodes: 2, PerNode: 1000}, b.now.Add(3*time.Second))
		placedTask(t, b, q, owner, other.ID, one, b.now)
		b.task(t, q, owner) // queued, not placed

		lease := b.now.Add(time.Minute)
		// Claimable answers as ClaimTask would, without claiming.
		claimable := func(tenantID, poolID string, fit store.ClaimFit, want bool) {
			t.Helper()
			ok, err := b.store.Claimable(b.ctx, tenantID, poolID, fit)
			must(t, err)
			if ok != want {
				t.Fatalf("Claimable(%+v) = %v, want %v", fit, ok, want)
			}
		}
		claimable(b.tenant.ID, pool.ID, store.ClaimFit{MaxPerNode: 2000}, true)
		claimable(b.tenant.ID, pool.ID, store.ClaimFit{MaxPerNode: 500, Fractions: true}, true)
		claimable(b.tenant.ID, pool.ID, store.ClaimFit{MaxPerNode: 500}, false)
		got, err := b.store.ClaimTask(b.ctx, b.tenant.ID, pool.ID, "w1", "running", store.ClaimFit{MaxPerNode: 2000}, b.now, lease)
		must(t, err)
		if got.ID != first.ID || got.Status != model.TaskRunning || got.Run.WorkerID != "w1" || got.Run.Attempt != 1 ||
			got.Run.LeaseExpiresAt == nil || !got.Run.LeaseExpiresAt.Equal(lease.Truncate(time.Microsecond)) || got.Run.StartedAt == nil {
			t.Fatalf("claimed %s", show(got))
		}
		// Without fractions the eighth is skipped; the 4-GPU task does not
		// fit in 2; the multi-node task never goes to one worker.
		claimable(b.tenant.ID, pool.ID, store.ClaimFit{MaxPerNode: 2000}, false)
		_, err = b.store.ClaimTask(b.ctx, b.tenant.ID, pool.ID, "w1", "running", store.ClaimFit{MaxPerNode: 2000}, b.now, lease)
		wantErr(t, err, store.ErrNotFound)
		got, err = b.store.ClaimTask(b.ctx, b.tenant.ID, pool.ID, "w2", "running", store.ClaimFit{MaxPerNode: 8000, Fractions: true}, b.now, lease)
		must(t, err)
		checkEqual(t, "with fractions", got.ID, eighth.ID)
		got, err = b.store.ClaimTask(b.ctx, b.tenant.ID, pool.ID, "w2", "running", store.ClaimFit{MaxPerNode: 8000}, b.now, lease)
		must(t, err)
		checkEqual(t, "4 GPUs in 8", got.ID, four.ID)
		claimable(b.tenant.ID, pool.ID, store.ClaimFit{MaxPerNode: 64000, Fractions: true}, false)
		_, err = b.store.ClaimTask(b.ctx, b.tenant.ID, pool.ID, "w2", "running", store.ClaimFit{MaxPerNode: 64000, Fractions: true}, b.now, lease)
		wantErr(t, err, store.ErrNotFound)
		claimable(b.tenant.ID, other.ID, store.ClaimFit{MaxPerNode: 8000}, true)
		claimable(b.other.ID, other.ID, store.ClaimFit{MaxPerNode: 8000}, false)
		_, err = b.store.ClaimTask(b.ctx, b.other.ID, other.ID, "w3", "running", store.ClaimFit{MaxPerNode: 8000}, b.now, lease)
		wantErr(t, err, store.ErrNotFound)
	})

	t.Run("concurrent claims never take one task twice", func(t *testing.T) {
		t.Parallel()
		b := setup(t, ownStore)
		owner, q, pool := b.user(t), b.queue(t), b.pool(t)
		for i := 0; i < 10; i++ {
			placedTask(t, b, q, owner, pool.ID, one, b.now.Add(time.Duration(i)*time.Millisecond))
		}
		var mu sync.Mutex
		claimed := map[string]string{}
		var wg sync.WaitGroup
		for w := 0; w < 16; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				worker := fmt.Sprintf("w%d", w)
				for {
					tk, err := b.store.ClaimTask(b.ctx, b.tenant.ID, pool.ID, worker, "running", store.ClaimFit{MaxPerNode: 8000}, b.now, b.now.Add(time.Minute))
					if err != nil {
						if !strings.Contains(err.Error(), "not found") {
							t.Error(err)
						}
						return
					}
					mu.Lock()
					if prev, dup := claimed[tk.ID]; dup {
						t.Errorf("task %s claimed by %s and %s", tk.ID, prev, worker)
					}
					claimed[tk.ID] = worker
					mu.Unlock()
				}
			}(w)
		}
		wg.Wait()
		checkEqual(t, "tasks claimed", len(claimed), 10)
	})

	t.Run("ExtendLeases extends matching attempts only and reports every task as it is", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		owner, q, pool := b.user(t), b.queue(t), b.pool(t)
		a := placedTask(t, b, q, owner, pool.ID, one, b.now)
		c := placedTask(t, b, q, owner, pool.ID, one, b.now.Add(time.Second))
		lease := b.now.Add(time.Minute)
		ta, err := b.store.ClaimTask(b.ctx, b.tenant.ID, pool.ID, "w1", "running", store.ClaimFit{MaxPerNode: 1000}, b.now, lease)
		must(t, err)
		_, err = b.store.ClaimTask(b.ctx, b.tenant.ID, pool.ID, "w1", "running", store.ClaimFit{MaxPerNode: 1000}, b.now, lease)
		must(t, err)
		later := b.now.Add(5 * time.Minute)
		got, err := b.store.ExtendLeases(b.ctx, b.tenant.ID, "w1", map[string]int{a.ID: ta.Run.Attempt, c.ID: 7}, later)
		must(t, err)
		sort.Slice(got, func(i, j int) bool { return got[i].ID == a.ID })
		if len(got) != 2 || !got[0].Run.LeaseExpiresAt.Equal(later.Truncate(time.Microsecond)) {
			t.Fatalf("tasks %s", show(got))
		}
		expired, err := b.store.ListExpiredLeases(b.ctx, b.tenant.ID, b.now.Add(2*time.Minute))
		must(t, err)
		if len(expired) != 1 || expired[0].ID != c.ID {
			t.Fatalf("expired %s: want only the task with the stale attempt", show(expired))
		}
	})

	t.Run("AppendLogs numbers lines, stops at the limit with one note, and ListLogs pages and tails", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		tk := b.task(t, b.queue(t), b.user(t))
		var lines []model.LogLine
		for i := 0; i < 5; i++ {
			lines = append(lines, model.LogLine{At: b.now, Stream: "stdout", Line: fmt.Sprintf("line %d", i)})
		}
		n, trunc, err := b.store.AppendLogs(b.ctx, b.tenant.ID, tk.ID, 1, lines, 30)
		must(t, err)
		if n != 5 || trunc {
			t.Fatalf("appended %d, truncated %v", n, trunc)
		}
		n, trunc, err = b.store.AppendLogs(b.ctx, b.tenant.ID, tk.ID, 1, lines[:2], 30)
		must(t, err)
		if n != 0 || !trunc {
			t.Fatalf("past the limit: appended %d, truncated %v", n, trunc)
		}
		n, trunc, err = b.store.AppendLogs(b.ctx, b.tenant.ID, tk.ID, 1, lines[:1], 30)
		must(t, err)
		if n != 0 || !trunc {
			t.Fatalf("after truncation: appended %d, truncated %v", n, trunc)
		}
		all, err := b.store.ListLogs(b.ctx, b.tenant.ID, tk.ID, 0, 100, false)
		must(t, err)
		if len(all) != 6 || all[0].Seq != 1 || all[4].Line != "line 4" || !strings.Contains(all[5].Line, "reached its limit of 30 bytes") {
			t.Fatalf("log %s", show(all))
		}
		page, err := b.store.ListLogs(b.ctx, b.tenant.ID, tk.ID, 2, 2, false)
		must(t, err)
		if len(page) != 2 || page[0].Seq != 3 {
			t.Fatalf("page %s", show(page))
		}
		tail, err := b.store.ListLogs(b.ctx, b.tenant.ID, tk.ID, 0, 2, true)
		must(t, err)
		if len(tail) != 2 || tail[0].Seq != 5 || tail[1].Seq != 6 {
			t.Fatalf("tail %s", show(tail))
		}
		_, _, err = b.store.AppendLogs(b.ctx, b.other.ID, tk.ID, 1, lines, 30)
		wantErr(t, err, store.ErrNotFound)
	})

	t.Run("AppendLogs keeps a numbered line once: a batch sent again is skipped, and numbering restarts with an attempt", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		tk := b.task(t, b.queue(t), b.user(t))
		numbered := func(from, to int64) []model.LogLine {
			var out []model.LogLine
			for n := from; n <= to; n++ {
				out = append(out, model.LogLine{At: b.now, Stream: "stdout", Line: fmt.Sprintf("line %d", n), N: n})
			}
			return out
		}
		for _, c := range []struct {
			attempt int
			lines   []model.LogLine
			want    int
			why     string
		}{
			{1, numbered(1, 3), 3, "the first batch"},
			{1, numbered(1, 3), 0, "the same batch again (its answer was lost)"},
			{1, numbered(2, 5), 2, "a batch cut differently, overlapping what is stored"},
			{1, []model.LogLine{{At: b.now, Stream: "stdout", Line: "unnumbered"}}, 1, "a line an older worker sent, without a number"},
			{2, numbered(1, 2), 2, "the next attempt, numbering from 1 again"},
			{2, numbered(1, 2), 0, "the next attempt's batch again"},
		} {
			n, trunc, err := b.store.AppendLogs(b.ctx, b.tenant.ID, tk.ID, c.attempt, c.lines, 1<<20)
			must(t, err)
			if n != c.want || trunc {
				t.Fatalf("%s: appended %d (truncated %v), want %d", c.why, n, trunc, c.want)
			}
		}
		all, err := b.store.ListLogs(b.ctx, b.tenant.ID, tk.ID, 0, 100, false)
		must(t, err)
		var got []string
		for _, l := range all {
			got = append(got, fmt.Sprintf("%d:%s", l.Attempt, l.Line))
		}
		want := "1:line 1,1:line 2,1:line 3,1:line 4,1:line 5,1:unnumbered,2:line 1,2:line 2"
		if strings.Join(got, ",") != want {
			t.Fatalf("log %v, want %s", got, want)
		}
	})

	t.Run("metrics are appended, listed by name and read back latest first per name", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		tk := b.task(t, b.queue(t), b.user(t))
		must(t, b.store.AppendMetrics(b.ctx, b.tenant.ID, tk.ID, 1, []model.MetricPoint{
			{At: b.now, Name: "loss", Value: 0.9, Step: 1}, {At: b.now, Name: "acc", Value: 0.5, Step: 1},
			{At: b.now, Name: "loss", Value: 0.4, Step: 2}}))
		must(t, b.store.AppendMetrics(b.ctx, b.tenant.ID, tk.ID, 1, []model.MetricPoint{{At: b.now, Name: "loss", Value: 0.2, Step: 3}}))
		loss, err := b.store.ListMetrics(b.ctx, b.tenant.ID, tk.ID, "loss", 0, 10)
		must(t, err)
		if len(loss) != 3 || loss[2].Value != 0.2 || loss[2].Seq != 4 {
			t.Fatalf("loss %s", show(loss))
		}
		last, err := b.store.LastMetrics(b.ctx, b.tenant.ID, tk.ID)
		must(t, err)
		if len(last) != 2 || last[0].Name != "acc" || last[1].Value != 0.2 {
			t.Fatalf("last %s", show(last))
		}
	})

	t.Run("secrets are put, replaced, listed and deleted per scope", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		s := &model.Secret{TenantID: b.tenant.ID, Scope: model.ScopeProject, ScopeID: "p1", Name: "HF_TOKEN",
			Ciphertext: []byte{1, 2, 3}, UpdatedBy: "ada", CreatedAt: b.now, UpdatedAt: b.now}
		must(t, b.store.PutSecret(b.ctx, s))
		s2 := *s
		s2.Ciphertext, s2.UpdatedAt = []byte{4, 5}, b.now.Add(time.Hour)
		must(t, b.store.PutSecret(b.ctx, &s2))
		got, err := b.store.GetSecret(b.ctx, b.tenant.ID, model.ScopeProject, "p1", "HF_TOKEN")
		must(t, err)
		if string(got.Ciphertext) != string([]byte{4, 5}) || !got.CreatedAt.Equal(b.now.Truncate(time.Microsecond)) {
			t.Fatalf("secret %s", show(got))
		}
		_, err = b.store.GetSecret(b.ctx, b.other.ID, model.ScopeProject, "p1", "HF_TOKEN")
		wantErr(t, err, store.ErrNotFound)
		list, err := b.store.ListSecrets(b.ctx, b.tenant.ID, model.ScopeProject, "p1")
		must(t, err)
		checkEqual(t, "secrets", len(list), 1)
		must(t, b.store.DeleteSecret(b.ctx, b.tenant.ID, model.ScopeProject, "p1", "HF_TOKEN"))
		wantErr(t, b.store.DeleteSecret(b.ctx, b.tenant.ID, model.ScopeProject, "p1", "HF_TOKEN"), store.ErrNotFound)
	})
}
