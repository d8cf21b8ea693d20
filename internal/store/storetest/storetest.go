// Package storetest is the conformance suite every store driver passes, in
// the style of River's riverdrivertest: a driver's test calls Exercise with a
// constructor, and the suite checks every method of store.Queries and
// store.Store against it, including the errors the rest of the control plane
// relies on (ErrNotFound, ErrConflict), tenant isolation, pagination,
// transactions and concurrency.
//
// Subtests run in parallel. Most run in a transaction that is rolled back
// when they end, as riverdrivertest's do (its executorWithTx), on one of a
// few stores the suite opens once and hands to one subtest at a time; each
// call of store.Queries runs under a savepoint of its own, so that it
// leaves nothing behind when it fails, as a call on a store does. Subtests
// that test transactions, locks or concurrency themselves need connections
// of their own and get a fresh store from the constructor, so a driver's
// constructor must give out independent stores (a new file, a new schema).
//
// The suite is split into packages by concern, so that none grows past a
// size one can hold in one's head: access (tenants, users, groups, API
// keys), estate (GPU classes, pools, profiles, policies, compute resources,
// projects) and work (tasks, engine, workers, autoscalers, model calls,
// audit, and the store as a whole), all on one harness (the bundle, the
// setup and its shared stores, the per-call savepoint wrapper, fixtures
// and checks). Exercise, here, is the one entry point: it runs every part.
package storetest

import (
	"testing"

	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/storetest/access"
	"github.com/klique-ai/klique/internal/store/storetest/estate"
	"github.com/klique-ai/klique/internal/store/storetest/harness"
	"github.com/klique-ai/klique/internal/store/storetest/work"
)

// Exercise runs the conformance suite. newStore must return a new, empty
// store each time it is called and close it when t ends. When its stores
// can run a transaction that is never committed (a BeginRollback method,
// as sqlstore's stores have), most subtests run in one; otherwise every
// subtest gets a store of its own.
func Exercise(t *testing.T, newStore func(t *testing.T) store.Store) {
	t.Helper()
	setup := harness.NewSetup(t, newStore)
	for _, group := range []struct {
		name string
		run  func(t *testing.T, setup harness.Setup)
	}{
		{"Tenants", access.Tenants},
		{"Users", access.Users},
		{"Groups", access.Groups},
		{"Memberships", access.Memberships},
		{"APIKeys", access.APIKeys},
		{"GPUClasses", estate.GPUClasses},
		{"Pools", estate.Pools},
		{"Profiles", estate.Profiles},
		{"Policies", estate.Policies},
		{"ComputeResources", estate.ComputeResources},
		{"Projects", estate.Projects},
		{"Tasks", work.Tasks},
		{"LocalRuns", work.LocalRuns},
		{"Audit", work.Audit},
		{"Settings", work.Settings},
		{"IdempotencyKeys", work.IdempotencyKeys},
		{"Engine", work.Engine},
		{"Ledger", work.Ledger},
		{"Workers", work.Workers},
		{"ModelCalls", work.ModelCalls},
		{"Gateway", work.Gateway},
		{"Apps", work.Apps},
		{"Autoscalers", work.Autoscalers},
		{"Pipelines", work.Pipelines},
		{"Artifacts", work.Artifacts},
		{"Studies", work.Studies},
		{"Schedules", work.Schedules},
		{"Store", work.Store},
	} {
		t.Run(group.name, func(t *testing.T) {
			t.Parallel()
			group.run(t, setup)
		})
	}
}
