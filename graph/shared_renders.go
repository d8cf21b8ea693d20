package graph

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"weak"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
)

// ShareRenders wraps the executable schema so that an update published to
// many subscribers is rendered once for each distinct operation, not once
// for each subscriber.
//
// The platform builds one update per event and hands the same value to every
// subscriber allowed to see it (a subscriber that may see less gets a copy
// of its own). gqlgen executes a subscription's selection set for each
// subscriber: with thousands following one queue, executing the same
// selection over the same value thousands of times was most of what a
// fan-out cost, and what made the collector run. Here the first subscriber
// to render an update keeps the bytes, and every other subscriber whose
// operation (query text, operation name and variables) is the same gets
// them without executing anything.
//
// Sharing is safe only when the bytes depend on nothing but the update and
// the operation. So an operation shares only if its selection reaches no
// field resolver below the subscription field: resolvers run with the
// caller's identity (a task's owner, its reason), and such an operation is
// executed for each subscriber as before. Updates are told apart by their
// identity (a per-subscriber copy is another update), and a rendering with
// errors is never kept. What is kept for an update is dropped when the
// update itself is collected.
func ShareRenders(es graphql.ExecutableSchema) *SharedRenders {
	return &SharedRenders{
		ExecutableSchema: es,
		perCaller:        resolverFields(),
		byUpdate:         make(map[any]map[string]*rendering),
	}
}

// SharedRenders is the executable schema ShareRenders returns.
type SharedRenders struct {
	graphql.ExecutableSchema

	// perCaller holds the fields served by a resolver, as
	// "type.field" and "*.field" (for abstract types), normalised.
	perCaller map[string]bool

	mu sync.Mutex
	// byUpdate holds, per update (by a weak pointer to it), its
	// renderings by operation key.
	byUpdate map[any]map[string]*rendering

	rendered, shared atomic.Int64
}

// Stats says how many subscription updates were rendered by executing the
// selection (shared or not), and how many were sent as the bytes another
// subscriber's rendering left.
func (s *SharedRenders) Stats() (rendered, shared int64) {
	return s.rendered.Load(), s.shared.Load()
}

// Held says how many updates have renderings kept.
func (s *SharedRenders) Held() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byUpdate)
}

type streamKey struct{}

// stream is where a subscription resolver leaves its stream (see shared)
// for the response handler to read ahead of gqlgen's executor.
type stream struct {
	// next waits for the next update and says which it is (nil for an
	// update that cannot be shared); ok is false at the end of the stream.
	next func(ctx context.Context) (id any, ok bool)
	// render hands the update next read to gqlgen's executor.
	render func()
	// onCollect runs f once the update next read is garbage.
	onCollect func(f func())
	// end closes the executor's channel.
	end func()
}

// shared lets a subscription resolver's stream be shared: when the operation
// shares renders (ShareRenders left a slot in ctx), the updates are read by
// the response handler, and gqlgen's executor gets, on a channel of its
// own, only those it must render.
func shared[T any](ctx context.Context, ch <-chan *T, err error) (<-chan *T, error) {
	st, _ := ctx.Value(streamKey{}).(*stream)
	if err != nil || st == nil || ch == nil {
		return ch, err
	}
	feed := make(chan *T, 1)
	var cur *T
	st.next = func(ctx context.Context) (any, bool) {
		select {
		case v, ok := <-ch:
			if !ok {
				return nil, false
			}
			cur = v
			if v == nil {
				return nil, true
			}
			return weak.Make(v), true
		case <-ctx.Done():
			return nil, false
		}
	}
	st.render = func() { feed <- cur }
	st.onCollect = func(f func()) { runtime.AddCleanup(cur, func(f func()) { f() }, f) }
	var ended bool
	st.end = func() {
		if !ended {
			ended = true
			close(feed)
		}
	}
	return feed, nil
}

// Exec serves queries and mutations as the wrapped schema does, and
// subscriptions whose renders may be shared through the shared stream.
func (s *SharedRenders) Exec(ctx context.Context) graphql.ResponseHandler {
	oc := graphql.GetOperationContext(ctx)
	if oc == nil || oc.Operation == nil || oc.Operation.Operation != ast.Subscription {
		return s.ExecutableSchema.Exec(ctx)
	}
	vars, err := json.Marshal(oc.Variables)
	if err != nil || !s.callerFree(oc.Operation.SelectionSet, true) {
		// Executed for each subscriber, as gqlgen does.
		inner := s.ExecutableSchema.Exec(ctx)
		return func(ctx context.Context) *graphql.Response {
			return s.count(inner(ctx))
		}
	}
	key := oc.RawQuery + "\x00" + oc.OperationName + "\x00" + string(vars)
	st := &stream{}
	inner := s.ExecutableSchema.Exec(context.WithValue(ctx, streamKey{}, st))
	if st.next == nil {
		// Refused (the response says why), or a stream that is not shared.
		return inner
	}
	return func(ctx context.Context) *graphql.Response {
		id, ok := st.next(ctx)
		if !ok {
			st.end()
			return inner(ctx)
		}
		if id == nil {
			return s.render(ctx, st, inner, nil)
		}
		b, mine := s.claim(id, key, st)
		if b != nil {
			s.shared.Add(1)
			return &graphql.Response{Data: b}
		}
		return s.render(ctx, st, inner, mine)
	}
}

// render has gqlgen's executor render the update the stream last read and,
// when the rendering is this subscriber's to share, keeps the bytes for the
// others (never a rendering with errors).
func (s *SharedRenders) render(ctx context.Context, st *stream, inner graphql.ResponseHandler, mine *rendering) (resp *graphql.Response) {
	if mine != nil {
		defer func() {
			if resp != nil && len(resp.Errors) == 0 && len(graphql.GetErrors(ctx)) == 0 && len(resp.Data) > 0 {
				mine.data = bytes.Clone(resp.Data)
			}
			close(mine.done)
		}()
	}
	st.render()
	return s.count(inner(ctx))
}

// count counts an update rendered by executing the selection.
func (s *SharedRenders) count(resp *graphql.Response) *graphql.Response {
	if resp != nil && len(resp.Data) > 0 {
		s.rendered.Add(1)
	}
	return resp
}

// rendering is one update rendered for one operation key: done closes
// when the first subscriber to need it has rendered it (data is nil if that
// failed or was refused, and each subscriber then renders its own).
type rendering struct {
	done chan struct{}
	data []byte
}

// claim returns the bytes kept for the update and key, waiting if another
// subscriber is rendering them; or, when nobody has, marks the rendering
// as this subscriber's to do and returns it.
func (s *SharedRenders) claim(id any, key string, st *stream) (json.RawMessage, *rendering) {
	s.mu.Lock()
	m, ok := s.byUpdate[id]
	if !ok {
		m = make(map[string]*rendering, 1)
		s.byUpdate[id] = m
		st.onCollect(func() { s.forget(id) })
	}
	r, ok := m[key]
	if !ok {
		r = &rendering{done: make(chan struct{})}
		m[key] = r
		s.mu.Unlock()
		return nil, r
	}
	s.mu.Unlock()
	<-r.done // a rendering takes microseconds and never waits on the network
	return r.data, nil
}

func (s *SharedRenders) forget(id any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byUpdate, id)
}

// callerFree reports whether a selection set reaches no field resolver
// (below the root, whose subscription fields all are resolvers).
func (s *SharedRenders) callerFree(set ast.SelectionSet, root bool) bool {
	for _, sel := range set {
		switch sel := sel.(type) {
		case *ast.Field:
			if !root && s.resolved(sel) {
				return false
			}
			if !s.callerFree(sel.SelectionSet, false) {
				return false
			}
		case *ast.InlineFragment:
			if !s.callerFree(sel.SelectionSet, root) {
				return false
			}
		case *ast.FragmentSpread:
			if sel.Definition == nil || !s.callerFree(sel.Definition.SelectionSet, root) {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// resolved reports whether a field may be served by a resolver: of its type
// when that is an object, of any type when an interface or union.
func (s *SharedRenders) resolved(f *ast.Field) bool {
	if strings.HasPrefix(f.Name, "__") {
		return false
	}
	if f.ObjectDefinition == nil {
		return true
	}
	if f.ObjectDefinition.Kind == ast.Object {
		return s.perCaller[normName(f.ObjectDefinition.Name)+"."+normName(f.Name)]
	}
	return s.perCaller["*."+normName(f.Name)]
}

// resolverFields lists the fields gqlgen serves through a resolver (the
// methods of ResolverRoot's resolvers), so that the list cannot fall
// behind the schema.
func resolverFields() map[string]bool {
	out := map[string]bool{}
	root := reflect.TypeFor[ResolverRoot]()
	for i := range root.NumMethod() {
		m := root.Method(i)
		r := m.Type.Out(0)
		for j := range r.NumMethod() {
			f := normName(r.Method(j).Name)
			out[normName(m.Name)+"."+f] = true
			out["*."+f] = true
		}
	}
	return out
}

// normName folds a GraphQL or Go name to compare the two: gqlgen names
// field "gpuHours" GpuHours or GPUHours, and drops underscores.
func normName(s string) string {
	return strings.ToLower(strings.ReplaceAll(s, "_", ""))
}
