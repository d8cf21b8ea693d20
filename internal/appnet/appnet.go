// Package appnet is how the control plane, a site's router and the LLM
// gateway open connections to app instances: directly to the address the
// instance's worker reported (host:port, reachable on the worker's site),
// or through the worker's outbound tunnel when the site has no inbound
// path. It holds no state of its own beyond the activity notes the idle
// limits read; who may reach an instance is decided before a connection
// is asked for, by the platform service.
package appnet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// Target is an app instance's current attempt, as its worker reported it.
type Target struct {
	TenantID string
	TaskID   string
	// WorkerID is the worker running the attempt; its tunnel, if it holds
	// one, reaches the instance.
	WorkerID string
	Attempt  int
	// Address is host:port where the instance answers on its site; empty
	// while it is not ready.
	Address string
	// Allow is the networks a direct dial to Address may reach, as the
	// platform decided when it was reported (the router's address rule,
	// rule.go); Refused, when set, is why the address was refused: no
	// direct dial is made, and only the worker's tunnel reaches it.
	Allow   Allow
	Refused string
}

// TargetOf is a target with its address rule as stored on the task
// (model.TaskRun's AppAllow and AppRefused).
func TargetOf(tenantID, taskID, workerID string, attempt int, address, allow, refused string) Target {
	return Target{TenantID: tenantID, TaskID: taskID, WorkerID: workerID, Attempt: attempt, Address: address,
		Allow: ParseAllow(allow), Refused: refused}
}

// ErrNotReady is returned for an instance with no address yet (or no
// longer): nothing answers for it.
var ErrNotReady = errors.New("the app instance is not ready")

// Reacher opens a connection to an app instance's port.
type Reacher interface {
	Reach(ctx context.Context, t Target) (net.Conn, error)
}

// Direct reaches an instance at its reported address, over the network
// the caller shares with the instance's site, within the router's address
// rule: the IP it connects to must be inside t.Allow, and never one of Own.
type Direct struct {
	Dialer net.Dialer
	// Own are this process's listeners (nil: none known).
	Own *Own
}

// Reach dials t.Address.
func (d *Direct) Reach(ctx context.Context, t Target) (net.Conn, error) {
	if t.Address == "" {
		return nil, ErrNotReady
	}
	if t.Refused != "" {
		return nil, fmt.Errorf("reach app instance %s at %s: %w", t.TaskID, t.Address, &RefusedError{Reason: t.Refused})
	}
	dialer := d.Dialer
	dialer.Control = control(t.Allow, d.Own)
	c, err := dialer.DialContext(ctx, "tcp", t.Address)
	if err != nil {
		return nil, fmt.Errorf("reach app instance %s at %s: %w", t.TaskID, t.Address, err)
	}
	return c, nil
}

// Tunnels is the control plane's end of the workers' tunnels: it opens a
// stream through a worker's tunnel to one of the instances that worker
// runs (the worker checks that it runs it and dials its local address).
type Tunnels interface {
	// Holds reports whether the worker holds a tunnel to this replica now.
	Holds(workerID string) bool
	// Open opens a stream to the instance through its worker's tunnel.
	Open(ctx context.Context, t Target) (net.Conn, error)
}

// Auto reaches an instance through its worker's tunnel when the worker
// holds one, and directly otherwise; with PreferDirect (a router at the
// instance's site) it dials directly first and uses the tunnel only when
// that fails.
type Auto struct {
	Tunnels      Tunnels
	Direct       Reacher
	PreferDirect bool
}

// Reach opens a connection to t by the way Auto prefers.
func (a *Auto) Reach(ctx context.Context, t Target) (net.Conn, error) {
	tunnel := a.Tunnels != nil && a.Tunnels.Holds(t.WorkerID)
	direct := a.Direct
	if direct == nil {
		direct = &Direct{}
	}
	switch {
	case tunnel && !a.PreferDirect:
		return a.Tunnels.Open(ctx, t)
	case tunnel:
		c, err := direct.Reach(ctx, t)
		if err == nil {
			return c, nil
		}
		return a.Tunnels.Open(ctx, t)
	default:
		return direct.Reach(ctx, t)
	}
}

// Activity notes the last traffic to each instance through the router and
// the gateway, for the session idle limits. It is in memory: a restart
// forgets it, which only delays an idle stop.
type Activity struct {
	mu   sync.Mutex
	last map[string]Note
	now  func() time.Time
}

// Note is an instance's traffic: when it was last used and how many bytes
// have passed both ways since this process started.
type Note struct {
	Last  time.Time
	Bytes int64
}

// NewActivity returns an empty activity record; now is the clock (nil:
// time.Now).
func NewActivity(now func() time.Time) *Activity {
	if now == nil {
		now = time.Now
	}
	return &Activity{last: map[string]Note{}, now: now}
}

// Used notes bytes of traffic to an instance now.
func (a *Activity) Used(taskID string, bytes int64) {
	if a == nil {
		return
	}
	now := a.now()
	a.mu.Lock()
	n := a.last[taskID]
	n.Last, n.Bytes = now, n.Bytes+bytes
	a.last[taskID] = n
	a.mu.Unlock()
}

// Of returns an instance's traffic note (zero when none passed).
func (a *Activity) Of(taskID string) Note {
	if a == nil {
		return Note{}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.last[taskID]
}

// Forget drops an instance's note, once it has ended.
func (a *Activity) Forget(taskID string) {
	if a == nil {
		return
	}
	a.mu.Lock()
	delete(a.last, taskID)
	a.mu.Unlock()
}

// UsedSince returns, for each instance used after after, when it was last
// used: what a replica writes to the store for the idle limits.
func (a *Activity) UsedSince(after time.Time) map[string]time.Time {
	if a == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[string]time.Time{}
	for id, n := range a.last {
		if n.Last.After(after) {
			out[id] = n.Last
		}
	}
	return out
}
