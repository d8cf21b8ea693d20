package platform_test

import (
	"log/slog"
	"slices"
	"sync"
	"testing"

	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/estate/llmconf"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
	"github.com/klique-ai/klique/internal/platform/platformtest"
	"github.com/klique-ai/klique/internal/store"
)

func TestConcurrency(t *testing.T) {
	t.Parallel()

	t.Run("twenty tasks enqueued at once all land with distinct, increasing queue sequence numbers", func(t *testing.T) {
		t.Parallel()
		forEachStore(t, func(t *testing.T, b *testBundle) {
			b.ApplyExample(t)
			ps := b.people(t)
			const n = 20
			tasks := make([]*model.Task, n)
			errs := make([]error, n)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i := range n {
				who := ps.rita
				if i%2 == 1 {
					who = ps.lead
				}
				wg.Go(func() {
					<-start
					tasks[i], errs[i] = b.Svc.EnqueueTask(who, platform.EnqueueInput{Name: "t", Project: "fraud-models", ComputeResource: "1 GPU",
						Spec: model.TaskSpec{Command: []string{"true"}}})
				})
			}
			close(start)
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Fatalf("enqueue %d: %v (code %s)", i, err, platform.ErrorCode(err))
				}
			}
			seqs := make([]int64, n)
			for i, task := range tasks {
				seqs[i] = task.QueueSeq
			}
			slices.Sort(seqs)
			for i := 1; i < n; i++ {
				if seqs[i] <= seqs[i-1] {
					t.Fatalf("queue sequence numbers are not distinct: %v", seqs)
				}
			}
			// Each task's place in line follows its sequence number.
			for _, task := range tasks {
				pos, err := b.Svc.TaskPosition(b.Admin, task)
				platformtest.Must(t, err)
				if want := slices.Index(seqs, task.QueueSeq) + 1; pos != want {
					t.Errorf("task with seq %d is at %d, want %d", task.QueueSeq, pos, want)
				}
			}
			listed, err := b.Svc.Tasks(ps.rita, platform.TaskListFilter{}, store.Page{})
			platformtest.Must(t, err)
			if len(listed) != n {
				t.Fatalf("%d tasks listed, want %d", len(listed), n)
			}
			for i := 1; i < n; i++ {
				if listed[i].QueueSeq >= listed[i-1].QueueSeq {
					t.Fatalf("list is not newest first at %d: %d then %d", i, listed[i-1].QueueSeq, listed[i].QueueSeq)
				}
			}
			enqueued := 0
			for _, e := range b.AuditLog(t) {
				if e.Action == "task.enqueued" {
					enqueued++
				}
			}
			if enqueued != n {
				t.Fatalf("%d task.enqueued audit entries, want %d", enqueued, n)
			}
		})
	})

	t.Run("ten applies of the example at once end with one estate", func(t *testing.T) {
		t.Parallel()
		forEachStore(t, func(t *testing.T, b *testBundle) {
			concurrentApplies(t, b, []*platform.Service{b.Svc})
		})
	})

	t.Run("ten applies of the example at once through two replicas end with one estate", func(t *testing.T) {
		t.Parallel()
		forEachStore(t, func(t *testing.T, b *testBundle) {
			replica := platform.New(platform.Options{Store: b.Store, Auth: b.Auth, Logger: slog.New(b.Logs)})
			concurrentApplies(t, b, []*platform.Service{b.Svc, replica})
		})
	})
}

// concurrentApplies applies the example ten times at once, spread over the
// services, and checks that exactly one apply created the estate and that it
// is whole, with one audit entry per object.
func concurrentApplies(t *testing.T, b *testBundle, services []*platform.Service) {
	t.Helper()
	const n = 10
	doc := platformtest.ExampleEstate(t)
	results := make([]*platform.EstateResult, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		svc := services[i%len(services)]
		wg.Go(func() {
			<-start
			results[i], errs[i] = svc.ApplyEstate(b.Admin, doc, false)
		})
	}
	close(start)
	wg.Wait()
	created := 0
	for i, err := range errs {
		if err != nil {
			t.Errorf("apply %d: %v (code %s)", i, err, platform.ErrorCode(err))
			continue
		}
		switch len(results[i].Changes) {
		case exampleObjects:
			created++
		case 0:
		default:
			t.Errorf("apply %d made %d changes: %v", i, len(results[i].Changes), results[i].Changes)
		}
	}
	if created != 1 {
		t.Errorf("%d applies created the estate, want exactly 1", created)
	}

	e, err := b.Svc.Estate(b.Admin)
	platformtest.Must(t, err)
	counts := map[string]int{
		"classes": len(e.GPUClasses), "pools": len(e.Pools), "profiles": len(e.Profiles), "groups": len(e.Groups),
		"policies": len(e.Policies), "compute resources": len(e.ComputeResources), "projects": len(e.Projects),
	}
	want := map[string]int{"classes": 2, "pools": 4, "profiles": 6, "groups": 3, "policies": 3, "compute resources": 12, "projects": 3}
	for k, v := range want {
		if counts[k] != v {
			t.Errorf("%d %s, want %d", counts[k], k, v)
		}
	}
	if err := e.Validate(); err != nil {
		t.Errorf("the estate left behind is not valid: %v", err)
	}
	estateEntries := 0
	for _, a := range b.AuditLog(t) {
		switch a.ObjectKind {
		case estate.KindGPUClass, estate.KindPool, estate.KindProfile, estate.KindGroup, estate.KindPolicy, estate.KindComputeResource, estate.KindProject:
			estateEntries++
		default:
			if llmconf.OwnsKind(a.ObjectKind) {
				estateEntries++
			}
		}
	}
	if estateEntries != exampleObjects {
		t.Errorf("%d audit entries for estate objects, want %d", estateEntries, exampleObjects)
	}
	res, err := b.Svc.ApplyEstate(b.Admin, doc, false)
	platformtest.Must(t, err)
	if len(res.Changes) != 0 {
		t.Errorf("applying once more changed %v", res.Changes)
	}
}
