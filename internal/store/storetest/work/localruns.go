package work

import (
	"errors"
	"testing"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/storetest/harness"
)

// LocalRuns checks the writes of runs on their owner's machine (status
// local): they change a task only while it is local, so an end, a move to
// a queue and the stale sweep racing on one run leave one winner.
func LocalRuns(t *testing.T, setup harness.Setup) {
	local := func(b *harness.Bundle, t *testing.T) *model.Task {
		t.Helper()
		return b.Task(t, b.Queue(t), b.User(t), func(tk *model.Task) {
			tk.ComputeResourceID, tk.PolicyID, tk.ProfileID, tk.Size = "", "", "", model.Size{}
			tk.Status, tk.Reason = model.TaskLocal, "running locally"
		})
	}

	setup.Run(t, "ListSchedulable never returns a local run, even one that names a compute resource", func(t *testing.T, b *harness.Bundle) {
		q := b.Queue(t)
		run := b.Task(t, q, b.User(t), func(tk *model.Task) { tk.Status = model.TaskLocal })
		bare := local(b, t)
		queued := b.Task(t, q, b.User(t))
		got, err := b.Store.ListSchedulable(b.Ctx, b.Tenant.ID, 10)
		harness.Must(t, err)
		for _, st := range got {
			if st.ID == run.ID || st.ID == bare.ID {
				t.Fatalf("ListSchedulable returns local run %s", st.ID)
			}
		}
		if len(got) != 1 || got[0].ID != queued.ID {
			t.Fatalf("ListSchedulable: %+v, want only the queued task", got)
		}
	})

	setup.Run(t, "UpdateLocalRun moves a local run onto a queue behind the work enqueued before, once", func(t *testing.T, b *harness.Bundle) {
		run := local(b, t)
		q := b.Queue(t)
		earlier := b.Task(t, q, b.User(t))
		moved := *run
		moved.ComputeResourceID, moved.PolicyID, moved.ProfileID, moved.GroupID = q.CR.ID, q.Policy.ID, q.Profile.ID, q.Group.ID
		moved.Size, moved.Status, moved.Reason, moved.UpdatedAt = q.Profile.Size, model.TaskQueued, "waiting", b.At(5)
		moved.Spec.Parameters = map[string]string{"lr": "0.1"}
		harness.Must(t, b.Store.UpdateLocalRun(b.Ctx, &moved))
		if moved.QueueSeq <= earlier.QueueSeq {
			t.Fatalf("the moved run's QueueSeq %d is not after %d, enqueued before it was moved", moved.QueueSeq, earlier.QueueSeq)
		}
		got, err := b.Store.GetTask(b.Ctx, b.Tenant.ID, run.ID)
		harness.Must(t, err)
		want := moved
		want.CreatedAt, want.UpdatedAt = harness.Norm(moved.CreatedAt), harness.Norm(moved.UpdatedAt)
		harness.CheckEqual(t, "GetTask", got, &want)
		n, err := b.Store.CountQueuedAhead(b.Ctx, b.Tenant.ID, q.CR.ID, store.PlaceOf(&moved))
		harness.Must(t, err)
		if n != 1 {
			t.Fatalf("queued ahead of the moved run: %d, want 1", n)
		}
		again := moved
		again.Status = model.TaskFailed
		if err := b.Store.UpdateLocalRun(b.Ctx, &again); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("UpdateLocalRun of a queued task: %v, want ErrConflict", err)
		}
	})

	setup.Run(t, "UpdateLocalRun ends a local run with its exit code and refuses another tenant's", func(t *testing.T, b *harness.Bundle) {
		run := local(b, t)
		theirs := *run
		theirs.TenantID = b.Other.ID
		if err := b.Store.UpdateLocalRun(b.Ctx, &theirs); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("UpdateLocalRun in another tenant: %v, want ErrConflict", err)
		}
		ended := *run
		ended.Status, ended.Reason, ended.UpdatedAt = model.TaskFailed, "exit code 3", b.At(7)
		ended.FinishedAt, ended.Run.ExitCode = harness.Ptr(b.At(7)), harness.Ptr(3)
		harness.Must(t, b.Store.UpdateLocalRun(b.Ctx, &ended))
		got, err := b.Store.GetTask(b.Ctx, b.Tenant.ID, run.ID)
		harness.Must(t, err)
		if got.Status != model.TaskFailed || got.Run.ExitCode == nil || *got.Run.ExitCode != 3 || got.FinishedAt == nil ||
			got.QueueSeq != run.QueueSeq || got.ComputeResourceID != "" {
			t.Fatalf("ended local run: %+v", got)
		}
	})

	setup.Run(t, "TouchLocalRun moves UpdatedAt forward only, and only of a local run", func(t *testing.T, b *harness.Bundle) {
		run := local(b, t)
		for _, c := range []struct {
			tenant string
			at     int
			want   bool
		}{{b.Tenant.ID, 5, true}, {b.Tenant.ID, 3, false}, {b.Other.ID, 9, false}} {
			ok, err := b.Store.TouchLocalRun(b.Ctx, c.tenant, run.ID, b.At(c.at))
			harness.Must(t, err)
			if ok != c.want {
				t.Fatalf("TouchLocalRun at %d: %v, want %v", c.at, ok, c.want)
			}
		}
		got, err := b.Store.GetTask(b.Ctx, b.Tenant.ID, run.ID)
		harness.Must(t, err)
		if !got.UpdatedAt.Equal(harness.Norm(b.At(5))) {
			t.Fatalf("UpdatedAt %s, want %s", got.UpdatedAt, b.At(5))
		}
		queued := b.Task(t, b.Queue(t), b.User(t))
		if ok, err := b.Store.TouchLocalRun(b.Ctx, b.Tenant.ID, queued.ID, b.At(9)); err != nil || ok {
			t.Fatalf("TouchLocalRun of a queued task: %v %v", ok, err)
		}
	})
}
