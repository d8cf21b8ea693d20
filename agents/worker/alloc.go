package worker

import (
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/klique-ai/klique/internal/agentapi"
)

// ErrNoCapacity: the GPUs a task asks for are not free.
var ErrNoCapacity = errors.New("not enough free GPUs")

// ErrNoFractions: the runner cannot share a GPU.
var ErrNoFractions = errors.New("this worker's runner cannot run a fraction of a GPU")

// Allocator hands the worker's GPUs to tasks. Whole GPUs are never shared;
// fractions (when the runner supports them) share a GPU only with other
// fractions, and the shares on one GPU add up to at most 1000 thousandths.
type Allocator struct {
	mu        sync.Mutex
	gpus      []agentapi.GPU
	fractions bool
	// used is the thousandths in use on each GPU (by index); whole marks
	// GPUs held by a whole-GPU task.
	used  map[int]int64
	holds map[string]allocation
}

type allocation struct {
	indices []int
	share   int64
}

// NewAllocator owns gpus. fractions says whether shares may be handed out.
func NewAllocator(gpus []agentapi.GPU, fractions bool) *Allocator {
	g := append([]agentapi.GPU(nil), gpus...)
	sort.Slice(g, func(i, j int) bool { return g[i].Index < g[j].Index })
	return &Allocator{gpus: g, fractions: fractions, used: map[int]int64{}, holds: map[string]allocation{}}
}

// Free returns how many GPUs are idle and, when fractions are on, the
// largest share (in thousandths) one task could get on one GPU now.
func (a *Allocator) Free() (idle int, maxShare int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, g := range a.gpus {
		u := a.used[g.Index]
		if u == 0 {
			idle++
		}
		if a.fractions && 1000-u > maxShare {
			maxShare = 1000 - u
		}
	}
	return idle, maxShare
}

// Allocate reserves GPUs for key: milliPerNode thousandths (1000 per whole
// GPU; a size above one GPU that is not whole is rounded up). It returns
// the GPUs and the share of each (1000 for whole GPUs).
func (a *Allocator) Allocate(key string, milliPerNode int64) ([]agentapi.GPU, int64, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.holds[key]; ok {
		return nil, 0, fmt.Errorf("allocate GPUs: %s already holds GPUs", key)
	}
	switch {
	case milliPerNode <= 0:
		a.holds[key] = allocation{}
		return nil, 0, nil
	case milliPerNode < 1000:
		if !a.fractions {
			return nil, 0, ErrNoFractions
		}
		// Best fit: the fullest shared GPU it still fits on, so that
		// fractions pack and whole GPUs stay free; else an idle GPU.
		best := -1
		for i, g := range a.gpus {
			u := a.used[g.Index]
			if u == 0 || u+milliPerNode > 1000 {
				continue
			}
			if best < 0 || u > a.used[a.gpus[best].Index] {
				best = i
			}
		}
		if best < 0 {
			for i, g := range a.gpus {
				if a.used[g.Index] == 0 {
					best = i
					break
				}
			}
		}
		if best < 0 {
			return nil, 0, fmt.Errorf("%w: no GPU has %d thousandths free", ErrNoCapacity, milliPerNode)
		}
		g := a.gpus[best]
		a.used[g.Index] += milliPerNode
		a.holds[key] = allocation{indices: []int{g.Index}, share: milliPerNode}
		return []agentapi.GPU{g}, milliPerNode, nil
	default:
		n := int((milliPerNode + 999) / 1000)
		picked := a.idle(n)
		if len(picked) < n {
			return nil, 0, fmt.Errorf("%w: the task needs %d whole GPUs, %d are idle", ErrNoCapacity, n, len(picked))
		}
		return a.holdWhole(key, picked), 1000, nil
	}
}

// Release gives back what key holds.
func (a *Allocator) Release(key string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	al, ok := a.holds[key]
	if !ok {
		return
	}
	delete(a.holds, key)
	for _, i := range al.indices {
		a.used[i] -= al.share
		if a.used[i] <= 0 {
			delete(a.used, i)
		}
	}
}

// AllocateSlots reserves capacity for key when the environment's scheduler
// places the work (Config.Placed): the worker's GPUs are slots, counted, not
// devices. A task takes nodes × its whole GPUs per node; a task larger than
// what is idle (several nodes) takes every idle slot, so the worker claims
// nothing more until it ends, and the scheduler queues what does not fit.
func (a *Allocator) AllocateSlots(key string, milliPerNode int64, nodes int) ([]agentapi.GPU, int64, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.holds[key]; ok {
		return nil, 0, fmt.Errorf("allocate GPUs: %s already holds GPUs", key)
	}
	if milliPerNode <= 0 {
		a.holds[key] = allocation{}
		return nil, 0, nil
	}
	perNode := int((milliPerNode + 999) / 1000)
	picked := a.idle(perNode * max(nodes, 1))
	if len(picked) < perNode {
		return nil, 0, fmt.Errorf("%w: the task needs %d GPUs per node, %d slots are idle", ErrNoCapacity, perNode, len(picked))
	}
	return a.holdWhole(key, picked), 1000, nil
}

// idle returns up to n of the GPUs nothing holds, in the worker's order.
// The caller holds a.mu.
func (a *Allocator) idle(n int) []agentapi.GPU {
	var picked []agentapi.GPU
	for _, g := range a.gpus {
		if a.used[g.Index] == 0 {
			picked = append(picked, g)
			if len(picked) == n {
				break
			}
		}
	}
	return picked
}

// holdWhole holds picked, whole, under key and returns them. The caller
// holds a.mu.
func (a *Allocator) holdWhole(key string, picked []agentapi.GPU) []agentapi.GPU {
	al := allocation{share: 1000}
	for _, g := range picked {
		a.used[g.Index] = 1000
		al.indices = append(al.indices, g.Index)
	}
	a.holds[key] = al
	return picked
}

// Hold takes the worker's GPUs among indices out of use under key, whole,
// whatever holds them now: work the worker did not start (what an earlier
// run left and could not be stopped) may be using them. Release gives them
// back.
func (a *Allocator) Hold(key string, indices []int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	al := allocation{share: 1000}
	for _, g := range a.gpus {
		for _, i := range indices {
			if g.Index == i {
				al.indices = append(al.indices, i)
				a.used[i] += 1000
			}
		}
	}
	a.holds[key] = al
}
