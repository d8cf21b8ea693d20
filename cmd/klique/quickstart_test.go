package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/eventually"
	"github.com/klique-ai/klique/internal/store/pgtest"
)

// quickstartStep is one command of the README quickstart with what it must
// print, or the error it must fail with.
type quickstartStep struct {
	command string
	expect  []string
	err     string
}

// readQuickstart reads the shell blocks of the README between the
// quickstart markers, then between the worker markers, the run ones, the
// pipelines ones, the apps ones, the MCP ones, then the gateway ones. A command is
// followed by "# → text" lines (text it prints) or one "# error: text" line
// (it fails, saying text). A line ending in a backslash goes on on the
// next. A command ending in a here-document ("<<EOF") takes the lines
// after it, as they are, up to the one that ends it. A command ending in
// " &" runs in the background until the test ends. Other comments are
// prose.
func readQuickstart(t *testing.T) []quickstartStep {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var steps []quickstartStep
	for _, block := range []string{"quickstart", "worker", "run", "pipelines", "apps", "mcp", "gateway"} {
		_, rest, ok := strings.Cut(string(readme), "<!-- "+block+":begin -->")
		text, _, ok2 := strings.Cut(rest, "<!-- "+block+":end -->")
		if !ok || !ok2 {
			t.Fatalf("README.md has no %s block between <!-- %s:begin --> and <!-- %s:end -->", block, block, block)
		}
		sc := bufio.NewScanner(strings.NewReader(text))
		heredoc := "" // the word that ends the here-document being read
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if heredoc != "" {
				last := &steps[len(steps)-1]
				last.command += "\n" + sc.Text()
				if line == heredoc {
					heredoc = ""
				}
				continue
			}
			switch {
			case line == "" || strings.HasPrefix(line, "```"):
			case strings.HasPrefix(line, "# → "):
				if len(steps) == 0 {
					t.Fatalf("expected output %q before any command", line)
				}
				steps[len(steps)-1].expect = append(steps[len(steps)-1].expect, strings.TrimPrefix(line, "# → "))
			case strings.HasPrefix(line, "# error: "):
				steps[len(steps)-1].err = strings.TrimPrefix(line, "# error: ")
			case strings.HasPrefix(line, "#"):
			case len(steps) > 0 && strings.HasSuffix(steps[len(steps)-1].command, "\\"):
				// A continuation of the command above.
				last := &steps[len(steps)-1]
				last.command = strings.TrimSuffix(last.command, "\\") + " " + line
			default:
				steps = append(steps, quickstartStep{command: line})
			}
			if _, word, ok := strings.Cut(line, "<<"); ok && !strings.HasPrefix(line, "#") {
				heredoc = strings.Trim(strings.TrimPrefix(strings.TrimSpace(word), "-"), `'"`)
			}
		}
		if heredoc != "" {
			t.Fatalf("README.md's %s block: a here-document does not end with %s", block, heredoc)
		}
	}
	if len(steps) < 10 {
		t.Fatalf("the quickstart has only %d commands", len(steps))
	}
	return steps
}

// TestReadmeQuickstartWorksAsWritten builds the klique binary, starts
// `klique serve` on its embedded defaults in a fresh directory, and runs
// every command of the README quickstart in bash from that directory,
// checking what each prints. `make build` is done by the test itself (the
// binary lands in ./bin/klique as the README expects).
func TestReadmeQuickstartWorksAsWritten(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a server")
	}
	runQuickstart(t, "")
}

// TestReadmeQuickstartWorksOnPostgreSQL runs the same quickstart with the
// server keeping its state in PostgreSQL (KLIQUE_DATABASE_URL): the same
// binary, the same behaviour.
func TestReadmeQuickstartWorksOnPostgreSQL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a server")
	}
	runQuickstart(t, pgtest.RequirePostgresURL(t))
}

func runQuickstart(t *testing.T, databaseURL string) {
	steps := readQuickstart(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin", "klique")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	examples, _ := filepath.Abs("../../examples")
	if err := os.Symlink(examples, filepath.Join(dir, "examples")); err != nil {
		t.Fatal(err)
	}

	addr := freeAddr(t)
	// The reader's own OpenAI-compatible model server, which the README's
	// gateway block points an alias at.
	modelServer := fakeModelServer(t, "qwen2.5-0.5b-instruct")
	env := append(os.Environ(), "MODEL_SERVER="+modelServer, "MODEL=qwen2.5-0.5b-instruct",
		"HOME="+dir, "XDG_CONFIG_HOME="+filepath.Join(dir, ".config"),
		"KLIQUE_LISTEN="+addr, "KLIQUE_SERVER=http://"+addr, "KLIQUE_PUBLIC_URL=http://"+addr,
		"KLIQUE_CONFIG=", "KLIQUE_API_KEY=", "KLIQUE_TOKEN=", "KLIQUE_DATABASE_URL="+databaseURL, "KLIQUE_BOOTSTRAP_TOKEN=",
		// A reader's git knows who they are; this HOME's does not.
		"GIT_AUTHOR_NAME=reader", "GIT_AUTHOR_EMAIL=reader@example.com", "GIT_COMMITTER_NAME=reader", "GIT_COMMITTER_EMAIL=reader@example.com")
	ctx, cancel := context.WithCancel(context.Background())
	serve := exec.CommandContext(ctx, bin, "serve")
	serve.Dir, serve.Env = dir, env
	serverLog := &syncBuffer{}
	serve.Stdout, serve.Stderr = serverLog, serverLog
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = serve.Wait()
		if t.Failed() {
			t.Logf("server log:\n%s", serverLog.String())
		}
	})
	waitReady(t, "http://"+addr+"/readyz")
	if strings.Contains(serverLog.String(), mustRead(t, filepath.Join(dir, "klique-data", "admin.token"))) {
		t.Fatal("the server log holds the admin key")
	}
	if info, err := os.Stat(filepath.Join(dir, "klique-data", "admin.token")); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("admin.token: %v, mode %v; want mode 0600", err, info.Mode())
	}

	for _, st := range steps {
		if strings.HasPrefix(st.command, "make ") {
			continue // the test built ./bin/klique itself
		}
		if bg, ok := strings.CutSuffix(st.command, " &"); ok {
			runInBackground(t, bg, dir, env)
			continue
		}
		// The README talks to the server at its default address.
		command := strings.ReplaceAll(st.command, "http://127.0.0.1:8080", "http://"+addr)
		t.Run(st.command, func(t *testing.T) {
			cmd := exec.Command("bash", "-c", command)
			cmd.Dir, cmd.Env = dir, env
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			out := strings.ReplaceAll(stdout.String()+stderr.String(), "127.0.0.1:"+strings.Split(addr, ":")[1], "127.0.0.1:8080")
			if st.err != "" {
				if err == nil {
					t.Fatalf("succeeded, want it refused with %q; printed:\n%s", st.err, out)
				}
				if !strings.Contains(stderr.String(), st.err) {
					t.Fatalf("refused with:\n%s\nwant %q", stderr.String(), st.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("failed: %v\n%s", err, out)
			}
			for _, want := range st.expect {
				if !containsSpaced(out, want) {
					t.Errorf("output does not contain %q:\n%s", want, out)
				}
			}
		})
	}
}

// fakeModelServer stands in for a model server a reader runs (vLLM,
// Ollama): it answers chat completions for the one model it serves, as
// "Hello from" that model, and refuses any other, as vLLM does. It returns
// its base URL.
func fakeModelServer(t *testing.T, served string) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model string `json:"model"`
		}
		if r.URL.Path != "/v1/chat/completions" || json.NewDecoder(r.Body).Decode(&req) != nil {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if req.Model != served {
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprintf(w, `{"error":{"message":"The model %q does not exist.","type":"NotFoundError","code":404}}`, req.Model)
			return
		}
		fmt.Fprintf(w, `{"id":"c1","object":"chat.completion","model":%q,"choices":[{"index":0,"message":{"role":"assistant","content":"Hello from %s"},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12}}`, served, served)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

// runInBackground starts a command of the README that runs beside the
// others (the worker daemon), and stops it with SIGTERM when the test ends,
// printing its output if the test failed.
func runInBackground(t *testing.T, command, dir string, env []string) {
	cmd := exec.Command("bash", "-c", "exec "+command)
	cmd.Dir, cmd.Env = dir, env
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", command, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(40 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("%s:\n%s", command, out.String())
		}
	})
}

// containsSpaced is strings.Contains that treats runs of spaces as one, so
// that table columns match the README however wide they are.
func containsSpaced(s, sub string) bool {
	return strings.Contains(strings.Join(strings.Fields(s), " "), strings.Join(strings.Fields(sub), " "))
}

func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func waitReady(t testing.TB, url string) {
	t.Helper()
	eventually.Within(t, 30*time.Second, "the server to be ready at "+url, func() bool {
		resp, err := http.Get(url)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

func mustRead(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		t.Fatalf("%s is empty", path)
	}
	return s
}

// syncBuffer is a buffer the server process writes to while the test reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
