package mcp_test

import (
	"strings"
	"testing"
)

// An agent that calls enqueue_task or clone_task again with the same
// idempotency key (its first call timed out) gets the first task back; the
// same key with other arguments is refused.
func TestToolsTakeAnIdempotencyKey(t *testing.T) {
	t.Parallel()
	b := sqliteBundle(t)
	alice := b.client(t, "alice")
	args := map[string]any{"name": "train", "project": "fraud-models", "computeResource": "1 GPU",
		"command": []string{"python", "train.py"}, "idempotencyKey": "agent-call-1"}
	first := ok[task](t, alice, "enqueue_task", args)
	again := ok[task](t, alice, "enqueue_task", args)
	if first.ID == "" || again.ID != first.ID {
		t.Fatalf("a retried enqueue_task made task %s, the first %s", again.ID, first.ID)
	}
	args["command"] = []string{"python", "other.py"}
	if msg := refused(t, alice, "enqueue_task", args); !strings.Contains(msg, "idempotency key") || !strings.Contains(msg, "different request") {
		t.Fatalf("the key with other arguments: %s", msg)
	}
	clone := map[string]any{"id": first.ID, "parameterOverrides": map[string]string{"lr": "0.01"}, "idempotencyKey": "agent-clone-1"}
	c1 := ok[task](t, alice, "clone_task", clone)
	c2 := ok[task](t, alice, "clone_task", clone)
	if c1.ID == first.ID || c2.ID != c1.ID {
		t.Fatalf("a retried clone_task made task %s, the first %s", c2.ID, c1.ID)
	}
}
