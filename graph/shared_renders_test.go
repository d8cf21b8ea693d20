package graph

import (
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
