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
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
)

// Exercise runs the conformance suite. newStore must return a new, empty
// store each time it is called and close it when t ends. When its stores
// can run a transaction that is never committed (a BeginRollback method,
// as sqlstore's stores have), most subtests run in one; otherwise every
// subtest gets a store of its own.
func Exercise(t *testing.T, newStore func(t *testing.T) store.Store) {
	t.Helper()
	pool := newStorePool(t, newStore)
	setup := func(t *testing.T, opts ...setupOption) *testBundle {
		t.Helper()
		if pool == nil || slices.Contains(opts, ownStore) {
			return newBundle(t, newStore(t))
		}
		return newBundle(t, pool.begin(t))
	}
	for _, group := range []struct {
		name string
		run  func(t *testing.T, setup setupFunc)
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

// setupFunc gives a subtest the bundle it starts from. Its store is a
// transaction rolled back when the subtest ends; with ownStore it is a
// store of the subtest's own.
type setupFunc func(t *testing.T, opts ...setupOption) *testBundle

type setupOption int

// ownStore gives a subtest a fresh store of its own rather than a test
// transaction, for what one transaction cannot show: InTx itself, a lock
// that makes another transaction wait, concurrent callers on several
// connections.
const ownStore setupOption = 1

// testBundle is what every subtest starts from: an empty store (or a
// transaction on one) holding two tenants, so that each test can check that
// the other tenant's objects stay out of reach.
type testBundle struct {
	ctx   context.Context
	store store.Store
	// tenant is where fixtures go; other is a second tenant for isolation
	// checks.
	tenant *model.Tenant
	other  *model.Tenant
	// now has nanoseconds and a zone other than UTC, so that round trips
	// check the store's truncation to microseconds and conversion to UTC.
	now time.Time
	// n numbers fixtures, to give them unique names.
	n int
}

func newBundle(t *testing.T, s store.Store) *testBundle {
	t.Helper()
	b := &testBundle{
		ctx:   t.Context(),
		store: s,
		now:   time.Date(2025, 3, 14, 15, 9, 26, 535897932, time.FixedZone("CET", 3600)),
	}
	b.tenant = b.createTenant(t, "acme")
	b.other = b.createTenant(t, "globex")
	return b
}

func (b *testBundle) createTenant(t *testing.T, name string) *model.Tenant {
	t.Helper()
	tn := &model.Tenant{ID: model.NewID(), Name: name, DisplayName: name + " Inc.", CreatedAt: b.now}
	must(t, b.store.CreateTenant(b.ctx, tn))
	return tn
}

// at returns b.now plus i minutes.
func (b *testBundle) at(i int) time.Time { return b.now.Add(time.Duration(i) * time.Minute) }

// name returns a fresh name with the given prefix.
func (b *testBundle) name(prefix string) string {
	b.n++
	return fmt.Sprintf("%s-%03d", prefix, b.n)
}

// norm is a time as the store gives it back: UTC, whole microseconds.
func norm(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

func normPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	v := norm(*t)
	return &v
}

func ptr[T any](v T) *T { return &v }

// must fails the test on an unexpected error.
func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
}

// wantErr checks that err is target (store.ErrNotFound or store.ErrConflict)
// and not the other one.
func wantErr(t *testing.T, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("got error %v, want %v", err, target)
	}
	for _, other := range []error{store.ErrNotFound, store.ErrConflict} {
		if other != target && errors.Is(err, other) {
			t.Fatalf("error %v is both %v and %v", err, target, other)
		}
	}
}

// checkEqual compares with reflect.DeepEqual and shows both sides as JSON,
// which prints pointed-to times instead of addresses.
func checkEqual[T any](t *testing.T, what string, got, want T) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s:\n got: %s\nwant: %s", what, show(got), show(want))
	}
}

func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%+v", v)
	}
	return string(b)
}

// checkTimeUTC checks that a time read back is in UTC, not merely equal.
func checkTimeUTC(t *testing.T, what string, got time.Time) {
	t.Helper()
	if got.Location() != time.UTC {
		t.Fatalf("%s is in %v, want UTC", what, got.Location())
	}
}

// checkNamePaging lists a set of named objects whole and page by page, and
// checks that the whole list is in name (byte) order and that pages of every
// size join up to it, without duplicates or gaps, ending in an empty page.
func checkNamePaging[T any](t *testing.T, want []string, list func(page store.Page) ([]T, error), name func(T) string) {
	t.Helper()
	sorted := append([]string(nil), want...)
	sort.Strings(sorted)
	all, err := list(store.Page{})
	must(t, err)
	checkEqual(t, "whole list", names(all, name), sorted)
	for _, limit := range []int{1, 2, 3, len(sorted), len(sorted) + 1} {
		var got []string
		after := ""
		for pages := 0; ; pages++ {
			if pages > len(sorted)+1 {
				t.Fatalf("limit %d: paging does not end", limit)
			}
			page, err := list(store.Page{After: after, Limit: limit})
			must(t, err)
			if len(page) > limit {
				t.Fatalf("limit %d: got a page of %d", limit, len(page))
			}
			if len(page) == 0 {
				break
			}
			got = append(got, names(page, name)...)
			after = name(page[len(page)-1])
		}
		checkEqual(t, fmt.Sprintf("pages of %d joined", limit), got, sorted)
	}
}

func names[T any](items []T, name func(T) string) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = name(it)
	}
	return out
}
