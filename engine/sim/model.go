// Package sim runs the real compute policy engine (engine.Pass) on a
// virtual clock over a workload, to answer "what if we change this policy"
// before anyone changes it. It lays estates out with engine.Model, as the
// live engine loop does.
package sim

import (
	"fmt"
	"strconv"
	"time"

	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/model"
)

// LoadEstate reads an estate file the way klique apply does, onto an empty
// estate: the document is applied with fresh ids ("sim-1", "sim-2", ...)
// and the result validated. It returns the estate's warnings too.
func LoadEstate(data []byte) (*estate.Estate, []estate.Warning, error) {
	doc, err := estate.ParseDocument(data)
	if err != nil {
		return nil, nil, err
	}
	n := 0
	ids := func() string { n++; return "sim-" + strconv.Itoa(n) }
	e, err := doc.Apply(&estate.Estate{}, "simulation", ids, time.Time{})
	if err != nil {
		return nil, nil, err
	}
	if err := e.Validate(); err != nil {
		return nil, nil, err
	}
	return e, e.Warnings(), nil
}

// TaskSize resolves a task's size on a compute resource: the profile's, or,
// when the profile reads sizes from tasks, the given one (the profile's
// size is the default). A fixed-size profile accepts only its own size.
func TaskSize(e *estate.Estate, cr *model.ComputeResource, given string) (model.Size, error) {
	pr := e.Profile(cr.ProfileID)
	if pr == nil {
		return model.Size{}, fmt.Errorf("compute resource %q has no profile", cr.Name)
	}
	if given == "" {
		return pr.Size, nil
	}
	size, err := model.ParseSize(given)
	if err != nil {
		return model.Size{}, err
	}
	if pr.SizeParameter == "" && size != pr.Size {
		return model.Size{}, fmt.Errorf("compute resource %q gives %s GPUs (profile %s has a fixed size); leave size out", cr.Name, pr.Size, pr.Name)
	}
	return size, nil
}
