package engine_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/engine"
	"github.com/klique-ai/klique/engine/enginetest"
	"github.com/klique-ai/klique/internal/model"
)

// The organisation tree's rules (docs/engine.md, "The organisation tree"),
// one scenario each, modelled on seed 003's stories.

// placedBy counts the pass's placements per group name.
func placedBy(s *engine.Snapshot, d *engine.Decisions) map[string]int {
	out := map[string]int{}
	for _, p := range d.Placements {
		out[s.Groups[s.Queues[p.Queue].Group].Name]++
	}
	return out
}

func TestDepartmentLimitHoldsItsTeams(t *testing.T) {
	s := enginetest.NewEstate(t).Pool("p", 16).Profile("one", 1, "p").
		Department("Research", 0, 4).
		Group("vision", 0, 8).In("Research").Group("nlp", 0, 8).In("Research").
		Queue("vision", "one").Queue("nlp", "one").
		Run("vision/one", "p", 4, "1", enginetest.T0.Add(-time.Hour)).
		Wait("nlp/one", 1, "1").Build()
	d := engine.Pass(s)
	if len(d.Placements) != 0 {
		t.Fatalf("placed %v beyond department Research's limit of 4", enginetest.PlacedOn(s, d))
	}
	b := enginetest.BlockedOf(s, d, "nlp/one")
	want := "department Research is at its limit of 4 GPUs: it holds 4 and this task of group nlp needs 1"
	if b == nil || b.Constraint != engine.HeldByLimit || b.Reason != want {
		t.Fatalf("blocked %+v, want %q", b, want)
	}
}

func TestDepartmentPausedPausesItsTeams(t *testing.T) {
	s := enginetest.NewEstate(t).Pool("p", 16).Profile("one", 1, "p").
		Department("Research", 4, 0).
		Group("vision", 4, 8).In("Research").Queue("vision", "one").
		Run("vision/one", "p", 2, "1", enginetest.T0.Add(-time.Hour)).
		Wait("vision/one", 1, "16").Build()
	d := engine.Pass(s)
	if len(d.Placements)+len(d.Preemptions)+len(d.Failures) != 0 {
		t.Fatalf("a paused department's team was changed: %+v", d)
	}
	b := enginetest.BlockedOf(s, d, "vision/one")
	if b == nil || b.Constraint != engine.HeldByPaused || !strings.HasPrefix(b.Reason, "department Research is paused: an admin set its limit to 0 GPUs, so the work of group vision waits") {
		t.Fatalf("blocked %+v", b)
	}
}

func TestTaskLargerThanItsDepartmentsLimitFails(t *testing.T) {
	s := enginetest.NewEstate(t).Pool("p", 16).Profile("flex", 1, "p").
		Department("Research", 0, 4).
		Group("vision", 0, 8).In("Research").Queue("vision", "flex").
		Wait("vision/flex", 1, "8").Build()
	d := engine.Pass(s)
	if len(d.Failures) != 1 || !strings.Contains(d.Failures[0].Reason, "more than department Research's limit of 4 GPUs") {
		t.Fatalf("failures %+v", d.Failures)
	}
}

func TestDepartmentLimitLoweredSheds(t *testing.T) {
	s := enginetest.NewEstate(t).Pool("p", 16).Profile("one", 1, "p").
		Department("Research", 0, 2).
		Group("vision", 0, 8).In("Research").Group("nlp", 0, 8).In("Research").
		Queue("vision", "one").Queue("nlp", "one").
		Run("vision/one", "p", 2, "1", enginetest.T0.Add(-2*time.Hour)).
		Run("nlp/one", "p", 2, "1", enginetest.T0.Add(-time.Hour)).Build()
	d := engine.Pass(s)
	if got := enginetest.PreemptedIDs(d); !reflect.DeepEqual(got, []string{"nlp/one#4", "nlp/one#3"}) {
		t.Fatalf("preempted %v, want the department's two newest", got)
	}
	if r := d.Preemptions[0].Reason; r != "department Research's limit was lowered to 2 GPUs, below the 4 GPUs it held" || d.Preemptions[0].Cause != engine.CauseLimit {
		t.Fatalf("reason %q", r)
	}
}

// A department head splits 64 GPUs among three teams: each team's share
// is its own, and the department's unsplit rest goes to its own teams
// before the rest of the company.
func TestDepartmentSplitsItsReservation(t *testing.T) {
	s := enginetest.NewEstate(t).Pool("p", 80).Profile("one", 1, "p").
		Group("company", 0, 80).
		Department("Research", 64, 80).
		Group("vision", 32, 64).In("Research").
		Group("nlp", 16, 64).In("Research").
		Group("speech", 8, 64).In("Research").
		Queue("company", "one").Queue("speech", "one").Queue("vision", "one").
		Wait("company/one", 80, "1").Wait("speech/one", 80, "1").Wait("vision/one", 10, "1").Build()
	d := engine.Pass(s)
	// vision takes 10 of its 32 within its own reservation; speech its 8,
	// then the department's unsplit 8 (64 - 32 - 16 - 8), guaranteed; then,
	// lent within the department, what vision and nlp leave idle of theirs
	// (22 + 16), before the company gets the rest.
	got := placedBy(s, d)
	if got["vision"] != 10 || got["speech"] != 54 || got["company"] != 16 {
		t.Fatalf("placed %v, want vision 10, speech 8+8+38 = 54, company 16", got)
	}
	for _, p := range d.Placements {
		name := s.Groups[s.Queues[p.Queue].Group].Name
		if name == "speech" && p.Borrowed {
			t.Fatalf("speech's %s is within department Research's reservation, yet marked borrowed", p.TaskID)
		}
		if name == "company" && (!p.Borrowed || p.Phase != engine.PhaseLend) {
			t.Fatalf("company's %+v is lent", p)
		}
	}
}

// Reclaim returns a team's reservation from borrowers outside its
// department before it takes anything from its own department's teams,
// and a department's reservation protects its teams from outsiders.
func TestReclaimOutsideTheDepartmentFirst(t *testing.T) {
	build := func() *enginetest.EstateBuilder {
		return enginetest.NewEstate(t).Pool("p", 4).Profile("one", 1, "p").
			Department("Research", 2, 4).
			Group("vision", 2, 4).In("Research").
			Group("nlp", 0, 4).In("Research").
			Group("company", 0, 4).
			Queue("vision", "one").Queue("nlp", "one").Queue("company", "one").
			Run("company/one", "p", 2, "1", enginetest.T0.Add(-2*time.Hour)).
			// nlp's work is newer: newest first alone would take it.
			Run("nlp/one", "p", 2, "1", enginetest.T0.Add(-time.Hour))
	}
	s := build().Wait("vision/one", 1, "1").Build()
	d := engine.Pass(s)
	if got := enginetest.PreemptedIDs(d); !reflect.DeepEqual(got, []string{"company/one#2"}) {
		t.Fatalf("preempted %v, want the company's newest, outside the department", got)
	}
	if r := d.Preemptions[0].Reason; r != "reclaimed by group vision: its reservation is guaranteed" {
		t.Fatalf("reason %q", r)
	}
	// With three waiting, both of the company's go, then one of nlp's.
	s = build().Wait("vision/one", 3, "1").Build()
	d = engine.Pass(s)
	if got := enginetest.PreemptedIDs(d); !reflect.DeepEqual(got, []string{"company/one#2", "company/one#1"}) {
		t.Fatalf("preempted %v, want the company's two only: vision's reservation is 2", got)
	}
}

func TestDepartmentReservationProtectsItsTeamsAndReclaimsForThem(t *testing.T) {
	build := func() *enginetest.EstateBuilder {
		return enginetest.NewEstate(t).Pool("p", 4).Profile("one", 1, "p").
			Department("Research", 2, 4).
			Group("vision", 0, 4).In("Research").
			Group("company", 2, 4).
			Queue("vision", "one").Queue("company", "one")
	}
	// vision holds 2 within its department's reservation (its own is 0):
	// the company, below its reservation, cannot take them.
	s := build().Run("vision/one", "p", 4, "1", enginetest.T0.Add(-time.Hour)).Wait("company/one", 1, "1").Build()
	d := engine.Pass(s)
	if got := enginetest.PreemptedIDs(d); !reflect.DeepEqual(got, []string{"vision/one#4"}) {
		t.Fatalf("preempted %v, want one of vision's 2 borrowed above the department's reservation", got)
	}
	// The company borrows the pool; vision's department reclaims its 2.
	s = build().Run("company/one", "p", 4, "1", enginetest.T0.Add(-time.Hour)).Wait("vision/one", 3, "1").Build()
	d = engine.Pass(s)
	if got := enginetest.PreemptedIDs(d); !reflect.DeepEqual(got, []string{"company/one#4", "company/one#3"}) {
		t.Fatalf("preempted %v, want the company's 2 above its reservation", got)
	}
	want := "reclaimed for department Research's reservation, by its group vision: the department's reservation is guaranteed"
	if r := d.Preemptions[0].Reason; r != want {
		t.Fatalf("reason %q, want %q", r, want)
	}
}

// Among siblings, idle GPUs are lent by weight: the next goes to the one
// using the least per unit of weight.
func TestLendingSharesByWeight(t *testing.T) {
	s := enginetest.NewEstate(t).Pool("p", 12).Profile("one", 1, "p").
		Group("A", 0, 12).Weight(1).Group("B", 0, 12).Weight(2).
		Queue("A", "one").Queue("B", "one").
		Wait("A/one", 12, "1").Wait("B/one", 12, "1").Build()
	d := engine.Pass(s)
	if got := placedBy(s, d); got["A"] != 4 || got["B"] != 8 {
		t.Fatalf("placed %v, want A 4 and B 8 (weights 1 and 2)", got)
	}
	// Equal weights: the queuing priority, as in a flat estate.
	s = enginetest.NewEstate(t).Pool("p", 12).Profile("one", 1, "p").
		Group("A", 0, 12).Group("B", 0, 12).
		Queue("A", "one").Queue("B", "one").
		Wait("A/one", 12, "1").Wait("B/one", 12, "1").Build()
	d = engine.Pass(s)
	if got := placedBy(s, d); got["A"] != 12 {
		t.Fatalf("placed %v, want A's 12 first, by queuing priority", got)
	}
	// Weights inside departments: the departments share first, then their
	// teams within each.
	s = enginetest.NewEstate(t).Pool("p", 12).Profile("one", 1, "p").
		Department("R", 0, 12).Weight(1).Department("E", 0, 12).Weight(1).
		Group("r1", 0, 12).In("R").Weight(1).Group("r2", 0, 12).In("R").Weight(3).
		Group("e1", 0, 12).In("E").
		Queue("r1", "one").Queue("r2", "one").Queue("e1", "one").
		Wait("r1/one", 12, "1").Wait("r2/one", 12, "1").Wait("e1/one", 12, "1").Build()
	d = engine.Pass(s)
	if got := placedBy(s, d); got["e1"] != 6 || got["r1"]+got["r2"] != 6 || got["r2"] < 4 {
		t.Fatalf("placed %v, want E 6 and R 6, r2 most of R's", got)
	}
}

// A department's time budget counts its teams' work: when it is used up,
// its teams' budgeted work stops and waits, and exempt work runs on.
func TestDepartmentBudgetCoversItsTeams(t *testing.T) {
	s := enginetest.NewEstate(t).Pool("p", 8).Profile("one", 1, "p").Profile("cpu-prep", 0, "p").
		Department("Research", 0, 8).Budget(100, 100, 0).
		Group("vision", 0, 8).In("Research").
		Queue("vision", "one").Queue("vision", "cpu-prep").
		Run("vision/one", "p", 1, "1", enginetest.T0.Add(-time.Hour)).
		Run("vision/cpu-prep", "p", 1, "1", enginetest.T0.Add(-time.Hour)).
		Wait("vision/one", 1, "1").Wait("vision/cpu-prep", 1, "1").Build()
	d := engine.Pass(s)
	if got := enginetest.PreemptedIDs(d); !reflect.DeepEqual(got, []string{"vision/one#1"}) {
		t.Fatalf("preempted %v, want vision's budgeted task only", got)
	}
	if r := d.Preemptions[0].Reason; !strings.HasPrefix(r, "time budget used up: department Research's weekly time budget of 100 h") {
		t.Fatalf("reason %q", r)
	}
	if got := enginetest.PlacedOn(s, d)["p"]; !reflect.DeepEqual(got, []string{"vision/cpu-prep#4"}) {
		t.Fatalf("placed %v, want the exempt prep step", got)
	}
	b := enginetest.BlockedOf(s, d, "vision/one")
	if b == nil || b.Constraint != engine.HeldByBudgetUsed || !strings.HasPrefix(b.Reason, "department Research has used its weekly time budget") ||
		!b.Until.Equal(time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("blocked %+v", b)
	}
}

func TestBudgetUsedInTreeChargesDepartments(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC) // a Wednesday
	week := &model.TimeBudget{Period: model.PeriodWeek, MilliHours: 100_000}
	day := &model.TimeBudget{Period: model.PeriodDay, MilliHours: 10_000}
	policies := []*model.ResourcePolicy{{ID: "research", Budget: week}, {ID: "vision", Budget: day}, {ID: "nlp"}, {ID: "company"}}
	parents := map[string]string{"vision": "research", "nlp": "research"}
	start := now.Add(-48 * time.Hour) // Monday noon
	intervals := []*model.Placement{
		{PolicyID: "vision", StartedAt: start, WeightMilli: 1000},
		{PolicyID: "nlp", StartedAt: start, WeightMilli: 2000},
		{PolicyID: "nlp", StartedAt: start, WeightMilli: 0},
		{PolicyID: "company", StartedAt: start, WeightMilli: 1000},
	}
	used := engine.BudgetUsedInTree(policies, parents, intervals, nil, now)
	// research: vision 48 h × 1 + nlp 48 h × 2; vision: 12 h today.
	want := map[string]int64{"research": 144_000_000, "vision": 12_000_000}
	if !reflect.DeepEqual(used, want) {
		t.Fatalf("used %v, want %v", used, want)
	}
	if got := engine.BudgetedInTree(policies, parents); !reflect.DeepEqual(got, []string{"research", "vision", "nlp"}) {
		t.Fatalf("budgeted %v", got)
	}
	if flat := engine.BudgetUsed(policies, intervals, nil, now); !reflect.DeepEqual(flat, map[string]int64{"vision": 12_000_000}) {
		t.Fatalf("flat used %v", flat)
	}
}

// A malformed tree (a parent out of range, a node its own parent, a
// cycle) is read as if those nodes sat under the tenant: the pass ends and
// decides as for the flat estate.
func TestMalformedTreeIsReadAsFlat(t *testing.T) {
	build := func() *engine.Snapshot {
		return enginetest.NewEstate(t).Pool("p", 4).Profile("one", 1, "p").
			Group("A", 1, 2).Group("B", 1, 2).Group("C", 0, 2).
			Queue("A", "one").Queue("B", "one").Queue("C", "one").
			Wait("A/one", 3, "1").Wait("B/one", 3, "1").Wait("C/one", 3, "1").Build()
	}
	flat := engine.Pass(build())
	s := build()
	s.Groups[0].Parent = 1  // A in itself
	s.Groups[2].Parent = 99 // C in no group there is
	if got := engine.Pass(s); !reflect.DeepEqual(got.Placements, flat.Placements) {
		t.Fatalf("placed %+v, want the flat estate's %+v", got.Placements, flat.Placements)
	}
	s = build()
	s.Groups[1].Parent, s.Groups[2].Parent = 3, 2 // B in C, C in B
	// The cycle is cut where a walk up from B first goes round it: one of
	// the two ends up under the tenant, and the pass places as usual.
	if got := engine.Pass(s); len(got.Placements) != 4 {
		t.Fatalf("placed %+v, want the pool's 4 GPUs", got.Placements)
	}
}

// A department's sentence is reused by the next pass over the same stuck
// estate, as a team's is (PassReusing).
func TestDepartmentSentencesAreKept(t *testing.T) {
	s := enginetest.NewEstate(t).Pool("p", 16).Profile("one", 1, "p").
		Department("Research", 0, 4).
		Group("vision", 0, 8).In("Research").Group("nlp", 0, 8).In("Research").
		Queue("vision", "one").Queue("nlp", "one").
		Run("vision/one", "p", 4, "1", enginetest.T0.Add(-time.Hour)).
		Wait("nlp/one", 1, "1").Build()
	d1, r1 := engine.PassReusing(s, nil)
	d2, r2 := engine.PassReusing(s, r1)
	if r1.Rendered != 1 || r2.Rendered != 0 || !reflect.DeepEqual(d1, d2) {
		t.Fatalf("rendered %d then %d; decisions equal: %v", r1.Rendered, r2.Rendered, reflect.DeepEqual(d1, d2))
	}
	s.Groups[0].Limit = model.GPUs(5)
	_, r3 := engine.PassReusing(s, r2)
	if r3.Rendered != 0 {
		// Research now has room: nlp is placed, nothing waits.
		t.Fatalf("rendered %d with nothing waiting", r3.Rendered)
	}
}
