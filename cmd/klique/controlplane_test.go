package main

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/config"
	"github.com/klique-ai/klique/internal/server"
)

// startControlPlane starts a control plane in this process on SQLite in a
// temporary directory, bootstrapped with key, for the CLI's tests to run
// against; options change its configuration (withEngine runs the engine). The context it returns ends after timeout or with the test.
func startControlPlane(t *testing.T, key string, timeout time.Duration, options ...func(*config.Config)) (context.Context, *server.App) {
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

// withEngine runs the compute policy engine in the control plane, a pass
// every 100 ms, so that work is placed.
func withEngine(c *config.Config) { c.Engine, c.EngineInterval = true, 100*time.Millisecond }
