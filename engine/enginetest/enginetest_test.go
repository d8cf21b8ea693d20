package enginetest_test

import (
	"fmt"
	"reflect"
	"runtime"
	"testing"
	"time"

	"github.com/klique-ai/klique/engine"
	"github.com/klique-ai/klique/engine/enginetest"
	"github.com/klique-ai/klique/internal/model"
)

func TestEstateBuilderNamesAndNumbersAsDocumented(t *testing.T) {
	s := enginetest.NewEstate(t).Pool("p1", 2).Pool("p2", 4).
		Profile("one", 1, "p1", "p2").Profile("half", 0.5, "p2").
		ExecutionPriority("p2", "half", "one").
		Group("A", 1, 2).Group("B", 0, 4).Budget(10, 2.5, 15*time.Minute).
		Queue("A", "one").Queue("B", "one").Queue("B", "half").
		Run("B/one", "p2", 1, "2", enginetest.T0.Add(-time.Hour)).
		Wait("A/one", 2, "1").Wait("B/half", 1, "0.5").Build()

	half := model.Size{Nodes: 1, PerNode: 500}
	one := model.Size{Nodes: 1, PerNode: 1000}
	want := &engine.Snapshot{
		Now: enginetest.T0,
		Pools: []engine.Pool{
			{ID: "pool-p1", Name: "p1", Kind: model.PoolKubernetes, Capacity: model.GPUs(2), Profiles: []int{0}},
			{ID: "pool-p2", Name: "p2", Kind: model.PoolKubernetes, Capacity: model.GPUs(4), Profiles: []int{1, 0}},
		},
		Profiles: []engine.Profile{
			{ID: "profile-one", Name: "one", Pools: []int{0, 1}, Queues: []int{0, 1}, WeightMilli: 1000},
			{ID: "profile-half", Name: "half", Pools: []int{1}, Queues: []int{2}, WeightMilli: 500},
		},
		Groups: []engine.Group{
			{ID: "group-A", Name: "A", Reservation: model.GPUs(1), Limit: model.GPUs(2)},
			{ID: "group-B", Name: "B", Reservation: 0, Limit: model.GPUs(4), Budget: &engine.Budget{
				Total: 10_000_000, Used: 2_500_000, LowWatermark: 15 * time.Minute,
				Period: model.PeriodWeek, ResetAt: time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)}},
		},
		Queues: []engine.Queue{
			{ID: "A/one", Name: "one", Group: 0, Profile: 0, Waiting: []engine.Task{{ID: "A/one#2", Size: one, Seq: 2}, {ID: "A/one#3", Size: one, Seq: 3}}},
			{ID: "B/one", Name: "one", Group: 1, Profile: 0},
			{ID: "B/half", Name: "half", Group: 1, Profile: 1, Waiting: []engine.Task{{ID: "B/half#4", Size: half, Seq: 4}}},
		},
		Running: []engine.Placement{{TaskID: "B/one#1", Queue: 1, Pool: 1, Size: model.GPUs(2), Shape: model.Size{Nodes: 1, PerNode: model.GPUs(2)}, PlacedAt: enginetest.T0.Add(-time.Hour), Seq: 1}},
	}
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("built\n%+v\nwant\n%+v", s, want)
	}
}

func TestDecisionHelpers(t *testing.T) {
	s := enginetest.NewEstate(t).Pool("p", 1).Profile("one", 1, "p").
		Group("A", 0, 1).Group("B", 1, 1).Queue("A", "one").Queue("B", "one").
		Run("A/one", "p", 1, "1", enginetest.T0.Add(-time.Hour)).
		Wait("A/one", 1, "1").Wait("B/one", 2, "1").Build()
	d := engine.Pass(s)
	if got := enginetest.PreemptedIDs(d); !reflect.DeepEqual(got, []string{"A/one#1"}) {
		t.Errorf("PreemptedIDs = %v, want A's borrowed task", got)
	}
	if got := enginetest.PlacedOn(s, d); !reflect.DeepEqual(got, map[string][]string{"p": {"B/one#3"}}) {
		t.Errorf("PlacedOn = %v, want B's head on p", got)
	}
	if bl := enginetest.BlockedOf(s, d, "B/one"); bl == nil || bl.TaskID != "B/one#4" {
		t.Errorf("BlockedOf(B/one) = %+v, want B/one#4", bl)
	}
	if bl := enginetest.BlockedOf(s, d, "nope"); bl != nil {
		t.Errorf("BlockedOf(nope) = %+v, want nil", bl)
	}
	if got := enginetest.PreemptedIDs(&engine.Decisions{}); got != nil {
		t.Errorf("PreemptedIDs of no preemptions = %v, want nil", got)
	}
}

// fatalRecorder stands in for a test to see the builder fail it.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Helper() {}

func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestUnknownNamesFailTheTest(t *testing.T) {
	for name, build := range map[string]func(tb testing.TB){
		"no pool q":      func(tb testing.TB) { enginetest.NewEstate(tb).Pool("p", 1).Profile("one", 1, "q") },
		"no profile two": func(tb testing.TB) { enginetest.NewEstate(tb).Group("A", 0, 1).Queue("A", "two") },
		"no group B":     func(tb testing.TB) { enginetest.NewEstate(tb).Profile("one", 1).Queue("B", "one") },
		"no queue A/two": func(tb testing.TB) { enginetest.NewEstate(tb).Wait("A/two", 1, "1") },
	} {
		rec := &fatalRecorder{TB: t}
		done := make(chan struct{})
		go func() { defer close(done); build(rec) }()
		<-done
		if rec.msg != name {
			t.Errorf("failed with %q, want %q", rec.msg, name)
		}
	}
}
