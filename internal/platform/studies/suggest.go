package studies

import (
	"math"
	"math/rand/v2"
	"strconv"

	"github.com/klique-ai/klique/internal/model"
)

// Suggest returns the parameters of trial n of a study, false when the
// strategy has no trial n (a grid has run out). It is a pure function of
// the spec and n: a random trial's values come from a generator seeded
// with the study's seed and n, so every replica, and every rerun of the
// controller after a crash, suggests the same trial n.
func Suggest(spec model.StudySpec, n int) (map[string]string, bool) {
	if n < 0 {
		return nil, false
	}
	out := map[string]string{}
	switch spec.Strategy {
	case model.StrategyGrid:
		if n >= GridSize(spec.Space) {
			return nil, false
		}
		// Mixed radix, the last parameter turning fastest: the order a
		// nested loop over the space in the order written gives.
		idx := n
		for i := len(spec.Space) - 1; i >= 0; i-- {
			p := spec.Space[i]
			c := gridCount(p)
			out[p.Name] = gridValue(p, idx%c)
			idx /= c
		}
	default:
		rng := rand.New(rand.NewPCG(uint64(spec.Seed), uint64(n)))
		for _, p := range spec.Space {
			out[p.Name] = sample(p, rng)
		}
		if h := spec.Halving; spec.Strategy == model.StrategyHalving && h != nil {
			out[h.Resource] = strconv.Itoa(h.MaxResource)
		}
	}
	return out, true
}

func gridValue(p model.SearchParam, i int) string {
	if p.Kind == model.ParamChoice {
		return p.Values[i]
	}
	return strconv.FormatInt(int64(p.Lo)+int64(i)*int64(max(p.Step, 1)), 10)
}

func sample(p model.SearchParam, rng *rand.Rand) string {
	switch p.Kind {
	case model.ParamChoice:
		return p.Values[rng.IntN(len(p.Values))]
	case model.ParamUniform:
		return formatFloat(p.Lo + rng.Float64()*(p.Hi-p.Lo))
	case model.ParamLogUniform:
		lo, hi := math.Log(p.Lo), math.Log(p.Hi)
		return formatFloat(math.Exp(lo + rng.Float64()*(hi-lo)))
	case model.ParamInt:
		return gridValue(p, rng.IntN(gridCount(p)))
	}
	return ""
}

// Rungs are successive halving's rungs: the resource levels MinResource,
// MinResource·Eta, … below MaxResource at which trials are compared.
func Rungs(h *model.Halving) []int {
	if h == nil || h.MinResource < 1 || h.Eta < 2 {
		return nil
	}
	var out []int
	for r := h.MinResource; r < h.MaxResource; r *= h.Eta {
		out = append(out, r)
		if r > h.MaxResource/h.Eta {
			break // the next rung is past the top, and r·eta could overflow (found by FuzzStudySpec)
		}
	}
	return out
}

// Promote decides one trial at one rung of successive halving: values are
// the objective values at that rung of every trial that has reached it,
// this one's (v) included. The best max(1, ⌊n/eta⌋) continue, so the
// first trials to reach a rung, which have few to be compared with,
// continue only when they are the best so far (trials cannot be paused
// to wait for later ones). cut is the worst value that continues.
func Promote(direction string, eta int, values []float64, v float64) (ok bool, cut float64) {
	keep := max(1, len(values)/max(eta, 2))
	better := 0
	sorted := append([]float64(nil), values...)
	sortBy(sorted, direction)
	for _, x := range values {
		if isBetter(direction, x, v) {
			better++
		}
	}
	cut = sorted[min(keep, len(sorted))-1]
	return better < keep, cut
}

// isBetter reports whether a beats b in direction.
func isBetter(direction string, a, b float64) bool {
	if direction == "min" {
		return a < b
	}
	return a > b
}

// sortBy sorts values best first.
func sortBy(values []float64, direction string) {
	for i := 1; i < len(values); i++ {
		for j := i; j > 0 && isBetter(direction, values[j], values[j-1]); j-- {
			values[j], values[j-1] = values[j-1], values[j]
		}
	}
}
