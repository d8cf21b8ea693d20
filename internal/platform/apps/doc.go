// Package apps is the apps domain of the platform service: the app
// catalogue (the built-ins and a tenant's own entries, kept in the estate),
// launching an app instance as a task of type application, stopping it,
// and reading instances, with the rules that govern launches: an admin
// lock per app, a tenant-wide switch, and running-apps quotas for the
// company and per group.
//
// An instance is a task: the tasks domain enqueues it (same compute
// resources, policies, reservations, limits, time budgets, ledger and
// audit), and the facade wires its enqueue and abort here, so this domain
// does not import another's.
package apps

import (
	"context"
	"time"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
)

// Enqueuer enqueues an app instance through the tasks domain: a task with
// id on computeResource (id or name; group disambiguates a name) in
// project, whose spec prepare writes inside the enqueue's transaction;
// request is the launch as the caller sent it, for its idempotency key.
type Enqueuer func(ctx context.Context, name, project, computeResource, group, id string, prepare Prepare, request any) (*model.Task, error)

// Stopper stops an app instance through the tasks domain's abort path,
// with the reason "stopped by <user>".
type Stopper func(ctx context.Context, id string) (*model.Task, error)

// Apps is the apps domain.
type Apps struct {
	k       *kernel.Kernel
	enqueue Enqueuer
	abort   Stopper
	serving *Serving
	expire  Expirer
	// hosts says where instances are served (their URL).
	hosts model.AppHosts
}

// Deps is what the apps domain needs of the tasks domain, and where its
// instances are served, given at construction (the platform service wires
// them). Without Enqueue, Stop or Expire, a launch, stop or expiry fails.
type Deps struct {
	// Enqueue and Stop are the tasks domain's enqueue and stop of an
	// instance; Expire its stop on the platform's own authority.
	Enqueue Enqueuer
	Stop    Stopper
	Expire  Expirer
	// Hosts says where the router serves instances: on hosts of their
	// own, or by path (the zero value).
	Hosts model.AppHosts
}

// New returns the apps domain over a kernel, wired to what it needs.
func New(k *kernel.Kernel, d Deps) *Apps {
	return &Apps{k: k, serving: NewServing(), enqueue: d.Enqueue, abort: d.Stop, expire: d.Expire, hosts: d.Hosts}
}

// Serving returns the index of the ready serving instances, which the
// facade hands the llm domain (a route's endpoints) and the composition
// the gateway (how to reach one).
func (s *Apps) Serving() *Serving { return s.serving }

// FollowServing keeps the serving index current until ctx ends (see
// Serving.Follow), rebuilding it from the store every rebuildEvery.
func (s *Apps) FollowServing(ctx context.Context, rebuildEvery time.Duration) {
	s.serving.Follow(ctx, s.k.Store, s.k.Events, rebuildEvery, func(err error) {
		s.k.Log.Warn("serving index", "err", err)
	})
}
