package graph

import (
	"context"
	"sync"

	"github.com/99designs/gqlgen/graphql"
)

// listWorkers is how many goroutines marshal one list's elements.
const listWorkers = 4

// marshalList stands in for gqlgen's graphql.MarshalSliceConcurrently in
// the generated code, with the same arguments (`make generate` renames the
// calls). gqlgen starts a goroutine for every element of a list, whatever
// exec.worker_limit says (that only bounds how many run at once): a page of
// 50 tasks was 50 goroutines, and growing their stacks was a sixth of a
// list's CPU. Here at most listWorkers goroutines share the elements, each
// taking every listWorkers-th one in turn, so resolvers that wait on the
// store still overlap, and a list costs a few goroutines, not one per
// element. A panicking element is null with its error, as gqlgen has it.
func marshalList(ctx context.Context, length int, workerLimit int64, omitPanicHandler bool, marshalElement func(ctx context.Context, i int) graphql.Marshaler) graphql.Array {
	ret := make(graphql.Array, length)
	workers := listWorkers
	if workerLimit > 0 && workerLimit < int64(workers) {
		workers = int(workerLimit)
	}
	workers = min(workers, length)
	one := func(i int) {
		fc := &graphql.FieldContext{Index: &i}
		childCtx := graphql.WithFieldContext(ctx, fc)
		if !omitPanicHandler {
			defer func() {
				if r := recover(); r != nil {
					graphql.AddError(childCtx, graphql.Recover(childCtx, r))
					ret[i] = graphql.Null
				}
			}()
		}
		ret[i] = marshalElement(childCtx, i)
	}
	if workers <= 1 {
		for i := range length {
			one(i)
		}
		return ret
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < length; i += workers {
				one(i)
			}
		}()
	}
	wg.Wait()
	return ret
}
