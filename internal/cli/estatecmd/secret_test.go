package estatecmd

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// 'klique secret' set, list and delete one vault's secret, each naming
// the vault with its own --project; naming no vault, or two, is a usage
// error that says which flags to give, and a value never reaches the
// output.
func TestSecretCommandsNameOneVault(t *testing.T) {
	const key = "klique-secret-test-bootstrap-key-0123456789abcdefghij"
	ctx, app := startControlPlane(t, key, 120*time.Second)
	_, ok := cliAs(t, ctx, app.URL())
	ok(key, "apply", "-f", "../../../examples/estate.yaml")

	var out, errOut bytes.Buffer
	if code := run(ctx, []string{"secret", "set", "HF_TOKEN", "--project", "fraud-models"}, strings.NewReader("hf-value-1234\n"), &out, &errOut); code != 0 {
		t.Fatalf("secret set: exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), "set secret HF_TOKEN in the vault of project") {
		t.Fatalf("secret set said: %s", out.String())
	}
	list := ok(key, "secret", "list", "--project", "fraud-models")
	if !strings.Contains(list, "HF_TOKEN") || strings.Contains(list, "hf-value-1234") {
		t.Fatalf("secret list shows the name and never the value:\n%s", list)
	}
	for _, args := range [][]string{
		{"secret", "list"},
		{"secret", "list", "--project", "fraud-models", "--tenant"},
		{"secret", "delete", "HF_TOKEN"},
	} {
		code, _, stderr := misuse(ctx, args...)
		if code == 0 || !strings.Contains(stderr, "exactly one of --project P, --group G or --tenant") {
			t.Fatalf("klique %s: exit %d: %s", strings.Join(args, " "), code, stderr)
		}
	}
	if out := ok(key, "secret", "delete", "HF_TOKEN", "--project", "fraud-models"); !strings.Contains(out, "deleted secret HF_TOKEN") {
		t.Fatalf("secret delete said: %s", out)
	}
	if list := ok(key, "secret", "list", "--project", "fraud-models"); strings.Contains(list, "HF_TOKEN") {
		t.Fatalf("the deleted secret is still listed:\n%s", list)
	}
}
