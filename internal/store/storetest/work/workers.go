package work

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/storetest/harness"
)

// placedTask enqueues a task of the given size on q and places it on pool at
// placedAt.
func placedTask(t *testing.T, b *harness.Bundle, q *harness.Queue, owner *model.User, pool string, size model.Size, placedAt time.Time) *model.Task {
	t.Helper()
	tk := b.Task(t, q, owner, func(tk *model.Task) { tk.Size = size })
	_, err := b.Store.PlaceTasks(b.Ctx, b.Tenant.ID, []*model.Placement{placement(tk, pool, placedAt)}, placedReason)
	harness.Must(t, err)
	return tk
}

// Workers checks the worker protocol's records: credentials, workers,
// claims, leases, logs, metrics and secrets.
func Workers(t *testing.T, setup harness.Setup) {
	workerIdentities(t, setup)
	workerClaims(t, setup)
	workerLeases(t, setup)
	workerAppActivity(t, setup)
	workerLogs(t, setup)
	workerMetricsAndSecrets(t, setup)
	workerBounds(t, setup)
}

// workerIdentities checks what a worker is known by: its pool's credentials,
// found by hash across tenants, and its registration, which a host repeats.
func workerIdentities(t *testing.T, setup harness.Setup) {
	setup.Run(t, "worker credentials are found by hash across tenants, listed and revoked", func(t *testing.T, b *harness.Bundle) {
		pool := b.Pool(t)
		c := &model.WorkerCredential{TenantID: b.Tenant.ID, PoolID: pool.ID, Name: "rack 1", Prefix: "kqw_abc",
			Hash: []byte("hash-of-rack-1"), CreatedBy: "ada", CreatedAt: b.Now}
		harness.Must(t, b.Store.CreateWorkerCredential(b.Ctx, c))
		got, err := b.Store.GetWorkerCredentialByHash(b.Ctx, []byte("hash-of-rack-1"))
		harness.Must(t, err)
		if got.ID != c.ID || got.PoolID != pool.ID || got.TenantID != b.Tenant.ID || got.RevokedAt != nil {
			t.Fatalf("credential %s", harness.Show(got))
		}
		dup := *c
		dup.ID = ""
		harness.WantErr(t, b.Store.CreateWorkerCredential(b.Ctx, &dup), store.ErrConflict)
		_, err = b.Store.GetWorkerCredentialByHash(b.Ctx, []byte("other"))
		harness.WantErr(t, err, store.ErrNotFound)
		harness.WantErr(t, b.Store.RevokeWorkerCredential(b.Ctx, b.Other.ID, c.ID, b.Now), store.ErrNotFound)
		harness.Must(t, b.Store.RevokeWorkerCredential(b.Ctx, b.Tenant.ID, c.ID, b.Now))
		list, err := b.Store.ListWorkerCredentials(b.Ctx, b.Tenant.ID)
		harness.Must(t, err)
		if len(list) != 1 || list[0].RevokedAt == nil {
			t.Fatalf("credentials %s", harness.Show(list))
		}
	})

	setup.Run(t, "a worker registering again from its host is the same worker", func(t *testing.T, b *harness.Bundle) {
		pool := b.Pool(t)
		w := &model.Worker{TenantID: b.Tenant.ID, PoolID: pool.ID, CredentialID: "c1", Hostname: "gpu-01", Version: "1.0",
			Mode: "process", Kind: "bare_metal", GPUs: []model.WorkerGPU{{Index: 0, UUID: "GPU-a", MemoryMB: 81920}},
			Labels: map[string]string{"rack": "r7"}, RegisteredAt: b.Now, LastHeartbeatAt: b.Now}
		harness.Must(t, b.Store.RegisterWorker(b.Ctx, w))
		first := w.ID
		got, err := b.Store.GetWorker(b.Ctx, b.Tenant.ID, first)
		harness.Must(t, err)
		if len(got.GPUs) != 1 || got.GPUs[0].MemoryMB != 81920 || got.Labels["rack"] != "r7" {
			t.Fatalf("worker %s", harness.Show(got))
		}
		again := &model.Worker{TenantID: b.Tenant.ID, PoolID: pool.ID, CredentialID: "c2", Hostname: "gpu-01", Version: "1.1",
			Mode: "docker", Kind: "bare_metal", RegisteredAt: b.Now.Add(time.Hour), LastHeartbeatAt: b.Now.Add(time.Hour)}
		harness.Must(t, b.Store.RegisterWorker(b.Ctx, again))
		harness.CheckEqual(t, "id on re-registration", again.ID, first)
		got, err = b.Store.GetWorker(b.Ctx, b.Tenant.ID, first)
		harness.Must(t, err)
		if got.Version != "1.1" || got.Mode != "docker" || len(got.GPUs) != 0 || len(got.Labels) != 0 {
			t.Fatalf("worker %s", harness.Show(got))
		}
		harness.Must(t, b.Store.TouchWorker(b.Ctx, b.Tenant.ID, first, b.Now.Add(2*time.Hour)))
		list, err := b.Store.ListWorkers(b.Ctx, b.Tenant.ID)
		harness.Must(t, err)
		if len(list) != 1 || !list[0].LastHeartbeatAt.Equal(b.Now.Add(2*time.Hour).Truncate(time.Microsecond)) {
			t.Fatalf("workers %s", harness.Show(list))
		}
		_, err = b.Store.GetWorker(b.Ctx, b.Other.ID, first)
		harness.WantErr(t, err, store.ErrNotFound)
	})
}

// workerClaims checks ClaimTask: the pool's hidden queue in order, only what
// fits, and never one task twice however many workers claim at once.
func workerClaims(t *testing.T, setup harness.Setup) {
	one := model.Size{Nodes: 1, PerNode: 1000}
	setup.Run(t, "ClaimTask takes the pool's hidden queue in order and only what fits", func(t *testing.T, b *harness.Bundle) {
		owner, q := b.User(t), b.Queue(t)
		pool, other := b.Pool(t), b.Pool(t)
		first := placedTask(t, b, q, owner, pool.ID, one, b.Now)
		eighth := placedTask(t, b, q, owner, pool.ID, model.Size{Nodes: 1, PerNode: 125}, b.Now.Add(time.Second))
		four := placedTask(t, b, q, owner, pool.ID, model.Size{Nodes: 1, PerNode: 4000}, b.Now.Add(2*time.Second))
		placedTask(t, b, q, owner, pool.ID, model.Size{Nodes: 2, PerNode: 1000}, b.Now.Add(3*time.Second))
		placedTask(t, b, q, owner, other.ID, one, b.Now)
		b.Task(t, q, owner) // queued, not placed

		lease := b.Now.Add(time.Minute)
		// Claimable answers as ClaimTask would, without claiming.
		claimable := func(tenantID, poolID string, fit store.ClaimFit, want bool) {
			t.Helper()
			ok, err := b.Store.Claimable(b.Ctx, tenantID, poolID, fit)
			harness.Must(t, err)
			if ok != want {
				t.Fatalf("Claimable(%+v) = %v, want %v", fit, ok, want)
			}
		}
		claimable(b.Tenant.ID, pool.ID, store.ClaimFit{MaxPerNode: 2000}, true)
		claimable(b.Tenant.ID, pool.ID, store.ClaimFit{MaxPerNode: 500, Fractions: true}, true)
		claimable(b.Tenant.ID, pool.ID, store.ClaimFit{MaxPerNode: 500}, false)
		got, err := b.Store.ClaimTask(b.Ctx, b.Tenant.ID, pool.ID, "w1", "running", store.ClaimFit{MaxPerNode: 2000}, b.Now, lease)
		harness.Must(t, err)
		if got.ID != first.ID || got.Status != model.TaskRunning || got.Run.WorkerID != "w1" || got.Run.Attempt != 1 ||
			got.Run.LeaseExpiresAt == nil || !got.Run.LeaseExpiresAt.Equal(lease.Truncate(time.Microsecond)) || got.Run.StartedAt == nil {
			t.Fatalf("claimed %s", harness.Show(got))
		}
		// Without fractions the eighth is skipped; the 4-GPU task does not
		// fit in 2; the multi-node task never goes to one worker.
		claimable(b.Tenant.ID, pool.ID, store.ClaimFit{MaxPerNode: 2000}, false)
		_, err = b.Store.ClaimTask(b.Ctx, b.Tenant.ID, pool.ID, "w1", "running", store.ClaimFit{MaxPerNode: 2000}, b.Now, lease)
		harness.WantErr(t, err, store.ErrNotFound)
		got, err = b.Store.ClaimTask(b.Ctx, b.Tenant.ID, pool.ID, "w2", "running", store.ClaimFit{MaxPerNode: 8000, Fractions: true}, b.Now, lease)
		harness.Must(t, err)
		harness.CheckEqual(t, "with fractions", got.ID, eighth.ID)
		got, err = b.Store.ClaimTask(b.Ctx, b.Tenant.ID, pool.ID, "w2", "running", store.ClaimFit{MaxPerNode: 8000}, b.Now, lease)
		harness.Must(t, err)
		harness.CheckEqual(t, "4 GPUs in 8", got.ID, four.ID)
		claimable(b.Tenant.ID, pool.ID, store.ClaimFit{MaxPerNode: 64000, Fractions: true}, false)
		_, err = b.Store.ClaimTask(b.Ctx, b.Tenant.ID, pool.ID, "w2", "running", store.ClaimFit{MaxPerNode: 64000, Fractions: true}, b.Now, lease)
		harness.WantErr(t, err, store.ErrNotFound)
		claimable(b.Tenant.ID, other.ID, store.ClaimFit{MaxPerNode: 8000}, true)
		claimable(b.Other.ID, other.ID, store.ClaimFit{MaxPerNode: 8000}, false)
		_, err = b.Store.ClaimTask(b.Ctx, b.Other.ID, other.ID, "w3", "running", store.ClaimFit{MaxPerNode: 8000}, b.Now, lease)
		harness.WantErr(t, err, store.ErrNotFound)
	})

	t.Run("concurrent claims never take one task twice", func(t *testing.T) {
		t.Parallel()
		b := setup(t, harness.OwnStore)
		owner, q, pool := b.User(t), b.Queue(t), b.Pool(t)
		for i := 0; i < 10; i++ {
			placedTask(t, b, q, owner, pool.ID, one, b.Now.Add(time.Duration(i)*time.Millisecond))
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
					tk, err := b.Store.ClaimTask(b.Ctx, b.Tenant.ID, pool.ID, worker, "running", store.ClaimFit{MaxPerNode: 8000}, b.Now, b.Now.Add(time.Minute))
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
		harness.CheckEqual(t, "tasks claimed", len(claimed), 10)
	})
}

// workerLeases checks what a running attempt's worker keeps up to date: its
// lease, and an app instance's address, which belongs to one attempt.
func workerLeases(t *testing.T, setup harness.Setup) {
	one := model.Size{Nodes: 1, PerNode: 1000}
	setup.Run(t, "ExtendLeases extends matching attempts only and reports every task as it is", func(t *testing.T, b *harness.Bundle) {
		owner, q, pool := b.User(t), b.Queue(t), b.Pool(t)
		a := placedTask(t, b, q, owner, pool.ID, one, b.Now)
		c := placedTask(t, b, q, owner, pool.ID, one, b.Now.Add(time.Second))
		lease := b.Now.Add(time.Minute)
		ta, err := b.Store.ClaimTask(b.Ctx, b.Tenant.ID, pool.ID, "w1", "running", store.ClaimFit{MaxPerNode: 1000}, b.Now, lease)
		harness.Must(t, err)
		_, err = b.Store.ClaimTask(b.Ctx, b.Tenant.ID, pool.ID, "w1", "running", store.ClaimFit{MaxPerNode: 1000}, b.Now, lease)
		harness.Must(t, err)
		later := b.Now.Add(5 * time.Minute)
		got, err := b.Store.ExtendLeases(b.Ctx, b.Tenant.ID, "w1", map[string]int{a.ID: ta.Run.Attempt, c.ID: 7}, later)
		harness.Must(t, err)
		sort.Slice(got, func(i, j int) bool { return got[i].ID == a.ID })
		if len(got) != 2 || !got[0].Run.LeaseExpiresAt.Equal(later.Truncate(time.Microsecond)) {
			t.Fatalf("tasks %s", harness.Show(got))
		}
		expired, err := b.Store.ListExpiredLeases(b.Ctx, b.Tenant.ID, b.Now.Add(2*time.Minute))
		harness.Must(t, err)
		if len(expired) != 1 || expired[0].ID != c.ID {
			t.Fatalf("expired %s: want only the task with the stale attempt", harness.Show(expired))
		}
	})

	setup.Run(t, "SetAppAddress records the running attempt's address only, and a claim clears it", func(t *testing.T, b *harness.Bundle) {
		owner, q, pool := b.User(t), b.Queue(t), b.Pool(t)
		placedTask(t, b, q, owner, pool.ID, one, b.Now)
		tk, err := b.Store.ClaimTask(b.Ctx, b.Tenant.ID, pool.ID, "w1", "running", store.ClaimFit{MaxPerNode: 1000}, b.Now, b.Now.Add(time.Minute))
		harness.Must(t, err)
		address := func() string {
			t.Helper()
			got, err := b.Store.GetTask(b.Ctx, b.Tenant.ID, tk.ID)
			harness.Must(t, err)
			return got.Run.AppAddress
		}
		harness.Must(t, b.Store.SetAppAddress(b.Ctx, b.Tenant.ID, "w1", tk.ID, tk.Run.Attempt, model.AppAddress{Address: "10.0.0.7:41234"}))
		harness.CheckEqual(t, "address", address(), "10.0.0.7:41234")
		// Another worker, another attempt, another tenant: nothing changes.
		harness.Must(t, b.Store.SetAppAddress(b.Ctx, b.Tenant.ID, "w2", tk.ID, tk.Run.Attempt, model.AppAddress{Address: "10.0.0.8:1"}))
		harness.Must(t, b.Store.SetAppAddress(b.Ctx, b.Tenant.ID, "w1", tk.ID, tk.Run.Attempt+1, model.AppAddress{Address: "10.0.0.8:2"}))
		harness.Must(t, b.Store.SetAppAddress(b.Ctx, "another-tenant", "w1", tk.ID, tk.Run.Attempt, model.AppAddress{Address: "10.0.0.8:3"}))
		harness.CheckEqual(t, "address", address(), "10.0.0.7:41234")
		harness.Must(t, b.Store.SetAppAddress(b.Ctx, b.Tenant.ID, "w1", tk.ID, tk.Run.Attempt, model.AppAddress{Address: ""}))
		harness.CheckEqual(t, "address after not ready", address(), "")
		harness.Must(t, b.Store.SetAppAddress(b.Ctx, b.Tenant.ID, "w1", tk.ID, tk.Run.Attempt,
			model.AppAddress{Address: "10.0.0.7:41234", Allow: "10.0.0.7/32,10.1.0.0/16", Refused: "a reason"}))
		if got, err := b.Store.GetTask(b.Ctx, b.Tenant.ID, tk.ID); err != nil || got.Run.AppAllow != "10.0.0.7/32,10.1.0.0/16" || got.Run.AppRefused != "a reason" {
			t.Fatalf("the address's rule and refusal: %v, %q %q", err, got.Run.AppAllow, got.Run.AppRefused)
		}
		// Requeued and claimed again: the new attempt starts not ready.
		cur, err := b.Store.GetTask(b.Ctx, b.Tenant.ID, tk.ID)
		harness.Must(t, err)
		cur.Status = model.TaskPlaced
		harness.Must(t, b.Store.UpdateTask(b.Ctx, cur))
		harness.CheckEqual(t, "address kept by UpdateTask", address(), "10.0.0.7:41234")
		again, err := b.Store.ClaimTask(b.Ctx, b.Tenant.ID, pool.ID, "w2", "running", store.ClaimFit{MaxPerNode: 1000}, b.Now, b.Now.Add(time.Minute))
		harness.Must(t, err)
		if again.ID != tk.ID || again.Run.AppAddress != "" || address() != "" || again.Run.AppAllow != "" || again.Run.AppRefused != "" {
			t.Fatalf("claimed again: %s, address %q", harness.Show(again), address())
		}
	})
}

// workerAppActivity checks an app instance's activity and idle warning,
// written seldom enough to cost little, and cleared by a new claim.
func workerAppActivity(t *testing.T, setup harness.Setup) {
	one := model.Size{Nodes: 1, PerNode: 1000}
	setup.Run(t, "TouchAppActivity writes about once a minute, SetAppIdleWarned once, and a claim clears both", func(t *testing.T, b *harness.Bundle) {
		owner, q, pool := b.User(t), b.Queue(t), b.Pool(t)
		placedTask(t, b, q, owner, pool.ID, one, b.Now)
		tk, err := b.Store.ClaimTask(b.Ctx, b.Tenant.ID, pool.ID, "w1", "running", store.ClaimFit{MaxPerNode: 1000}, b.Now, b.Now.Add(time.Minute))
		harness.Must(t, err)
		base := b.Now.Truncate(time.Second) // times are kept to the microsecond
		read := func() *model.Task {
			t.Helper()
			got, err := b.Store.GetTask(b.Ctx, b.Tenant.ID, tk.ID)
			harness.Must(t, err)
			return got
		}
		touch := func(at time.Time, want bool) {
			t.Helper()
			wrote, err := b.Store.TouchAppActivity(b.Ctx, tk.ID, at)
			harness.Must(t, err)
			harness.CheckEqual(t, "wrote at "+at.Sub(base).String(), wrote, want)
		}
		if got := read().Run; got.AppActiveAt != nil || got.AppWarnedAt != nil {
			t.Fatalf("a new attempt has activity %v, warned %v", got.AppActiveAt, got.AppWarnedAt)
		}
		touch(base.Add(time.Second), true)
		touch(base.Add(30*time.Second), false) // within the grain: no write
		touch(base.Add(61*time.Second), true)
		if got := read().Run.AppActiveAt; got == nil || !got.Equal(base.Add(61*time.Second)) {
			t.Fatalf("active at %v, want %v", got, base.Add(61*time.Second))
		}
		touch(base.Add(time.Second), false)            // never moves back
		harness.Must(t, b.Store.UpdateTask(b.Ctx, tk)) // an older copy written whole keeps it
		if got := read().Run.AppActiveAt; got == nil || !got.Equal(base.Add(61*time.Second)) {
			t.Fatalf("active at after UpdateTask %v", got)
		}
		if _, err := b.Store.TouchAppActivity(b.Ctx, "no-such-task", b.Now); err != nil {
			t.Fatalf("touch of an unknown task: %v", err)
		}

		warnAt := base.Add(2 * time.Minute)
		warn := func(tenant string, attempt int, at *time.Time, want bool) {
			t.Helper()
			changed, err := b.Store.SetAppIdleWarned(b.Ctx, tenant, tk.ID, attempt, at)
			harness.Must(t, err)
			harness.CheckEqual(t, "warning changed", changed, want)
		}
		warn("another-tenant", tk.Run.Attempt, &warnAt, false)
		warn(b.Tenant.ID, tk.Run.Attempt+1, &warnAt, false)
		warn(b.Tenant.ID, tk.Run.Attempt, &warnAt, true)
		later := warnAt.Add(time.Minute)
		warn(b.Tenant.ID, tk.Run.Attempt, &later, false) // warned once
		if got := read().Run.AppWarnedAt; got == nil || !got.Equal(warnAt) {
			t.Fatalf("warned at %v, want %v", got, warnAt)
		}
		warn(b.Tenant.ID, tk.Run.Attempt, nil, true)
		warn(b.Tenant.ID, tk.Run.Attempt, nil, false)
		warn(b.Tenant.ID, tk.Run.Attempt, &later, true)

		// Requeued and claimed again: the new attempt starts unused and unwarned.
		cur := read()
		cur.Status = model.TaskPlaced
		harness.Must(t, b.Store.UpdateTask(b.Ctx, cur))
		touch(base.Add(5*time.Minute), false) // not running: nothing to note
		again, err := b.Store.ClaimTask(b.Ctx, b.Tenant.ID, pool.ID, "w2", "running", store.ClaimFit{MaxPerNode: 1000}, b.Now, b.Now.Add(time.Minute))
		harness.Must(t, err)
		if again.ID != tk.ID || again.Run.AppActiveAt != nil || again.Run.AppWarnedAt != nil {
			t.Fatalf("claimed again: %s", harness.Show(again))
		}
	})
}

// workerLogs checks a task's log: numbered lines, the limit, pages and
// tails, and a batch a worker sends again kept once.
func workerLogs(t *testing.T, setup harness.Setup) {
	setup.Run(t, "AppendLogs numbers lines, stops at the limit with one note, and ListLogs pages and tails", func(t *testing.T, b *harness.Bundle) {
		tk := b.Task(t, b.Queue(t), b.User(t))
		var lines []model.LogLine
		for i := 0; i < 5; i++ {
			lines = append(lines, model.LogLine{At: b.Now, Stream: "stdout", Line: fmt.Sprintf("line %d", i)})
		}
		n, trunc, err := b.Store.AppendLogs(b.Ctx, b.Tenant.ID, tk.ID, 1, lines, 30)
		harness.Must(t, err)
		if n != 5 || trunc {
			t.Fatalf("appended %d, truncated %v", n, trunc)
		}
		n, trunc, err = b.Store.AppendLogs(b.Ctx, b.Tenant.ID, tk.ID, 1, lines[:2], 30)
		harness.Must(t, err)
		if n != 0 || !trunc {
			t.Fatalf("past the limit: appended %d, truncated %v", n, trunc)
		}
		n, trunc, err = b.Store.AppendLogs(b.Ctx, b.Tenant.ID, tk.ID, 1, lines[:1], 30)
		harness.Must(t, err)
		if n != 0 || !trunc {
			t.Fatalf("after truncation: appended %d, truncated %v", n, trunc)
		}
		all, err := b.Store.ListLogs(b.Ctx, b.Tenant.ID, tk.ID, 0, 100, false)
		harness.Must(t, err)
		if len(all) != 6 || all[0].Seq != 1 || all[4].Line != "line 4" || !strings.Contains(all[5].Line, "reached its limit of 30 bytes") {
			t.Fatalf("log %s", harness.Show(all))
		}
		page, err := b.Store.ListLogs(b.Ctx, b.Tenant.ID, tk.ID, 2, 2, false)
		harness.Must(t, err)
		if len(page) != 2 || page[0].Seq != 3 {
			t.Fatalf("page %s", harness.Show(page))
		}
		tail, err := b.Store.ListLogs(b.Ctx, b.Tenant.ID, tk.ID, 0, 2, true)
		harness.Must(t, err)
		if len(tail) != 2 || tail[0].Seq != 5 || tail[1].Seq != 6 {
			t.Fatalf("tail %s", harness.Show(tail))
		}
		_, _, err = b.Store.AppendLogs(b.Ctx, b.Other.ID, tk.ID, 1, lines, 30)
		harness.WantErr(t, err, store.ErrNotFound)
	})

	setup.Run(t, "AppendLogs keeps a numbered line once: a batch sent again is skipped, and numbering restarts with an attempt", func(t *testing.T, b *harness.Bundle) {
		tk := b.Task(t, b.Queue(t), b.User(t))
		numbered := func(from, to int64) []model.LogLine {
			var out []model.LogLine
			for n := from; n <= to; n++ {
				out = append(out, model.LogLine{At: b.Now, Stream: "stdout", Line: fmt.Sprintf("line %d", n), N: n})
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
			{1, []model.LogLine{{At: b.Now, Stream: "stdout", Line: "unnumbered"}}, 1, "a line an older worker sent, without a number"},
			{2, numbered(1, 2), 2, "the next attempt, numbering from 1 again"},
			{2, numbered(1, 2), 0, "the next attempt's batch again"},
		} {
			n, trunc, err := b.Store.AppendLogs(b.Ctx, b.Tenant.ID, tk.ID, c.attempt, c.lines, 1<<20)
			harness.Must(t, err)
			if n != c.want || trunc {
				t.Fatalf("%s: appended %d (truncated %v), want %d", c.why, n, trunc, c.want)
			}
		}
		all, err := b.Store.ListLogs(b.Ctx, b.Tenant.ID, tk.ID, 0, 100, false)
		harness.Must(t, err)
		var got []string
		for _, l := range all {
			got = append(got, fmt.Sprintf("%d:%s", l.Attempt, l.Line))
		}
		want := "1:line 1,1:line 2,1:line 3,1:line 4,1:line 5,1:unnumbered,2:line 1,2:line 2"
		if strings.Join(got, ",") != want {
			t.Fatalf("log %v, want %s", got, want)
		}
	})
}

// workerMetricsAndSecrets checks the metrics a task writes and the secrets
// it is given.
func workerMetricsAndSecrets(t *testing.T, setup harness.Setup) {
	setup.Run(t, "metrics are appended, listed by name and read back latest first per name", func(t *testing.T, b *harness.Bundle) {
		tk := b.Task(t, b.Queue(t), b.User(t))
		harness.Must(t, b.Store.AppendMetrics(b.Ctx, b.Tenant.ID, tk.ID, 1, []model.MetricPoint{
			{At: b.Now, Name: "loss", Value: 0.9, Step: 1}, {At: b.Now, Name: "acc", Value: 0.5, Step: 1},
			{At: b.Now, Name: "loss", Value: 0.4, Step: 2}}))
		harness.Must(t, b.Store.AppendMetrics(b.Ctx, b.Tenant.ID, tk.ID, 1, []model.MetricPoint{{At: b.Now, Name: "loss", Value: 0.2, Step: 3}}))
		loss, err := b.Store.ListMetrics(b.Ctx, b.Tenant.ID, tk.ID, "loss", 0, 10)
		harness.Must(t, err)
		if len(loss) != 3 || loss[2].Value != 0.2 || loss[2].Seq != 4 {
			t.Fatalf("loss %s", harness.Show(loss))
		}
		last, err := b.Store.LastMetrics(b.Ctx, b.Tenant.ID, tk.ID)
		harness.Must(t, err)
		if len(last) != 2 || last[0].Name != "acc" || last[1].Value != 0.2 {
			t.Fatalf("last %s", harness.Show(last))
		}
	})

	setup.Run(t, "secrets are put, replaced, listed and deleted per scope", func(t *testing.T, b *harness.Bundle) {
		s := &model.Secret{TenantID: b.Tenant.ID, Scope: model.ScopeProject, ScopeID: "p1", Name: "HF_TOKEN",
			Ciphertext: []byte{1, 2, 3}, UpdatedBy: "ada", CreatedAt: b.Now, UpdatedAt: b.Now}
		harness.Must(t, b.Store.PutSecret(b.Ctx, s))
		s2 := *s
		s2.Ciphertext, s2.UpdatedAt = []byte{4, 5}, b.Now.Add(time.Hour)
		harness.Must(t, b.Store.PutSecret(b.Ctx, &s2))
		got, err := b.Store.GetSecret(b.Ctx, b.Tenant.ID, model.ScopeProject, "p1", "HF_TOKEN")
		harness.Must(t, err)
		if string(got.Ciphertext) != string([]byte{4, 5}) || !got.CreatedAt.Equal(b.Now.Truncate(time.Microsecond)) {
			t.Fatalf("secret %s", harness.Show(got))
		}
		_, err = b.Store.GetSecret(b.Ctx, b.Other.ID, model.ScopeProject, "p1", "HF_TOKEN")
		harness.WantErr(t, err, store.ErrNotFound)
		list, err := b.Store.ListSecrets(b.Ctx, b.Tenant.ID, model.ScopeProject, "p1")
		harness.Must(t, err)
		harness.CheckEqual(t, "secrets", len(list), 1)
		harness.Must(t, b.Store.DeleteSecret(b.Ctx, b.Tenant.ID, model.ScopeProject, "p1", "HF_TOKEN"))
		harness.WantErr(t, b.Store.DeleteSecret(b.Ctx, b.Tenant.ID, model.ScopeProject, "p1", "HF_TOKEN"), store.ErrNotFound)
	})
}
