// Package kernel is what every domain of the platform service shares: the
// transaction helper and the one audit writer (every audit entry of every
// channel, the engine's included, is written by Txn.Record), events
// published after commit, the caller and the access rules, errors people
// can act on, the request cache, and the estate lookups and the one way the
// allocation model changes (ChangeEstate).
//
// The domains (allocation, tasks, fleet, llm, access, live) import the
// kernel and model-level packages, never one another; the platform facade
// composes them.
package kernel

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/klique-ai/klique/internal/events"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/vault"
)

// Options configure a Kernel.
type Options struct {
	Store  store.Store
	Events events.Broker
	Logger *slog.Logger
	// Now is the clock; time.Now when nil. Tests inject their own.
	Now func() time.Time
	// Vault seals secrets; without one, secrets cannot be set or opened.
	Vault *vault.Vault
}

// Kernel holds what the domains share. Its fields are set once by New.
type Kernel struct {
	Store  store.Store
	Events events.Broker
	Log    *slog.Logger
	Vault  *vault.Vault
	now    func() time.Time

	// estateMu serialises changes to one tenant's allocation model within a
	// replica; the store's tenant lock does it across replicas.
	estateMu sync.Map // tenant id -> *sync.Mutex
	// estates keeps each tenant's allocation model with its version.
	estates estateCache

	hooksMu sync.Mutex
	// identityHooks run when a change to users, memberships, keys,
	// projects or tenants commits (see OnIdentityChange).
	identityHooks []func()
}

// New returns a kernel.
func New(o Options) *Kernel {
	k := &Kernel{Store: o.Store, Events: o.Events, Log: o.Logger, Vault: o.Vault, now: o.Now}
	if k.now == nil {
		k.now = time.Now
	}
	if k.Log == nil {
		k.Log = slog.Default()
	}
	if k.Events == nil {
		k.Events = events.NewBus()
	}
	return k
}

// Now returns the current time, in UTC and to the microsecond the stores
// keep.
func (k *Kernel) Now() time.Time { return k.now().UTC().Truncate(time.Microsecond) }

// Internal logs an unexpected error with the request id and returns it
// unchanged; errors meant for people pass through untouched.
func (k *Kernel) Internal(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	var pe *Error
	if errors.As(err, &pe) || errors.Is(err, identity.ErrUnauthenticated) {
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, ErrRollback) {
		return err
	}
	k.Log.ErrorContext(ctx, "platform operation failed", "err", err, "request_id", identity.RequestIDFrom(ctx))
	return err
}

// OnIdentityChange adds f to what runs after a change to users,
// memberships, keys, projects or tenants commits, before its events are
// published: the authenticator drops its cached checks and live
// subscribers re-check their credential.
func (k *Kernel) OnIdentityChange(f func()) {
	k.hooksMu.Lock()
	k.identityHooks = append(k.identityHooks, f)
	k.hooksMu.Unlock()
}

// IdentityChanged runs the identity-change hooks.
func (k *Kernel) IdentityChanged() {
	k.hooksMu.Lock()
	hooks := k.identityHooks
	k.hooksMu.Unlock()
	for _, f := range hooks {
		f()
	}
}

// IdentityKind reports whether an event is a change to users, memberships,
// keys, projects or tenants: after one, credentials are checked again.
func IdentityKind(kind string) bool {
	for _, prefix := range []string{"api_key.", "user.", "group.", "tenant.", "project."} {
		if len(kind) >= len(prefix) && kind[:len(prefix)] == prefix {
			return true
		}
	}
	return false
}

// LockEstate serialises allocation-model changes of one tenant in this
// replica.
func (k *Kernel) LockEstate(tenantID string) func() {
	m, _ := k.estateMu.LoadOrStore(tenantID, &sync.Mutex{})
	mu := m.(*sync.Mutex)
	mu.Lock()
	return mu.Unlock
}
