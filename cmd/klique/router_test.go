package main

import (
	"context"
	"strings"
	"testing"

	"github.com/klique-ai/klique/internal/cli"
)

// TestRouterCommandRefusesABadCommandLine: `klique router` without a
// control plane, with one that is not a URL, or with a cache TTL out of
// range exits with the usage code and says what to change, and listens
// on nothing.
func TestRouterCommandRefusesABadCommandLine(t *testing.T) {
	t.Setenv("KLIQUE_ROUTER_CONTROL_PLANE", "")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"router"}, "--control-plane URL"},
		{[]string{"router", "--control-plane", "klique.corp"}, "is not an http(s) URL"},
		{[]string{"router", "--control-plane", "http://klique.corp"}, "must use https"},
		{[]string{"router", "--control-plane", "https://klique.corp", "--cache-ttl", "10m"}, "--cache-ttl 10m0s: give a duration from 1s to 1m"},
	} {
		code, out, errOut := misuse(context.Background(), c.args...)
		if code != cli.ExitUsage || !strings.Contains(errOut, c.want) {
			t.Errorf("klique %s: exit %d, want %d saying %q; printed:\n%s%s", strings.Join(c.args, " "), code, cli.ExitUsage, c.want, out, errOut)
		}
	}
}
