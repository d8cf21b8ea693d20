package server_test

import (
	"strings"
	"testing"
)

// A client that retries enqueueTask or cloneTask with the same key, as the
// input field or as the Idempotency-Key header, gets the first task back;
// the same key with another request is a CONFLICT.
func TestGraphQLIdempotencyKeys(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	f := newFixture(t, ts)
	const enqueue = `mutation($in: EnqueueTaskInput!) { enqueueTask(input: $in) { id } }`
	in := func(cmd string, key any) map[string]any {
		m := map[string]any{"name": "retried", "project": "fraud-models", "computeResource": "1 GPU", "command": []any{"python", cmd}}
		if key != nil {
			m["idempotencyKey"] = key
		}
		return map[string]any{"in": m}
	}
	count := func() int {
		d := ts.mustGQL(t, f.alice, `{ tasks(filter: {mine: true}, first: 100) { edges { node { id } } } }`, nil)
		edges, _ := path(d, "tasks", "edges").([]any)
		return len(edges)
	}

	t.Run("the input field", func(t *testing.T) {
		a := str(ts.mustGQL(t, f.alice, enqueue, in("a.py", "field-key")), "enqueueTask", "id")
		n := count()
		b := str(ts.mustGQL(t, f.alice, enqueue, in("a.py", "field-key")), "enqueueTask", "id")
		if a == "" || a != b || count() != n {
			t.Fatalf("a retry with the key: tasks %s and %s, %d tasks (were %d)", a, b, count(), n)
		}
		res := ts.gql(t, gqlRequest{Credential: f.alice, Query: enqueue, Vars: in("b.py", "field-key")})
		if res.code() != "CONFLICT" || !strings.Contains(res.Raw, "idempotency key 'field-key' was used for a different request") || count() != n {
			t.Fatalf("the key with another request: %s", res.Raw)
		}
		c := `mutation($id: ID!) { cloneTask(id: $id, parameterOverrides: {lr: "0.5"}, idempotencyKey: "clone-key") { id } }`
		c1 := str(ts.mustGQL(t, f.alice, c, map[string]any{"id": a}), "cloneTask", "id")
		c2 := str(ts.mustGQL(t, f.alice, c, map[string]any{"id": a}), "cloneTask", "id")
		if c1 == "" || c1 != c2 {
			t.Fatalf("a retried clone: %s and %s", c1, c2)
		}
	})

	t.Run("the Idempotency-Key header", func(t *testing.T) {
		send := func(cmd string) *gqlResult {
			return ts.gql(t, gqlRequest{Credential: f.alice, Query: enqueue, Vars: in(cmd, nil), Headers: map[string]string{"Idempotency-Key": "header-key"}})
		}
		first := send("h.py")
		n := count()
		again := send("h.py")
		if first.code() != "" || again.Raw != first.Raw || count() != n {
			t.Fatalf("a retry with the header: %s then %s", first.Raw, again.Raw)
		}
		if res := send("other.py"); res.code() != "CONFLICT" {
			t.Fatalf("the header with another request: %s", res.Raw)
		}
	})
}
