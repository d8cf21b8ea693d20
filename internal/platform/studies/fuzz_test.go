package studies

import (
	"encoding/json"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/klique-ai/klique/internal/model"
)

// FuzzStudySpec feeds a study definition, as JSON (what startStudy reads,
// and what 'klique study start -f' sends of its YAML file), to Normalize
// and, when it has no problems, to Suggest and Rungs, as a study's start
// and its controller do. Nothing may panic or run away. A normalized spec
// normalizes to itself; every trial suggested sets each parameter of the
// space to a value inside it, the same each time it is asked; rungs climb
// by eta below maxResource.
//
// Seeds live in testdata/fuzz/FuzzStudySpec; run it with
//
//	go test -run '^$' -fuzz FuzzStudySpec -fuzztime 60s ./internal/platform/studies
func FuzzStudySpec(f *testing.F) {
	f.Add([]byte(`{"strategy":"grid","objective":"loss","budget":{"trials":4},"space":[{"name":"lr","kind":"choice","values":["0.1","0.01"]},{"name":"layers","kind":"int","lo":1,"hi":4,"step":2}]}`))
	f.Add([]byte(`{"strategy":"random","seed":7,"objective":"accuracy","maxConcurrent":2,"budget":{"gpuHours":1.5},"space":[{"name":"lr","kind":"loguniform","lo":1e-5,"hi":0.1},{"name":"p","kind":"uniform","lo":-1,"hi":1}]}`))
	f.Add([]byte(`{"strategy":"halving","objective":"loss","budget":{"trials":20},"halving":{"resource":"epochs","minResource":1,"maxResource":27,"eta":3},"space":[{"name":"lr","kind":"uniform","lo":0,"hi":1}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var spec model.StudySpec
		if json.Unmarshal(data, &spec) != nil {
			return
		}
		if ps := Normalize(&spec, direction); len(ps) > 0 {
			return
		}
		again := clone(t, spec)
		if ps := Normalize(&again, direction); len(ps) > 0 || encode(t, again) != encode(t, spec) {
			t.Fatalf("a normalized spec normalizes to %+v (%v), not itself %+v", again, ps, spec)
		}
		if spec.Strategy == model.StrategyGrid && GridSize(spec.Space) < 1 {
			t.Fatalf("a valid grid of %d points", GridSize(spec.Space))
		}
		for n := range 4 {
			got, ok := Suggest(spec, n)
			if twice, ok2 := Suggest(spec, n); ok != ok2 || !reflect.DeepEqual(got, twice) {
				t.Fatalf("trial %d suggested %v, then %v", n, got, twice)
			}
			if !ok {
				continue
			}
			for _, p := range spec.Space {
				if v, present := got[p.Name]; !present || !inside(p, v) {
					t.Fatalf("trial %d: %s = %q (set: %v), outside %+v", n, p.Name, v, present, p)
				}
			}
		}
		if h := spec.Halving; h != nil {
			rungs := Rungs(h)
			for i, r := range rungs {
				if r >= h.MaxResource || (i > 0 && r != rungs[i-1]*h.Eta) || (i == 0 && r != h.MinResource) {
					t.Fatalf("rungs %v for %+v", rungs, h)
				}
			}
		}
	})
}

// direction stands in for tasks.Direction, the rule that names a metric's
// better side.
func direction(metric string) string {
	if strings.Contains(metric, "loss") {
		return "min"
	}
	return "max"
}

func encode(t *testing.T, spec model.StudySpec) string {
	b, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func clone(t *testing.T, spec model.StudySpec) model.StudySpec {
	var out model.StudySpec
	if err := json.Unmarshal([]byte(encode(t, spec)), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// inside reports whether a suggested value lies in its parameter's range;
// a sampled float is written with six significant digits, so it may round
// to just past an end.
func inside(p model.SearchParam, v string) bool {
	switch p.Kind {
	case model.ParamChoice:
		return slices.Contains(p.Values, v)
	case model.ParamInt:
		n, err := strconv.ParseInt(v, 10, 64)
		return err == nil && float64(n) >= p.Lo && float64(n) <= p.Hi
	}
	x, err := strconv.ParseFloat(v, 64)
	slack := 1e-5 * max(math.Abs(p.Lo), math.Abs(p.Hi))
	return err == nil && x >= p.Lo-slack && x <= p.Hi+slack
}
