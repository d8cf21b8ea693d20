package platform_test

import (
	"context"
	"testing"
	"time"

	"github.com/klique-ai/klique/engine/loop"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
	"github.com/klique-ai/klique/internal/platform/platformtest"
)

// The utilization history is read from the usage ledger: a GPU held for
// the first half of an hour shows as one GPU in the steps of that half and
// none after, against what the class's pools declare; a member reads it
// tenant-wide, and a range it cannot draw is refused with what to change.
func TestUtilizationHistoryAveragesTheLedgerPerStep(t *testing.T) {
	start := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	platformtest.ForEachStore(t, func(t *testing.T, b *platformtest.Bundle) {
		b.ApplyExample(t)
		rita := b.User(t, "rita", model.RoleMember, "ml-research")
		task, err := b.Svc.EnqueueTask(rita, platform.EnqueueInput{Name: "half-hour", Project: "fraud-models", ComputeResource: "1 A100",
			Spec: model.TaskSpec{Command: []string{"python", "train.py"}}})
		platformtest.Must(t, err)
		eng := &loop.Loop{State: platform.EngineState{Store: b.Store}, Planner: b.Svc, Holder: "test", Now: b.Clock.Now}
		_, err = eng.PassAll(context.Background())
		platformtest.Must(t, err)
		b.Clock.Add(30 * time.Minute)
		_, err = b.Svc.AbortTask(rita, task.ID, "done with it")
		platformtest.Must(t, err)
		b.Clock.Add(30 * time.Minute)

		h, err := b.Svc.UtilizationHistory(rita, start, start.Add(time.Hour), 10*time.Minute)
		platformtest.Must(t, err)
		var a100 *platform.GPUClassHistory
		for i := range h.GPUClasses {
			if h.GPUClasses[i].GPUClass.Name == "a100-80gb" {
				a100 = &h.GPUClasses[i]
			}
		}
		if a100 == nil || a100.Declared != 80 || len(a100.Points) != 6 {
			t.Fatalf("history %+v: want a100-80gb declaring 80 GPUs in 6 steps", h.GPUClasses)
		}
		for i, p := range a100.Points {
			want := 0.0
			if i < 3 {
				want = 1
			}
			if !p.At.Equal(start.Add(time.Duration(i)*10*time.Minute)) || p.Used != want {
				t.Errorf("step %d: %s %v GPUs, want %s %v", i, p.At, p.Used, start.Add(time.Duration(i)*10*time.Minute), want)
			}
		}

		for name, c := range map[string]struct {
			from, to time.Time
			step     time.Duration
		}{
			"from after to":       {start.Add(time.Hour), start, 0},
			"a step under 10 s":   {start, start.Add(time.Hour), time.Second},
			"more than 1,000 pts": {start, start.Add(24 * time.Hour), 10 * time.Second},
			"more than 31 days":   {start.Add(-40 * 24 * time.Hour), start, 0},
		} {
			if _, err := b.Svc.UtilizationHistory(rita, c.from, c.to, c.step); platform.ErrorCode(err) != platform.CodeInvalid {
				t.Errorf("%s: %v, want it refused as invalid", name, err)
			}
		}
	}, platformtest.WithEvents(), platformtest.WithClock(start))
}
