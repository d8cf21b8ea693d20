package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// misuse runs one klique command line in this process and returns its
// exit code, standard output and standard error.
func misuse(ctx context.Context, args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := run(ctx, args, strings.NewReader(""), &out, &errOut)
	return code, out.String(), errOut.String()
}

// cliAs isolates the CLI (isolateCLI) and gives a test it against server
// under any key: klique runs a command line as apiKey and returns its
// output, standard error and exit code; ok runs one that must succeed and
// returns its output.
func cliAs(t *testing.T, ctx context.Context, server string) (klique func(apiKey string, args ...string) (string, string, int), ok func(apiKey string, args ...string) string) {
	isolateCLI(t, server, "")
	klique = func(apiKey string, args ...string) (string, string, int) {
		t.Helper()
		t.Setenv("KLIQUE_API_KEY", apiKey)
		code, out, errOut := misuse(ctx, args...)
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

// isolateCLI points the CLI at a configuration file that does not exist
// and at server (with key), so no test reads the machine's sign-in.
func isolateCLI(t *testing.T, server, key string) {
	t.Setenv("KLIQUE_CONFIG", filepath.Join(t.TempDir(), "none.json"))
	t.Setenv("KLIQUE_SERVER", server)
	t.Setenv("KLIQUE_API_KEY", key)
	t.Setenv("KLIQUE_TOKEN", "")
}

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
			if code != exitUsage || !strings.Contains(errOut, c.want) {
				t.Errorf("exit %d, printed:\n%s%s\nwant exit %d and %q", code, out, errOut, exitUsage, c.want)
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
		if code, out, errOut := misuse(ctx, args...); code != exitUsage {
			t.Errorf("klique %s: exit %d, want %d (a usage error); printed:\n%s%s", strings.Join(args, " "), code, exitUsage, out, errOut)
		}
	}
	if code, _, errOut := misuse(ctx, "get", "task", "no-such-task"); code != exitFailed {
		t.Errorf("klique get task no-such-task: exit %d, want %d (the server refused); printed:\n%s", code, exitFailed, errOut)
	}
	_, help, _ := misuse(ctx, "--help")
	if !strings.Contains(help, "Exit status: 0 on success; 1 when the server refused or failed") ||
		!strings.Contains(help, "2 when the command line is wrong") {
		t.Errorf("klique --help does not document the exit codes:\n%s", help)
	}
}

// Without a command after `--` (nor a repository), enqueue says to give
// one, instead of the server's "name is empty" for the name it would have
// derived from the command; and it sends nothing.
func TestEnqueueWithoutACommandSaysToGiveOneAfterTheDashes(t *testing.T) {
	const key = "klique-misuse-test-bootstrap-key-0123456789abcdefgh"
	ctx, app := startControlPlane(t, key, 60*time.Second)
	isolateCLI(t, app.URL(), key)
	for _, args := range [][]string{{"apply", "-f", "../../examples/estate.yaml"}, {"create", "user", "alice", "--group", "ml-research"}} {
		if code, _, errOut := misuse(ctx, args...); code != 0 {
			t.Fatalf("klique %s: exit %d: %s", strings.Join(args, " "), code, errOut)
		}
	}
	code, aliceKey, errOut := misuse(ctx, "create", "apikey", "--user", "alice")
	if code != 0 {
		t.Fatalf("create apikey: exit %d: %s", code, errOut)
	}
	t.Setenv("KLIQUE_API_KEY", strings.TrimSpace(aliceKey))

	for _, verb := range [][]string{{"enqueue"}, {"create", "task"}} {
		args := append(verb, "--resource", "1 GPU", "--project", "fraud-models")
		code, _, errOut := misuse(ctx, args...)
		if code != exitUsage || !strings.Contains(errOut, "give a command after `--`") || strings.Contains(errOut, "name is empty") {
			t.Errorf("klique %s: exit %d, printed:\n%s\nwant exit %d saying to give a command after `--`", strings.Join(args, " "), code, errOut, exitUsage)
		}
	}
	// A repository without an entry point is named as what is missing,
	// not the name derived from it.
	code, _, errOut = misuse(ctx, "enqueue", "--resource", "1 GPU", "--project", "fraud-models", "--repo", "https://git.example.com/ml/fraud.git")
	if code != exitFailed || !strings.Contains(errOut, "a repository needs an entry point") || strings.Contains(errOut, "name is empty") {
		t.Errorf("enqueue --repo without --entry-point: exit %d, printed:\n%s\nwant the server's refusal naming the entry point", code, errOut)
	}
	_, out, _ := misuse(ctx, "get", "tasks", "-o", "json")
	if strings.Contains(out, `"id"`) {
		t.Errorf("a refused enqueue made a task:\n%s", out)
	}
}

// `klique get` names workers among its kinds, in its help and in the error
// for an unknown kind: both come from the one list of kinds.
func TestGetListsWorkersAmongItsKinds(t *testing.T) {
	isolateCLI(t, "http://127.0.0.1:1", "")
	_, help, _ := misuse(context.Background(), "get", "--help")
	_, rootHelp, _ := misuse(context.Background(), "--help")
	code, _, errOut := misuse(context.Background(), "get", "gizmos")
	if code != exitUsage {
		t.Errorf("get gizmos: exit %d, want %d", code, exitUsage)
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
