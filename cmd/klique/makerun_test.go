package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMakeRunSaysItBuildsThenStartsAndWhere runs `make run` as the README
// says (with the binary and the data directory in a temporary directory)
// and reads what it prints: that it is building, which takes a minute or
// more the first time, then that it is starting, then the server's start
// line naming the dashboard, GraphQL, GraphiQL, /v1, /mcp and /metrics.
func TestMakeRunSaysItBuildsThenStartsAndWhere(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a server")
	}
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatalf("make is not installed: %v", err)
	}
	dir := t.TempDir()
	addr := freeAddr(t)
	cmd := exec.Command("make", "run", "BIN="+filepath.Join(dir, "klique"))
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "KLIQUE_LISTEN="+addr, "KLIQUE_DATA_DIR="+filepath.Join(dir, "data"), "KLIQUE_PUBLIC_URL=",
		"KLIQUE_DATABASE_URL=", "KLIQUE_BOOTSTRAP_TOKEN=", "KLIQUE_METRICS_LISTEN=", "KLIQUE_METRICS_TOKEN=", "KLIQUE_GATEWAY_LISTEN=")
	// make runs the server as its child: stop the whole process group.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
	})

	const started = "klique control plane serving"
	for !strings.Contains(out.String(), started) {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("make run ended (%v) before the server started:\n%s", err, out.String())
		case <-time.After(200 * time.Millisecond):
		}
	}
	text := out.String()
	building, starting, serving := strings.Index(text, "building "), strings.Index(text, "starting the control plane"), strings.Index(text, started)
	if building < 0 || starting < building || serving < starting {
		t.Fatalf("make run printed, in this order, building at %d, starting at %d, the start line at %d; want them in that order:\n%s",
			building, starting, serving, text)
	}
	if !strings.Contains(text[building:], "the first build takes a minute or more") {
		t.Errorf("make run does not say the first build takes a while:\n%s", text)
	}
	line := text[serving:]
	line, _, _ = strings.Cut(line, "\n")
	base := "http://" + addr
	for _, want := range []string{
		"dashboard=" + base + "/ ", "graphql=" + base + "/graphql ", "graphiql=" + base + "/graphiql ",
		"gateway=" + base + "/v1 ", "mcp=" + base + "/mcp ", `metrics="off (set KLIQUE_METRICS_LISTEN or KLIQUE_METRICS_TOKEN)"`,
	} {
		if !strings.Contains(line, want) {
			t.Errorf("the start line lacks %q:\n%s", want, line)
		}
	}
}
