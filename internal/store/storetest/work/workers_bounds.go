package work

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/storetest/harness"
)

// workerBounds checks what the worker protocol's records must survive:
// concurrent uploads for one attempt (an HPC job and its submitter share
// one), a heartbeat that lists more tasks than one statement takes, and a
// line number far ahead of the rest.
func workerBounds(t *testing.T, setup harness.Setup) {
	t.Run("AppendLogs and AppendMetrics keep every line of concurrent batches for one attempt", func(t *testing.T) {
		t.Parallel()
		b := setup(t, harness.OwnStore)
		tk := b.Task(t, b.Queue(t), b.User(t))
		const batches, per = 80, 5
		var wg sync.WaitGroup
		errs := make(chan error, 2*batches)
		for i := range batches {
			wg.Add(2)
			go func() {
				defer wg.Done()
				lines := make([]model.LogLine, per)
				for j := range lines {
					lines[j] = model.LogLine{At: b.Now, Stream: "stdout", Line: fmt.Sprintf("batch %d line %d", i, j)}
				}
				n, _, err := b.Store.AppendLogs(b.Ctx, b.Tenant.ID, tk.ID, 1, lines, 1<<20)
				if err == nil && n != per {
					err = fmt.Errorf("batch %d: %d lines accepted, want %d", i, n, per)
				}
				errs <- err
			}()
			go func() {
				defer wg.Done()
				points := make([]model.MetricPoint, per)
				for j := range points {
					points[j] = model.MetricPoint{At: b.Now, Name: "loss", Value: float64(j), Step: int64(i*per + j)}
				}
				errs <- b.Store.AppendMetrics(b.Ctx, b.Tenant.ID, tk.ID, 1, points)
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			harness.Must(t, err)
		}
		logs, err := b.Store.ListLogs(b.Ctx, b.Tenant.ID, tk.ID, 0, 10*batches*per, false)
		harness.Must(t, err)
		harness.CheckEqual(t, "log lines kept", len(logs), batches*per)
		for i, l := range logs {
			if l.Seq != int64(i+1) {
				t.Fatalf("line %d has number %d: want the lines numbered 1 to %d without gaps", i, l.Seq, batches*per)
			}
		}
		points, err := b.Store.ListMetrics(b.Ctx, b.Tenant.ID, tk.ID, "", 0, 10*batches*per)
		harness.Must(t, err)
		harness.CheckEqual(t, "metric points kept", len(points), batches*per)
	})

	setup.Run(t, "AppendLogs refuses a line numbered far ahead of the attempt's and keeps the lines after it", func(t *testing.T, b *harness.Bundle) {
		tk := b.Task(t, b.Queue(t), b.User(t))
		line := func(n int64) model.LogLine {
			return model.LogLine{At: b.Now, Stream: "stdout", Line: fmt.Sprintf("line %d", n), N: n}
		}
		n, _, err := b.Store.AppendLogs(b.Ctx, b.Tenant.ID, tk.ID, 1, []model.LogLine{line(1), line(2)}, 1<<20)
		harness.Must(t, err)
		harness.CheckEqual(t, "first batch", n, 2)
		for _, far := range []int64{math.MaxInt64, 2 + store.MaxLogNumberGap + 1} {
			_, _, err = b.Store.AppendLogs(b.Ctx, b.Tenant.ID, tk.ID, 1, []model.LogLine{line(3), line(far)}, 1<<20)
			var ne *store.LogNumberError
			if !errors.As(err, &ne) || ne.N != far || ne.Highest != 2 {
				t.Fatalf("line %d after 2: err %v, want a LogNumberError", far, err)
			}
		}
		// Nothing of the refused batches was kept, and what follows is.
		n, _, err = b.Store.AppendLogs(b.Ctx, b.Tenant.ID, tk.ID, 1, []model.LogLine{line(3), line(4), line(2 + store.MaxLogNumberGap)}, 1<<20)
		harness.Must(t, err)
		harness.CheckEqual(t, "lines after the refused ones", n, 3)
		all, err := b.Store.ListLogs(b.Ctx, b.Tenant.ID, tk.ID, 0, 100, false)
		harness.Must(t, err)
		harness.CheckEqual(t, "log lines", len(all), 5)
	})

	setup.Run(t, "ExtendLeases takes more tasks than one statement has variables for", func(t *testing.T, b *harness.Bundle) {
		owner, q, pool := b.User(t), b.Queue(t), b.Pool(t)
		a := placedTask(t, b, q, owner, pool.ID, model.Size{Nodes: 1, PerNode: 1000}, b.Now)
		ta, err := b.Store.ClaimTask(b.Ctx, b.Tenant.ID, pool.ID, "w1", "running", store.ClaimFit{MaxPerNode: 1000}, b.Now, b.Now.Add(time.Minute))
		harness.Must(t, err)
		attempts := map[string]int{a.ID: ta.Run.Attempt}
		for i := range 70000 {
			attempts[fmt.Sprintf("no-such-task-%d", i)] = 1
		}
		later := b.Now.Add(5 * time.Minute)
		got, err := b.Store.ExtendLeases(b.Ctx, b.Tenant.ID, "w1", attempts, later)
		harness.Must(t, err)
		if len(got) != 1 || got[0].ID != a.ID || !got[0].Run.LeaseExpiresAt.Equal(later.Truncate(time.Microsecond)) {
			t.Fatalf("tasks %s", harness.Show(got))
		}
	})
}
