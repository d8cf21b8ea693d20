package tasks

import (
	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/model"
)

// The rules of which pools of a profile can take a task's size, as the
// engine's pass applies them (engine.Pass fails waiting work none can
// take), so that enqueue refuses such work in the first place.

// largestPool is the pool of the profile whose kind can run size that
// declares the most GPUs (the first in the profile's order among equals),
// or nil when it lists none or they all declare 0: the engine's rule
// (engine.Pass fails waiting work larger than it).
func largestPool(e *estate.Estate, pr *model.Profile, size model.Size) *model.Pool {
	var best *model.Pool
	for _, id := range pr.Pools {
		if p := e.Pool(id); p != nil && p.Kind.CanRun(size) && p.CapacityGPUs > 0 && (best == nil || p.CapacityGPUs > best.CapacityGPUs) {
			best = p
		}
	}
	return best
}

// noPoolCanRun says why no pool of the profile can run work of size, by
// its kind (model.PoolKind.CanRun), or "" when one can. A profile that
// lists no pool is closed, not wrong: its work waits.
func noPoolCanRun(e *estate.Estate, pr *model.Profile, size model.Size) string {
	var names []string
	var kinds []model.PoolKind
	for _, id := range pr.Pools {
		p := e.Pool(id)
		if p == nil {
			continue
		}
		if p.Kind.CanRun(size) {
			return ""
		}
		names, kinds = append(names, p.Name), append(kinds, p.Kind)
	}
	if len(names) == 0 {
		return ""
	}
	return model.NoPoolCanRun(pr.Name, size, names, kinds)
}
