package platform_test

import (
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
	"github.com/klique-ai/klique/internal/platform/platformtest"
)

// TestStaleLocalRunsAreEndedAsFailed: a local run that reports keeps
// running however long it runs; one that stops reporting for
// LocalRunStaleAfter is ended as failed by the sweep, with the reason, as
// the sweep's actor. A run sent to a compute resource, or ended, is left
// alone.
func TestStaleLocalRunsAreEndedAsFailed(t *testing.T) {
	start := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	forEachStoreAt(t, start, func(t *testing.T, b *testBundle) {
		b.ApplyExample(t)
		ps := b.people(t)
		newRun := func(name string) *model.Task {
			t.Helper()
			run, err := b.Svc.StartLocalRun(ps.rita, platform.LocalRunInput{Name: name, Project: "fraud-models",
				Spec: model.TaskSpec{Command: []string{"python", "train.py"}}})
			platformtest.Must(t, err)
			return run
		}
		talking, silent, ended := newRun("talking"), newRun("silent"), newRun("ended")
		_, err := b.Svc.EndLocalRun(ps.rita, ended.ID, platform.LocalRunEnd{Status: model.TaskCompleted})
		platformtest.Must(t, err)
		sweep := func(want int) {
			t.Helper()
			n, err := b.Svc.SweepStaleLocalRuns(b.Admin)
			platformtest.Must(t, err)
			if n != want {
				t.Fatalf("the sweep at %s ended %d runs, want %d", b.Clock.Now().Sub(start), n, want)
			}
		}
		for range 3 {
			b.Clock.Add(20 * time.Minute)
			_, err := b.Svc.ReportLocalRun(ps.rita, talking.ID, platform.LocalRunReport{
				Metrics: []model.MetricPoint{{Name: "loss", Value: 0.5, Step: 1}}})
			platformtest.Must(t, err)
			if b.Clock.Now().Sub(start) < platform.LocalRunStaleAfter {
				sweep(0)
			}
		}
		// An hour in: the silent run has said nothing for an hour.
		sweep(1)
		got, err := b.Svc.Task(ps.rita, silent.ID)
		platformtest.Must(t, err)
		if got.Status != model.TaskFailed || got.Reason != "the local process stopped reporting" || got.FinishedAt == nil {
			t.Fatalf("the silent run: %s %q", got.Status, got.Reason)
		}
		if last := b.AuditLog(t)[0]; last.Action != "task.failed" || last.ObjectID != silent.ID || last.ActorName != "local run sweep" {
			t.Fatalf("the sweep's audit entry %+v", last)
		}
		if got, _ := b.Svc.Task(ps.rita, talking.ID); got.Status != model.TaskLocal {
			t.Fatalf("the talking run: %s", got.Status)
		}
		// Sent to a compute resource, it is no longer the sweep's.
		_, err = b.Svc.ExecuteRemotely(ps.rita, talking.ID, platform.ExecuteRemotelyInput{ComputeResource: "1 GPU"})
		platformtest.Must(t, err)
		b.Clock.Add(2 * time.Hour)
		sweep(0)
		if got, _ := b.Svc.Task(ps.rita, talking.ID); got.Status != model.TaskQueued || got.ComputeResourceID == "" {
			t.Fatalf("the sent run: %s on %q", got.Status, got.ComputeResourceID)
		}
		if got, _ := b.Svc.Task(ps.rita, ended.ID); got.Status != model.TaskCompleted || *got.Run.ExitCode != 0 {
			t.Fatalf("the ended run: %s", got.Status)
		}
	})
}

// forEachStoreAt is forEachStore with a settable clock at start.
func forEachStoreAt(t *testing.T, start time.Time, fn func(t *testing.T, b *testBundle)) {
	t.Helper()
	platformtest.ForEachStore(t, func(t *testing.T, b *platformtest.Bundle) { fn(t, &testBundle{b}) }, platformtest.WithClock(start))
}
