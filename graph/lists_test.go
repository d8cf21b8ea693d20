package graph

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/99designs/gqlgen/graphql"
)

// TestMarshalListKeepsOrderAndBoundsItsGoroutines: every element is
// marshalled once, at its own index with its own field context, by at most
// listWorkers goroutines at once; a panicking element is null with an
// error, the others are kept.
func TestMarshalListKeepsOrderAndBoundsItsGoroutines(t *testing.T) {
	ctx := graphql.WithResponseContext(context.Background(), graphql.DefaultErrorPresenter, func(_ context.Context, err any) error {
		return fmt.Errorf("recovered: %v", err)
	})
	for _, n := range []int{0, 1, 2, 3, 4, 5, 50, 101} {
		var running, most atomic.Int32
		ret := marshalList(ctx, n, 0, false, func(ctx context.Context, i int) graphql.Marshaler {
			now := running.Add(1)
			defer running.Add(-1)
			for {
				m := most.Load()
				if now <= m || most.CompareAndSwap(m, now) {
					break
				}
			}
			if got := *graphql.GetFieldContext(ctx).Index; got != i {
				t.Errorf("element %d marshalled with index %d", i, got)
			}
			if i == 3 {
				panic("element 3 fails")
			}
			return graphql.MarshalInt(i)
		})
		if len(ret) != n {
			t.Fatalf("%d elements gave %d", n, len(ret))
		}
		for i, m := range ret {
			var b strings.Builder
			m.MarshalGQL(&b)
			want := strconv.Itoa(i)
			if i == 3 {
				want = "null"
			}
			if b.String() != want {
				t.Fatalf("%d elements: element %d is %s, want %s", n, i, b.String(), want)
			}
		}
		if most.Load() > listWorkers {
			t.Fatalf("%d elements: %d marshalled at once, want at most %d", n, most.Load(), listWorkers)
		}
	}
	if errs := graphql.GetErrors(ctx); len(errs) == 0 || errs[0].Message != "recovered: element 3 fails" {
		t.Fatalf("a panicking element left errors %v", errs)
	}
}

// TestGeneratedCodeMarshalsListsWithMarshalList: `make generate` renames
// gqlgen's per-element goroutines to marshalList; a regeneration without
// that step fails here.
func TestGeneratedCodeMarshalsListsWithMarshalList(t *testing.T) {
	src, err := os.ReadFile("generated.go")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(src), "graphql.MarshalSliceConcurrently(") {
		t.Fatal("graph/generated.go calls graphql.MarshalSliceConcurrently: regenerate with `make generate`, which renames the calls to marshalList")
	}
	if !strings.Contains(string(src), "marshalList(") {
		t.Fatal("graph/generated.go marshals no list with marshalList")
	}
}
