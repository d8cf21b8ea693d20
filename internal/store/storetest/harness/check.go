package harness

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/store"
)

// Norm is a time as the store gives it back: UTC, whole microseconds.
func Norm(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// NormPtr is Norm of a time that may be nil.
func NormPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	v := Norm(*t)
	return &v
}

// Ptr returns a pointer to a copy of v.
func Ptr[T any](v T) *T { return &v }

// Must fails the test on an unexpected error.
func Must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
}

// WantErr checks that err is target (store.ErrNotFound or store.ErrConflict)
// and not the other one.
func WantErr(t *testing.T, err, target error) {
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

// CheckEqual compares with reflect.DeepEqual and shows both sides as JSON,
// which prints pointed-to times instead of addresses.
func CheckEqual[T any](t *testing.T, what string, got, want T) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s:\n got: %s\nwant: %s", what, Show(got), Show(want))
	}
}

// Show prints v as JSON, or with %+v when it cannot be marshalled.
func Show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%+v", v)
	}
	return string(b)
}

// CheckTimeUTC checks that a time read back is in UTC, not merely equal.
func CheckTimeUTC(t *testing.T, what string, got time.Time) {
	t.Helper()
	if got.Location() != time.UTC {
		t.Fatalf("%s is in %v, want UTC", what, got.Location())
	}
}

// CheckNamePaging lists a set of named objects whole and page by page, and
// checks that the whole list is in name (byte) order and that pages of every
// size join up to it, without duplicates or gaps, ending in an empty page.
func CheckNamePaging[T any](t *testing.T, want []string, list func(page store.Page) ([]T, error), name func(T) string) {
	t.Helper()
	sorted := append([]string(nil), want...)
	sort.Strings(sorted)
	all, err := list(store.Page{})
	Must(t, err)
	CheckEqual(t, "whole list", Names(all, name), sorted)
	for _, limit := range []int{1, 2, 3, len(sorted), len(sorted) + 1} {
		var got []string
		after := ""
		for pages := 0; ; pages++ {
			if pages > len(sorted)+1 {
				t.Fatalf("limit %d: paging does not end", limit)
			}
			page, err := list(store.Page{After: after, Limit: limit})
			Must(t, err)
			if len(page) > limit {
				t.Fatalf("limit %d: got a page of %d", limit, len(page))
			}
			if len(page) == 0 {
				break
			}
			got = append(got, Names(page, name)...)
			after = name(page[len(page)-1])
		}
		CheckEqual(t, fmt.Sprintf("pages of %d joined", limit), got, sorted)
	}
}

// Names maps items to their names (or IDs), in order.
func Names[T any](items []T, name func(T) string) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = name(it)
	}
	return out
}
