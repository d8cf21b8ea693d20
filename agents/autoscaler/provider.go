// Package autoscaler is the cloud autoscaler daemon (`klique autoscaler`):
// the listener on a cloud pool's hidden queue. The engine places work on
// the pool's declared capacity whether or not any node is there; the
// daemon sees that work waiting (placed, unclaimed), starts instances whose
// workers register with the pool and claim it, terminates instances that
// never register, and removes idle ones: the pool scales from zero and
// back to zero.
//
// Providers (AWS EC2, and a local one that runs worker processes on this
// machine) implement one small interface; the decisions are made once, in
// Autoscaler.Step, with an injected clock.
package autoscaler

import (
	"context"
	"errors"
	"sort"
	"time"
)

// Tags every instance carries, so that List finds the autoscaler's own
// instances (and a restarted daemon adopts them).
const (
	TagPool       = "klique:pool"
	TagAutoscaler = "klique:autoscaler"
	TagWorker     = "klique:worker"
)

// ErrNoCapacity is a provider's refusal for lack of capacity (no spot
// capacity, insufficient instance capacity): the autoscaler falls back to
// on-demand, or tries again later, rather than failing.
var ErrNoCapacity = errors.New("no capacity")

// WorkerBootstrap is what an instance needs to boot a worker that
// registers with the pool.
type WorkerBootstrap struct {
	Server string
	// Token is the pool's worker credential: a secret, never logged.
	Token string
	Pool  string
	// Name is the worker's name: the autoscaler matches the registered
	// worker to its instance by it.
	Name string
	GPUs int
	// Args are extra `klique worker` arguments (the worker_args setting).
	Args []string
}

// InstanceSpec is one instance to start.
type InstanceSpec struct {
	Name   string
	Type   string
	GPUs   int
	Spot   bool
	Image  string
	Region string
	// Settings are the autoscaler's provider settings (subnet_id, …).
	Settings map[string]string
	Tags     map[string]string
	Worker   WorkerBootstrap
}

// Instance states as providers report them.
const (
	// StatePending: asked for, not running yet (a spot request not yet
	// fulfilled, a VM booting).
	StatePending = "pending"
	// StateRunning: the machine runs (its worker may not have registered
	// yet).
	StateRunning = "running"
	// StateGone: terminated or stopping; no longer counted.
	StateGone = "gone"
)

// Instance is an instance as its provider lists it.
type Instance struct {
	ID         string
	Name       string
	Type       string
	Spot       bool
	State      string
	LaunchedAt time.Time
	Tags       map[string]string
}

// Provider starts, terminates and lists instances.
type Provider interface {
	// Start launches one instance; ErrNoCapacity (wrapped) when the
	// provider has no capacity for it.
	Start(ctx context.Context, spec InstanceSpec) (Instance, error)
	// Terminate stops instances for good.
	Terminate(ctx context.Context, ids []string) error
	// List returns the instances carrying all the tags, terminated ones
	// left out or reported as StateGone.
	List(ctx context.Context, tags map[string]string) ([]Instance, error)
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
