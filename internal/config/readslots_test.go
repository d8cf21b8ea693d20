package config

import (
	"strings"
	"testing"
)

// KLIQUE_GRAPHQL_READ_SLOTS bounds the GraphQL queries executing at once;
// unset it reads as 0 (the server's default, two per CPU), and a value out
// of bounds is refused naming the variable.
func TestGraphQLReadSlotsComeFromTheEnvironment(t *testing.T) {
	env := func(vars map[string]string) func(string) string {
		return func(k string) string { return vars[k] }
	}
	c, err := FromEnv(env(nil))
	if err != nil || c.GraphQLReadSlots != 0 {
		t.Fatalf("unset: %v, %d slots, want 0 (the default)", err, c.GraphQLReadSlots)
	}
	c, err = FromEnv(env(map[string]string{"KLIQUE_GRAPHQL_READ_SLOTS": "3"}))
	if err != nil || c.GraphQLReadSlots != 3 {
		t.Fatalf("KLIQUE_GRAPHQL_READ_SLOTS=3: %v, %d slots", err, c.GraphQLReadSlots)
	}
	for _, bad := range []string{"0", "-2", "many"} {
		_, err := FromEnv(env(map[string]string{"KLIQUE_GRAPHQL_READ_SLOTS": bad}))
		if err == nil || !strings.Contains(err.Error(), "KLIQUE_GRAPHQL_READ_SLOTS") {
			t.Errorf("KLIQUE_GRAPHQL_READ_SLOTS=%s: %v, want an error naming the variable", bad, err)
		}
	}
}
