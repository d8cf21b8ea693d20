package platform_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
	"github.com/klique-ai/klique/internal/platform/platformtest"
	"github.com/klique-ai/klique/internal/store"
)

func countTasks(t *testing.T, b *testBundle) int {
	t.Helper()
	n, err := b.Store.CountTasks(context.Background(), b.Tenant, store.TaskFilter{})
	platformtest.Must(t, err)
	return n
}

// A client that timed out sends its enqueue again with the same key: it
// gets the first task back and nothing more is created; the same key with
// another request is refused; the key is the caller's own.
func TestEnqueueWithAnIdempotencyKey(t *testing.T) {
	forEachStore(t, func(t *testing.T, b *testBundle) {
		b.ApplyExample(t)
		ps := b.people(t)
		in := platform.EnqueueInput{Name: "train", Project: "fraud-models", ComputeResource: "1 A100",
			Spec: model.TaskSpec{Command: []string{"python", "train.py"}}, IdempotencyKey: "7c0e6f52-retry"}
		first, err := b.Svc.EnqueueTask(ps.rita, in)
		platformtest.Must(t, err)
		before := countTasks(t, b)
		again, err := b.Svc.EnqueueTask(ps.rita, in)
		platformtest.Must(t, err)
		if again.ID != first.ID || countTasks(t, b) != before {
			t.Fatalf("a retry with the key made task %s (first %s), %d tasks (were %d)", again.ID, first.ID, countTasks(t, b), before)
		}
		other := in
		other.Spec.Command = []string{"python", "other.py"}
		_, err = b.Svc.EnqueueTask(ps.rita, other)
		platformtest.WantError(t, err, platform.CodeConflict, "idempotency key", "7c0e6f52-retry", "different request")
		if countTasks(t, b) != before {
			t.Fatal("a refused key created a task")
		}
		// Another user's key of the same name is another key.
		mine, err := b.Svc.EnqueueTask(ps.both, in)
		platformtest.Must(t, err)
		if mine.ID == first.ID {
			t.Fatal("another user got rita's task back")
		}
		// The key may come from the request's header.
		hctx := platform.WithIdempotencyKey(ps.rita, "from-header")
		noKey := in
		noKey.IdempotencyKey = ""
		h1, err := b.Svc.EnqueueTask(hctx, noKey)
		platformtest.Must(t, err)
		h2, err := b.Svc.EnqueueTask(hctx, noKey)
		platformtest.Must(t, err)
		if h1.ID != h2.ID {
			t.Fatalf("the header's key: tasks %s and %s", h1.ID, h2.ID)
		}
		// A clone is keyed like an enqueue.
		c1, err := b.Svc.CloneTask(ps.rita, first.ID, platform.CloneInput{ParameterOverrides: map[string]string{"lr": "0.01"}, IdempotencyKey: "clone-1"})
		platformtest.Must(t, err)
		c2, err := b.Svc.CloneTask(ps.rita, first.ID, platform.CloneInput{ParameterOverrides: map[string]string{"lr": "0.01"}, IdempotencyKey: "clone-1"})
		platformtest.Must(t, err)
		if c1.ID != c2.ID {
			t.Fatalf("a retried clone made tasks %s and %s", c1.ID, c2.ID)
		}
		_, err = b.Svc.CloneTask(ps.rita, first.ID, platform.CloneInput{ParameterOverrides: map[string]string{"lr": "0.5"}, IdempotencyKey: "clone-1"})
		platformtest.WantError(t, err, platform.CodeConflict, "different request")
		_, err = b.Svc.EnqueueTask(ps.rita, platform.EnqueueInput{Name: "x", Project: "fraud-models", ComputeResource: "1 A100",
			Spec: model.TaskSpec{Command: []string{"x"}}, IdempotencyKey: "has space"})
		platformtest.WantError(t, err, platform.CodeInvalid, "idempotency key")
	})
}

// Retries racing with one key create exactly one task.
func TestConcurrentRetriesWithOneKeyCreateOneTask(t *testing.T) {
	forEachStore(t, func(t *testing.T, b *testBundle) {
		b.ApplyExample(t)
		rita := b.User(t, "rita", model.RoleMember, "ml-research")
		in := platform.EnqueueInput{Name: "train", Project: "fraud-models", ComputeResource: "1 A100",
			Spec: model.TaskSpec{Command: []string{"python", "train.py"}}, IdempotencyKey: "race"}
		before := countTasks(t, b)
		const callers = 12
		ids := make([]string, callers)
		errs := make([]error, callers)
		var wg sync.WaitGroup
		for i := range callers {
			wg.Go(func() {
				task, err := b.Svc.EnqueueTask(rita, in)
				errs[i] = err
				if task != nil {
					ids[i] = task.ID
				}
			})
		}
		wg.Wait()
		for i := range callers {
			platformtest.Must(t, errs[i])
			if ids[i] != ids[0] {
				t.Fatalf("caller %d got task %s, caller 0 %s", i, ids[i], ids[0])
			}
		}
		if n := countTasks(t, b); n != before+1 {
			t.Fatalf("%d tasks created, want 1", n-before)
		}
		for _, l := range b.Logs.All() {
			if strings.Contains(l, "idempotency") {
				t.Errorf("a race was logged as an error: %s", l)
			}
		}
	})
}
