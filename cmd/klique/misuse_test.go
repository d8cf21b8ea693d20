package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/cli"
)

// A mistyped command, subcommand, flag or word is answered with the
// nearest one the CLI knows, and exits with the usage code.
func TestATypoIsAnsweredWithTheNearestCommandOrFlag(t *testing.T) {
	isolateCLI(t, "http://127.0.0.1:1", "")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"enqeue", "--resource", "1 GPU"}, `unknown command "enqeue" for "klique"; did you mean enqueue?`},
		{[]string{"creat", "user", "bob"}, `did you mean create?`},
		{[]string{"create", "usr", "bob", "--group", "vision"}, `unknown command "usr" for "klique create"; did you mean user?`},
		{[]string{"create", "tsk"}, `unknown command "tsk" for "klique create"; did you mean task?`},
		{[]string{"task", "lgos", "x"}, `did you mean logs?`},
		{[]string{"enqueue", "--resouce", "1 GPU", "--", "true"}, `unknown flag --resouce for "klique enqueue"; did you mean --resource?`},
		{[]string{"get", "tasks", "--mnie"}, `unknown flag --mnie for "klique get"; did you mean --mine?`},
		{[]string{"login", "--key-fil", "admin.token"}, `did you mean --key-file?`},
		{[]string{"get", "pools", "--sever", "http://x"}, `did you mean --server?`},
		{[]string{"get", "workrs"}, `did you mean workers?`},
		{[]string{"engine", "disabel"}, `did you mean disable?`},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			code, out, errOut := misuse(context.Background(), c.args...)
			if code != cli.ExitUsage || !strings.Contains(errOut, c.want) {
				t.Errorf("exit %d, printed:\n%s%s\nwant exit %d and %q", code, out, errOut, cli.ExitUsage, c.want)
			}
		})
	}
}

// Every mistake on the command line exits 2, whichever layer finds it, and
// a refusal by the server exits 1; the root help says so.
func TestMistakesOnTheCommandLineExitWithTheUsageCode(t *testing.T) {
	const key = "klique-misuse-test-bootstrap-key-0123456789abcdefgh"
	ctx, app := startControlPlane(t, key, 60*time.Second)
	isolateCLI(t, app.URL(), key)

	for _, args := range [][]string{
		{"abort"},            // a missing argument
		{"version", "extra"}, // an extra one
		{"create", "tsk"},    // an unknown subcommand: cobra showed the help and exited 0
		{"nosuchcommand"},    // an unknown command: cobra's plain error exited 1
		{"get"},              // no kind
		{"get", "tasks", "--mine=perhaps"},
		{"enqueue", "--resource", "1 GPU", "--wait", "soon", "--", "true"},
		{"enqueue", "--resource", "1 GPU", "--param", "lr", "--", "true"},
	} {
		if code, out, errOut := misuse(ctx, args...); code != cli.ExitUsage {
			t.Errorf("klique %s: exit %d, want %d (a usage error); printed:\n%s%s", strings.Join(args, " "), code, cli.ExitUsage, out, errOut)
		}
	}
	if code, _, errOut := misuse(ctx, "get", "task", "no-such-task"); code != cli.ExitFailed {
		t.Errorf("klique get task no-such-task: exit %d, want %d (the server refused); printed:\n%s", code, cli.ExitFailed, errOut)
	}
	_, help, _ := misuse(ctx, "--help")
	if !strings.Contains(help, "Exit status: 0 on success; 1 when the server refused or failed") ||
		!strings.Contains(help, "2 when the command line is wrong") {
		t.Errorf("klique --help does not document the exit codes:\n%s", help)
	}
}
