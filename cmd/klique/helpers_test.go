package main

import (
	"context"
	"testing"

	"github.com/klique-ai/klique/internal/cli/clitest"
)

// misuse runs one klique command line in this process and returns its
// exit code, standard output and standard error.
func misuse(ctx context.Context, args ...string) (int, string, string) {
	return clitest.Exec(ctx, groups, args...)
}

// cliAs gives a test the whole binary against server under any key (clitest.As).
func cliAs(t *testing.T, ctx context.Context, server string) (klique func(apiKey string, args ...string) (string, string, int), ok func(apiKey string, args ...string) string) {
	return clitest.As(t, ctx, server, groups)
}

var (
	isolateCLI        = clitest.Isolate
	startControlPlane = clitest.StartControlPlane
	withEngine        = clitest.WithEngine
)
