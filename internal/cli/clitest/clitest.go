// Package clitest is what the tests of klique's client commands share: a
// control plane in the test's process to run them against, a CLI kept from
// the machine's sign-in, and command lines run in process through a root
// carrying the command groups under test.
package clitest

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/cli"
	"github.com/klique-ai/klique/internal/config"
	"github.com/klique-ai/klique/internal/server"
)

// StartControlPlane starts a control plane in this process on SQLite in a
// temporary directory, bootstrapped with key, for the CLI's tests to run
// against; options change its configuration (WithEngine runs the engine).
// The context it returns ends after timeout or with the test.
func StartControlPlane(t *testing.T, key string, timeout time.Duration, options ...func(*config.Config)) (context.Context, *server.App) {
	t.Helper()
	cfg := &config.Config{Listen: "127.0.0.1:0", DataDir: t.TempDir(), BootstrapToken: key, PublicURL: "http://127.0.0.1",
		TokenTTL: time.Hour, MaxBodyBytes: 1 << 20, LogFormat: "text", LogLevel: "error", ShutdownTimeout: 10 * time.Second}
	for _, o := range options {
		o(cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	app, err := server.Start(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = app.Shutdown(context.Background()) })
	return ctx, app
}

// WithEngine runs the compute policy engine in the control plane, a pass
// every 100 ms, so that work is placed.
func WithEngine(c *config.Config) { c.Engine, c.EngineInterval = true, 100*time.Millisecond }

// Isolate points the CLI at a configuration file that does not exist
// and at server (with key), so no test reads the machine's sign-in.
func Isolate(t *testing.T, server, key string) {
	t.Setenv("KLIQUE_CONFIG", filepath.Join(t.TempDir(), "none.json"))
	t.Setenv("KLIQUE_SERVER", server)
	t.Setenv("KLIQUE_API_KEY", key)
	t.Setenv("KLIQUE_TOKEN", "")
}

// Exec runs one klique command line in this process, through a root
// carrying groups, and returns its exit code, standard output and standard
// error.
func Exec(ctx context.Context, groups []cli.Group, args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := cli.Run(ctx, args, strings.NewReader(""), &out, &errOut, groups...)
	return code, out.String(), errOut.String()
}

// As isolates the CLI (Isolate) and gives a test it against server under
// any key: klique runs a command line as apiKey and returns its output,
// standard error and exit code; ok runs one that must succeed and returns
// its output.
func As(t *testing.T, ctx context.Context, server string, groups []cli.Group) (klique func(apiKey string, args ...string) (string, string, int), ok func(apiKey string, args ...string) string) {
	Isolate(t, server, "")
	klique = func(apiKey string, args ...string) (string, string, int) {
		t.Helper()
		t.Setenv("KLIQUE_API_KEY", apiKey)
		code, out, errOut := Exec(ctx, groups, args...)
		return out, errOut, code
	}
	ok = func(apiKey string, args ...string) string {
		t.Helper()
		out, errOut, code := klique(apiKey, args...)
		if code != 0 {
			t.Fatalf("klique %s: exit %d: %s", strings.Join(args, " "), code, errOut)
		}
		return out
	}
	return klique, ok
}
