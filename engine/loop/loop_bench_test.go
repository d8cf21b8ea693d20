package loop_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
	"github.com/klique-ai/klique/internal/platform/platformtest"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/pgtest"
	"github.com/klique-ai/klique/internal/store/postgres"
	"github.com/klique-ai/klique/internal/store/sqlite"
)

// bigEstate has room for every task a benchmark enqueues: ten groups,
// each with a compute resource on one large pool.
func bigEstate(groups int) string {
	doc := `apiVersion: klique/v1
kind: Estate
gpuClasses:
  - {name: h100, memoryGb: 80, pricePerGpuHour: 2}
pools:
  - {name: big, kind: kubernetes, capacity: 1000000, gpuClass: h100}
profiles:
  - {name: one-gpu, size: 1, pools: [big]}
groups:
`
	for g := 0; g < groups; g++ {
		doc += fmt.Sprintf("  - {name: g%d}\n", g)
	}
	doc += "policies:\n"
	for g := 0; g < groups; g++ {
		doc += fmt.Sprintf("  - {group: g%d, reservation: 1000, limit: 100000, computeResources: [{name: 1 GPU, profile: one-gpu}]}\n", g)
	}
	return doc + "projects:\n  - {name: bench}\n"
}

// BenchmarkEndToEnd measures sustained throughput through the store: tasks
// are enqueued through the platform service by four concurrent callers
// while the engine loop runs passes back to back, and the clock stops when
// every task's placement has committed (task placed, ledger interval
// opened, audit entry written). The figure to read is tasks/s.
func BenchmarkEndToEnd(b *testing.B) {
	b.Run("postgres", func(b *testing.B) {
		st, err := postgres.Open(context.Background(), pgtest.RequirePostgresURL(b))
		if err != nil {
			b.Fatal(err)
		}
		benchEndToEnd(b, st)
	})
	b.Run("sqlite", func(b *testing.B) {
		st, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "k.db"))
		if err != nil {
			b.Fatal(err)
		}
		benchEndToEnd(b, st)
	})
}

func benchEndToEnd(b *testing.B, st store.Store) {
	const groups, callers = 10, 4
	w := newWorld(b, platformtest.New(b, st, worldOptions...))
	w.Clock.Set(time.Now())
	w.loop.Now = nil // real time
	w.apply(bigEstate(groups))
	members := make([]context.Context, groups)
	for g := range members {
		members[g] = w.member(fmt.Sprintf("user%d", g), fmt.Sprintf("g%d", g))
	}
	spec := model.TaskSpec{Command: []string{"python", "train.py"}}
	var placed atomic.Int64
	b.ResetTimer()
	start := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	loopDone := make(chan error, 1)
	go func() {
		for ctx.Err() == nil && placed.Load() < int64(b.N) {
			reports, err := w.loop.PassAll(ctx)
			if err != nil {
				loopDone <- err
				return
			}
			for _, r := range reports {
				placed.Add(int64(r.Placed))
			}
		}
		loopDone <- nil
	}()
	var wg sync.WaitGroup
	var next atomic.Int64
	errs := make(chan error, callers)
	for c := 0; c < callers; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				g := int(i) % groups
				if _, err := w.Svc.EnqueueTask(members[g], platform.EnqueueInput{Name: "t", Project: "bench", ComputeResource: "1 GPU", Spec: spec}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		cancel()
		b.Fatal(err)
	}
	if err := <-loopDone; err != nil {
		cancel()
		b.Fatal(err)
	}
	elapsed := time.Since(start)
	cancel()
	b.StopTimer()
	if got := placed.Load(); got != int64(b.N) {
		b.Fatalf("placed %d of %d", got, b.N)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "tasks/s")
}
