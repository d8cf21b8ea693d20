package graph

import (
	"context"
	"reflect"
	"testing"

	"github.com/vektah/gqlparser/v2"
)

// The list of fields served per caller is read from ResolverRoot and
// matched to the schema by folded names: every resolver must find its
// field, or an operation selecting it could be shared by mistake.
func TestEveryResolverFindsItsSchemaField(t *testing.T) {
	schema := NewExecutableSchema(Config{}).Schema()
	types := map[string]string{}
	for name := range schema.Types {
		types[normName(name)] = name
	}
	root := reflect.TypeFor[ResolverRoot]()
	for i := range root.NumMethod() {
		m := root.Method(i)
		name, ok := types[normName(m.Name)]
		if !ok {
			t.Errorf("resolver %s names no schema type", m.Name)
			continue
		}
		def := schema.Types[name]
		fields := map[string]bool{}
		for _, f := range def.Fields {
			fields[normName(f.Name)] = true
		}
		r := m.Type.Out(0)
		for j := range r.NumMethod() {
			if !fields[normName(r.Method(j).Name)] {
				t.Errorf("%s resolver method %s matches no field of %s", m.Name, r.Method(j).Name, name)
			}
		}
	}
	s := ShareRenders(NewExecutableSchema(Config{}))
	if !s.perCaller["task.reason"] || !s.perCaller["task.owner"] || s.perCaller["task.status"] {
		t.Errorf("Task's resolver fields read wrong: reason %v, owner %v, status %v (want true, true, false)",
			s.perCaller["task.reason"], s.perCaller["task.owner"], s.perCaller["task.status"])
	}
}

func TestAnOperationSharesOnlyWhatNoResolverServes(t *testing.T) {
	s := ShareRenders(NewExecutableSchema(Config{}))
	for _, c := range []struct {
		query string
		share bool
	}{
		{`subscription { queueChanged(computeResource: "q") { kind at } }`, true},
		{`subscription { queueChanged(computeResource: "q") { __typename kind missed waiting { position reason task { id status } } running { id name } } }`, true},
		{`subscription($x: Boolean!) { queueChanged(computeResource: "q") { kind task @include(if: $x) { id } } }`, true},
		{`subscription { queueChanged(computeResource: "q") { task { id reason } } }`, false},
		{`subscription { queueChanged(computeResource: "q") { running { owner { name } } } }`, false},
		{`subscription { queueChanged(computeResource: "q") { ...F } } fragment F on QueueUpdate { task { position } }`, false},
		{`subscription { queueChanged(computeResource: "q") { ... on QueueUpdate { task { project { name } } } } }`, false},
		{`subscription { queueChanged(computeResource: "q") { ...F } } fragment F on QueueUpdate { kind task { id } }`, true},
	} {
		doc, err := gqlparser.LoadQueryWithRules(s.Schema(), c.query, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.query, err)
		}
		if got := s.callerFree(doc.Operations[0].SelectionSet, true); got != c.share {
			t.Errorf("%s: shares %v, want %v", c.query, got, c.share)
		}
	}
}

// The shared stream passes every update on, a nil one unshared, and ends
// once however often it is told to.
func TestASharedStreamPassesEveryUpdateOn(t *testing.T) {
	type update struct{ n int }
	st := &stream{}
	ctx := context.WithValue(context.Background(), streamKey{}, st)
	src := make(chan *update, 3)
	feed, err := shared(ctx, (<-chan *update)(src), nil)
	if err != nil || st.next == nil {
		t.Fatalf("shared did not take the stream: %v", err)
	}
	a := &update{1}
	src <- a
	src <- nil
	src <- a
	close(src)
	var ids []any
	for {
		id, ok := st.next(ctx)
		if !ok {
			break
		}
		ids = append(ids, id)
		st.render()
		if got := <-feed; (id == nil) != (got == nil) {
			t.Fatalf("update %d: the executor got %v for id %v", len(ids), got, id)
		}
	}
	if len(ids) != 3 || ids[0] == nil || ids[1] != nil || ids[0] != ids[2] {
		t.Fatalf("ids %v: want the same id for the same update, nil for the nil one", ids)
	}
	st.end()
	st.end()
	if _, open := <-feed; open {
		t.Fatal("the executor's channel is open after the end")
	}
	// Without a slot (an operation that does not share), the stream is
	// gqlgen's as it came.
	own := make(chan *update)
	if got, _ := shared(context.Background(), (<-chan *update)(own), nil); got != (<-chan *update)(own) {
		t.Fatal("a stream was taken without a slot")
	}
}
