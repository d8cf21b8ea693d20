package config

import (
	"strings"
	"testing"
)

func TestSubscriptionCapsComeFromTheEnvironment(t *testing.T) {
	env := func(vars map[string]string) func(string) string {
		return func(k string) string { return vars[k] }
	}
	c, err := FromEnv(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.SubscriptionsPerConnection != 0 || c.SubscriptionConnectionsPerUser != 0 {
		t.Fatalf("unset caps read as %d and %d, want 0 (the platform's defaults)", c.SubscriptionsPerConnection, c.SubscriptionConnectionsPerUser)
	}
	c, err = FromEnv(env(map[string]string{"KLIQUE_SUBSCRIPTIONS_PER_CONNECTION": "7", "KLIQUE_SUBSCRIPTION_CONNECTIONS_PER_USER": "3"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.SubscriptionsPerConnection != 7 || c.SubscriptionConnectionsPerUser != 3 {
		t.Fatalf("caps read as %d and %d, want 7 and 3", c.SubscriptionsPerConnection, c.SubscriptionConnectionsPerUser)
	}
	for _, bad := range []string{"0", "-1", "many", "100001"} {
		_, err := FromEnv(env(map[string]string{"KLIQUE_SUBSCRIPTIONS_PER_CONNECTION": bad}))
		if err == nil || !strings.Contains(err.Error(), "KLIQUE_SUBSCRIPTIONS_PER_CONNECTION") || !strings.Contains(err.Error(), "between 1 and 100000") {
			t.Errorf("KLIQUE_SUBSCRIPTIONS_PER_CONNECTION=%s: %v, want an error naming the variable and the range", bad, err)
		}
	}
}
