package gateway_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// agentBinary finds a coding agent's command (claude, codex) for the tests
// that run it: in $KLIQUE_TEST_AGENTS_DIR, where .ci/agents-claude.sh and
// .ci/agents-codex.sh install them (/tmp/agents when it is not set), else
// on the PATH. With -short it skips. Under CI=true a missing agent fails the
// test; elsewhere it skips, saying how to install it.
func agentBinary(t *testing.T, command, script string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("runs " + command + "; skipped with -short")
	}
	dir := os.Getenv("KLIQUE_TEST_AGENTS_DIR")
	if dir == "" {
		dir = "/tmp/agents"
	}
	if bin := filepath.Join(dir, "node_modules", ".bin", command); isFile(bin) {
		return bin
	}
	if bin, err := exec.LookPath(command); err == nil {
		return bin
	}
	how := command + " is not installed in " + dir + " or on the PATH: run `eval \"$(bash .ci/" + script + ")\"`"
	if os.Getenv("CI") == "true" {
		t.Fatal(how)
	}
	t.Skip(how)
	return ""
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}
