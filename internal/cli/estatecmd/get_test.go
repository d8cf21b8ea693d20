package estatecmd

import (
	"context"
	"strings"
	"testing"

	"github.com/klique-ai/klique/internal/cli"
)

// `klique get` names workers among its kinds, in its help and in the error
// for an unknown kind: both come from the one list of kinds.
func TestGetListsWorkersAmongItsKinds(t *testing.T) {
	isolateCLI(t, "http://127.0.0.1:1", "")
	_, help, _ := misuse(context.Background(), "get", "--help")
	_, rootHelp, _ := misuse(context.Background(), "--help")
	code, _, errOut := misuse(context.Background(), "get", "gizmos")
	if code != cli.ExitUsage {
		t.Errorf("get gizmos: exit %d, want %d", code, cli.ExitUsage)
	}
	for _, k := range kinds {
		if !strings.Contains(help, k.names[0]) {
			t.Errorf("klique get --help does not list %s:\n%s", k.names[0], help)
		}
		if !strings.Contains(rootHelp, k.names[0]) {
			t.Errorf("klique --help does not list %s among get's kinds:\n%s", k.names[0], rootHelp)
		}
		if !strings.Contains(errOut, k.names[0]) {
			t.Errorf("the error for an unknown kind does not list %s:\n%s", k.names[0], errOut)
		}
	}
	if !strings.Contains(help, "workers") || !strings.Contains(errOut, "workers") {
		t.Errorf("workers missing from get's help or error:\n%s\n%s", help, errOut)
	}
}
