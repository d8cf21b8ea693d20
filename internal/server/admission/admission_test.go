package admission

import (
	"context"
	"testing"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/klique-ai/klique/internal/eventually"
)

// operation runs one operation of kind op through a's middleware in its own
// goroutine: started is closed when its body starts, and the body returns
// once release is closed. done receives its response.
func operation(ctx context.Context, a *Reads, op ast.Operation, release <-chan struct{}) (started chan struct{}, done chan *graphql.Response) {
	started, done = make(chan struct{}), make(chan *graphql.Response, 1)
	ctx = graphql.WithOperationContext(ctx, &graphql.OperationContext{Operation: &ast.OperationDefinition{Operation: op}})
	go func() {
		h := a.Middleware(ctx, func(ctx context.Context) graphql.ResponseHandler {
			return func(ctx context.Context) *graphql.Response {
				close(started)
				<-release
				return &graphql.Response{}
			}
		})
		done <- h(ctx)
	}()
	return started, done
}

func wait[T any](t *testing.T, c <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not happen", what)
	}
	var zero T
	return zero
}

// TestWritesGoAheadOfReads: with every read slot taken, a further query
// waits for one, while a mutation runs at once; the waiting query runs as
// soon as a slot is freed, and one whose client leaves while it waits gets
// CANCELLED without running.
func TestWritesGoAheadOfReads(t *testing.T) {
	a := New(1)
	ctx := context.Background()
	first := make(chan struct{})
	started1, done1 := operation(ctx, a, ast.Query, first)
	wait(t, started1, "the first query's start")

	second := make(chan struct{})
	close(second)
	started2, done2 := operation(ctx, a, ast.Query, second)
	eventually.True(t, "the second query waits for a slot", func() bool { return a.waiting.Load() == 1 })

	write := make(chan struct{})
	close(write)
	startedW, doneW := operation(ctx, a, ast.Mutation, write)
	wait(t, startedW, "the mutation's start while every read slot is taken")
	wait(t, doneW, "the mutation's response")
	sub := make(chan struct{})
	close(sub)
	startedS, _ := operation(ctx, a, ast.Subscription, sub)
	wait(t, startedS, "a subscription's update while every read slot is taken")

	gone, leave := context.WithCancel(ctx)
	never := make(chan struct{})
	startedGone, doneGone := operation(gone, a, ast.Query, never)
	eventually.True(t, "a third query waits too", func() bool { return a.waiting.Load() == 2 })
	leave()
	resp := wait(t, doneGone, "the answer of the query whose client left")
	if len(resp.Errors) != 1 || resp.Errors[0].Extensions["code"] != "CANCELLED" {
		t.Fatalf("a query whose client left while waiting answered %+v, want one CANCELLED error", resp.Errors)
	}
	select {
	case <-startedGone:
		t.Fatal("a query whose client left while waiting ran")
	default:
	}

	select {
	case <-started2:
		t.Fatal("the second query ran while the only read slot was taken")
	default:
	}
	close(first)
	wait(t, done1, "the first query's response")
	wait(t, started2, "the second query's start once the slot was freed")
	wait(t, done2, "the second query's response")
	if n := len(a.slots); n != 0 {
		t.Fatalf("%d read slots are still held after every query answered", n)
	}
	if n := a.waiting.Load(); n != 0 {
		t.Fatalf("%d queries are counted as waiting after every query answered", n)
	}
}

// TestAQueryWhoseResponseIsNeverAskedForFreesItsSlot: a transport that
// drops a query's handler without calling it frees the slot when the
// request ends.
func TestAQueryWhoseResponseIsNeverAskedForFreesItsSlot(t *testing.T) {
	a := New(1)
	ctx, end := context.WithCancel(context.Background())
	ctx = graphql.WithOperationContext(ctx, &graphql.OperationContext{Operation: &ast.OperationDefinition{Operation: ast.Query}})
	_ = a.Middleware(ctx, func(context.Context) graphql.ResponseHandler { return graphql.OneShot(&graphql.Response{}) })
	if len(a.slots) != 1 {
		t.Fatalf("the query holds %d slots before its response, want 1", len(a.slots))
	}
	end()
	eventually.True(t, "the slot is freed when the request ends", func() bool { return len(a.slots) == 0 })
}
