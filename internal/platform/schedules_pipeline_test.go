package platform_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
	"github.com/klique-ai/klique/internal/platform/pipelines"
	"github.com/klique-ai/klique/internal/platform/platformtest"
)

// A schedule of a pipeline reruns an earlier run's definition as its
// owner, with the schedule's parameters over the run's, once per period
// however often the pass runs (the firing's key makes the start
// idempotent), and a second start with one key gives back the first run.
func TestAScheduleRerunsAPipeline(t *testing.T) {
	forEachStore(t, func(t *testing.T, b *testBundle) {
		rita, _ := scheduleBundle(t, b)
		first, err := b.Svc.StartRun(rita, pipelines.RunInput{Definition: `name: nightly
project: fraud-models
params: {lr: "0.1"}
steps:
  - {name: train, computeResource: 1 A100, parameters: {lr: "{{params.lr}}"}, command: [python3, train.py, --lr, "{lr}"]}
`})
		if err != nil {
			t.Fatalf("start the pipeline: %v", err)
		}
		again, err := b.Svc.StartRun(rita, pipelines.RunInput{Def: &first.Definition, Params: first.Params, IdempotencyKey: "k-1"})
		platformtest.Must(t, err)
		same, err := b.Svc.StartRun(rita, pipelines.RunInput{Def: &first.Definition, Params: first.Params, IdempotencyKey: "k-1"})
		platformtest.Must(t, err)
		if same.ID != again.ID || again.ID == first.ID {
			t.Fatalf("two starts with one key made runs %s and %s", again.ID, same.ID)
		}

		pipeline := model.ScheduleTargetPipeline
		sc := createSchedule(t, b, rita, platform.ScheduleInput{Name: ptr("nightly"), TargetKind: &pipeline, TargetID: ptr(first.ID),
			Cron: ptr("*/5 * * * *"), Parameters: map[string]string{"lr": "0.2"}})
		b.Clock.Set(time.Date(2026, 1, 1, 0, 5, 1, 0, time.UTC))
		if res := tick(t, b.Svc); res.Fired != 1 {
			t.Fatalf("fired %d when due, want 1", res.Fired)
		}
		if res := tick(t, b.Svc); res.Fired != 0 {
			t.Fatalf("fired %d more in the same period", res.Fired)
		}
		runs, err := b.Svc.PipelineRuns(rita, pipelines.RunFilter{Name: "nightly"}, model.Page{Limit: 10})
		platformtest.Must(t, err)
		if len(runs) != 3 || runs[0].OwnerID != first.OwnerID || runs[0].Params["lr"] != "0.2" {
			t.Fatalf("runs after the firing: %d, newest %+v: want 3, the newest rita's with lr 0.2", len(runs), runs[0])
		}
		got, err := b.Svc.Schedule(rita, sc.ID)
		platformtest.Must(t, err)
		if got.LastRunID != runs[0].ID || got.LastResult != "started" {
			t.Fatalf("the schedule's last run %q (%s), want %s", got.LastRunID, got.LastResult, runs[0].ID)
		}
	}, platformtest.WithClock(scheduleStart))
}

// A schedule that reruns a stored definition over the definition budget
// (a run stored before the budget held, whose params an alias bomb five
// levels deep filled with 100,000 values: each firing copied them all into
// a new run) is refused at each firing by the same budget as runPipeline's,
// with the reason on the schedule, and starts nothing.
func TestAScheduleRefusesAStoredDefinitionOverTheBudget(t *testing.T) {
	forEachStore(t, func(t *testing.T, b *testBundle) {
		rita, _ := scheduleBundle(t, b)
		first, err := b.Svc.StartRun(rita, pipelines.RunInput{Definition: "name: nightly\nproject: fraud-models\nsteps:\n  - {name: train, computeResource: 1 A100, command: [python3, train.py]}\n"})
		platformtest.Must(t, err)
		stored := *first
		stored.ID = model.NewID()
		stored.Definition.Params = map[string]string{}
		for i := range 100_000 {
			stored.Definition.Params["p"+strconv.Itoa(i)] = "lol"
		}
		platformtest.Must(t, b.Store.CreatePipelineRun(context.Background(), &stored))

		pipeline := model.ScheduleTargetPipeline
		sc := createSchedule(t, b, rita, platform.ScheduleInput{Name: ptr("bomb"), TargetKind: &pipeline, TargetID: ptr(stored.ID), Cron: ptr("*/5 * * * *")})
		b.Clock.Set(time.Date(2026, 1, 1, 0, 5, 1, 0, time.UTC))
		res, err := b.Svc.TickSchedules(context.Background())
		if err == nil || res.Fired != 0 {
			t.Fatalf("the firing: %+v, %v; want it refused", res, err)
		}
		got, err := b.Svc.Schedule(rita, sc.ID)
		platformtest.Must(t, err)
		if got.LastResult != "refused" || !strings.Contains(got.LastError, "pipeline definition: 200,") ||
			!strings.Contains(got.LastError, "values; the limit is 100,000") {
			t.Fatalf("the schedule's last result %q: %q", got.LastResult, got.LastError)
		}
		runs, err := b.Svc.PipelineRuns(rita, pipelines.RunFilter{Name: "nightly"}, model.Page{Limit: 10})
		platformtest.Must(t, err)
		if len(runs) != 2 {
			t.Fatalf("%d runs after the refused firing, want the 2 there were", len(runs))
		}
	}, platformtest.WithClock(scheduleStart))
}
