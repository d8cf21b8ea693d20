package estatecmd

import (
	"context"
	"io"
	"testing"

	"github.com/klique-ai/klique/internal/cli"
	"github.com/klique-ai/klique/internal/cli/clitest"
	"github.com/klique-ai/klique/internal/cli/logincmd"
	"github.com/klique-ai/klique/internal/cli/taskcmd"
)

// testGroups are the client command groups, as the binary registers them.
var testGroups = []cli.Group{logincmd.Commands, Commands, taskcmd.Commands}

// run executes one command line through a root carrying testGroups.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return cli.Run(ctx, args, stdin, stdout, stderr, testGroups...)
}

// misuse runs one klique command line in this process and returns its
// exit code, standard output and standard error.
func misuse(ctx context.Context, args ...string) (int, string, string) {
	return clitest.Exec(ctx, testGroups, args...)
}

// cliAs gives a test the client commands against server under any key (clitest.As).
func cliAs(t *testing.T, ctx context.Context, server string) (klique func(apiKey string, args ...string) (string, string, int), ok func(apiKey string, args ...string) string) {
	return clitest.As(t, ctx, server, testGroups)
}

var (
	isolateCLI        = clitest.Isolate
	startControlPlane = clitest.StartControlPlane
)
