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
package storetest

import (
	"testing"

	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/storetest/harness"
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
		{"Tenants", exerciseTenants},
		{"Users", exerciseUsers},
		{"Groups", exerciseGroups},
		{"Memberships", exerciseMemberships},
		{"APIKeys", exerciseAPIKeys},
		{"GPUClasses", exerciseGPUClasses},
		{"Pools", exercisePools},
		{"Profiles", exerciseProfiles},
		{"Policies", exercisePolicies},
		{"ComputeResources", exerciseComputeResources},
		{"Projects", exerciseProjects},
		{"Tasks", exerciseTasks},
		{"Audit", exerciseAudit},
		{"Settings", exerciseSettings},
		{"Engine", exerciseEngine},
		{"Ledger", exerciseLedger},
		{"Workers", exerciseWorkers},
		{"ModelCalls", exerciseModelCalls},
		{"Gateway", exerciseGateway},
		{"Autoscalers", exerciseAutoscalers},
		{"Store", exerciseStore},
	} {
		t.Run(group.name, func(t *testing.T) {
			t.Parallel()
			group.run(t, setup)
		})
	}
}
