package studies

import (
	"fmt"
	"maps"
	"math"
	"strconv"
	"testing"

	"github.com/klique-ai/klique/internal/model"
)

func TestGridEnumeratesEveryPointOnceThenRunsOut(t *testing.T) {
	spec := model.StudySpec{Strategy: "grid", Space: []model.SearchParam{
		{Name: "opt", Kind: "choice", Values: []string{"sgd", "adam", "lion"}},
		{Name: "layers", Kind: "int", Lo: 2, Hi: 8, Step: 3},
		{Name: "bs", Kind: "int", Lo: 16, Hi: 17},
	}}
	if n := GridSize(spec.Space); n != 3*3*2 {
		t.Fatalf("grid size %d, want 18", n)
	}
	seen := map[string]bool{}
	for i := range 18 {
		p, ok := Suggest(spec, i)
		if !ok {
			t.Fatalf("trial %d: the grid ran out early", i)
		}
		key := fmt.Sprint(p["opt"], p["layers"], p["bs"])
		if seen[key] {
			t.Fatalf("trial %d repeats %s", i, key)
		}
		seen[key] = true
	}
	for _, opt := range []string{"sgd", "adam", "lion"} {
		for _, l := range []string{"2", "5", "8"} {
			for _, bs := range []string{"16", "17"} {
				if !seen[fmt.Sprint(opt, l, bs)] {
					t.Errorf("the grid never suggested %s %s %s", opt, l, bs)
				}
			}
		}
	}
	if _, ok := Suggest(spec, 18); ok {
		t.Fatal("a grid of 18 points suggested a 19th")
	}
	first, _ := Suggest(spec, 0)
	second, _ := Suggest(spec, 1)
	if first["opt"] != "sgd" || first["layers"] != "2" || first["bs"] != "16" || second["bs"] != "17" {
		t.Fatalf("the grid runs in nested-loop order, last parameter fastest: %v then %v", first, second)
	}
}

func TestRandomIsDeterministicBySeedAndStaysInTheSpace(t *testing.T) {
	spec := model.StudySpec{Strategy: "random", Seed: 42, Space: []model.SearchParam{
		{Name: "lr", Kind: "loguniform", Lo: 1e-5, Hi: 1e-1},
		{Name: "dropout", Kind: "uniform", Lo: 0.1, Hi: 0.5},
		{Name: "layers", Kind: "int", Lo: 1, Hi: 9, Step: 2},
		{Name: "opt", Kind: "choice", Values: []string{"sgd", "adam"}},
	}}
	other := spec
	other.Seed = 43
	differs := false
	lows := 0
	for i := range 200 {
		a, _ := Suggest(spec, i)
		b, _ := Suggest(spec, i)
		if !maps.Equal(a, b) {
			t.Fatalf("trial %d: %v then %v from the same seed", i, a, b)
		}
		if c, _ := Suggest(other, i); !maps.Equal(a, c) {
			differs = true
		}
		lr, _ := strconv.ParseFloat(a["lr"], 64)
		d, _ := strconv.ParseFloat(a["dropout"], 64)
		l, _ := strconv.Atoi(a["layers"])
		if lr < 1e-5 || lr > 1e-1 || d < 0.1 || d > 0.5 || l < 1 || l > 9 || l%2 != 1 || (a["opt"] != "sgd" && a["opt"] != "adam") {
			t.Fatalf("trial %d left the space: %v", i, a)
		}
		if lr < 1e-3 {
			lows++
		}
	}
	if !differs {
		t.Fatal("another seed gave the same 200 trials")
	}
	// Log-uniform: half the draws fall below the geometric middle, 1e-3.
	if math.Abs(float64(lows)-100) > 30 {
		t.Fatalf("%d of 200 log-uniform draws below 1e-3, want about 100", lows)
	}
}

func TestHalvingTrialsRunAtTheMaximumResource(t *testing.T) {
	spec := model.StudySpec{Strategy: "halving", Seed: 1, Space: []model.SearchParam{{Name: "lr", Kind: "uniform", Lo: 0, Hi: 1}},
		Halving: &model.Halving{Resource: "epochs", MinResource: 1, MaxResource: 27, Eta: 3}}
	p, _ := Suggest(spec, 5)
	if p["epochs"] != "27" {
		t.Fatalf("epochs %q, want 27", p["epochs"])
	}
	if r := Rungs(spec.Halving); fmt.Sprint(r) != "[1 3 9]" {
		t.Fatalf("rungs %v, want [1 3 9]", r)
	}
}

// A maxResource near the largest int (which startStudy accepts) ends the
// rungs at the last one below it: multiplying on overflowed, and the rungs
// ran away, holding the controller and growing without end (found by
// FuzzStudySpec).
func TestRungsStopBelowAHugeMaximum(t *testing.T) {
	r := Rungs(&model.Halving{Resource: "epochs", MinResource: 1, MaxResource: 1<<62 + 1, Eta: 2})
	if len(r) != 63 || r[62] != 1<<62 {
		t.Fatalf("%d rungs, the last %d: want 63, the last 2^62", len(r), r[len(r)-1])
	}
	if r := Rungs(&model.Halving{Resource: "epochs", MinResource: 5, MaxResource: math.MaxInt, Eta: 1000}); len(r) != 7 {
		t.Fatalf("rungs %v", r)
	}
}

func TestPromoteKeepsTheTopOneOverEta(t *testing.T) {
	vals := []float64{0.5, 0.9, 0.7, 0.6, 0.8, 0.4}
	// Six values, eta 3: the best two (0.9, 0.8) continue; the cut is 0.8.
	for v, want := range map[float64]bool{0.9: true, 0.8: true, 0.7: false, 0.4: false} {
		ok, cut := Promote("max", 3, vals, v)
		if ok != want || cut != 0.8 {
			t.Errorf("%g: continue %v (want %v), cut %g (want 0.8)", v, ok, want, cut)
		}
	}
	// Minimised: the least continue.
	if ok, cut := Promote("min", 3, vals, 0.4); !ok || cut != 0.5 {
		t.Errorf("min: 0.4 continues with cut 0.5, got %v %g", ok, cut)
	}
	// Fewer than eta values: only the best so far continues.
	if ok, _ := Promote("max", 3, []float64{0.7, 0.6}, 0.6); ok {
		t.Error("the second trial to reach a rung, worse than the first, continued")
	}
	if ok, _ := Promote("max", 3, []float64{0.7}, 0.7); !ok {
		t.Error("the first trial to reach a rung was stopped")
	}
}
