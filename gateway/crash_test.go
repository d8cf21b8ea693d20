package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	_ "modernc.org/sqlite" // the driver internal/store/sqlite uses, to read the ledger of a killed server
)

// crashEstate routes alias chat to the fake upstream, for a group of
// one project whose token budget runs out partway through the test.
const crashEstate = `apiVersion: klique/v1
kind: Estate
groups:
  - {name: ml}
projects:
  - {name: fraud, group: ml}
gateway:
  routes:
    - {name: local, endpoints: ["%s/v1"], timeout: 5s}
  models:
    - {name: llama, route: local, upstream: meta/llama, inputPrice: 0.20, outputPrice: 0.20, maxOutputTokens: 20}
  aliases:
    - name: chat
      rules:
        - {targets: [{model: llama}]}
  budgets:
    - {project: fraud, period: month, tokens: %d}
`

// TestEveryAnsweredCallIsOnTheLedgerAfterAKill runs `klique serve` as a
// process of its own, fires calls at its gateway from many callers at
// once (whole answers and streams, until the project's budget runs out
// and calls are refused), kills it with SIGKILL the moment enough answers
// and refusals have arrived, starts it again, and checks that every call
// a caller got a whole answer (or refusal) for has its row on the ledger:
// a row is written before its answer's last bytes go out.
func TestEveryAnsweredCallIsOnTheLedgerAfterAKill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs klique serve")
	}
	if runtime.GOOS == "windows" {
		t.Skip("kills the server with SIGKILL")
	}
	bin := filepath.Join(t.TempDir(), "klique")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/klique-ai/klique/cmd/klique").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	up := newUpstream(t)
	dir := t.TempDir()
	srv := startServe(t, bin, dir)
	admin := strings.TrimSpace(string(mustReadFile(t, filepath.Join(dir, "klique-data", "admin.token"))))
	serveGQL(t, srv.base, admin, `mutation($d: String!) { applyEstate(document: $d) { summary } }`,
		map[string]any{"d": fmt.Sprintf(crashEstate, up.URL, 6000)})
	serveGQL(t, srv.base, admin, `mutation($in: CreateUserInput!) { createUser(input: $in) { id } }`,
		map[string]any{"in": map[string]any{"name": "alice", "role": "MEMBER", "groups": []any{map[string]any{"group": "ml"}}}})
	d := serveGQL(t, srv.base, admin, `mutation($in: CreateAPIKeyInput!) { createAPIKey(input: $in) { secret } }`,
		map[string]any{"in": map[string]any{"name": "alice key", "user": "alice"}})
	key := d["createAPIKey"].(map[string]any)["secret"].(string)

	// Callers call until the server dies; each call answered in whole is
	// noted with its id.
	var mu sync.Mutex
	answered := map[string]string{} // call id → what the caller got
	var ok, refused int
	enough := make(chan struct{})
	var once sync.Once
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func(stream bool) {
			defer wg.Done()
			for {
				id, got, err := crashCall(client, srv.base, key, stream)
				if err != nil {
					return // the server is gone
				}
				mu.Lock()
				answered[id] = got
				if got == "over budget" {
					refused++
				} else {
					ok++
				}
				if ok >= 50 && refused >= 50 {
					once.Do(func() { close(enough) })
				}
				mu.Unlock()
			}
		}(i%2 == 0)
	}
	select {
	case <-enough:
	case <-time.After(60 * time.Second):
		t.Fatalf("after a minute, %d calls answered and %d refused", ok, refused)
	}
	srv.kill(t)
	wg.Wait()

	// The ledger after a restart.
	srv = startServe(t, bin, dir)
	db, err := sql.Open("sqlite", filepath.Join(dir, "klique-data", "klique.db"))
	must(t, err)
	defer db.Close()
	rows, err := db.Query(`SELECT id, outcome FROM model_calls`)
	must(t, err)
	onLedger := map[string]string{}
	for rows.Next() {
		var id, outcome string
		must(t, rows.Scan(&id, &outcome))
		onLedger[id] = outcome
	}
	must(t, rows.Err())
	var missing []string
	for id, got := range answered {
		if _, ok := onLedger[id]; !ok {
			missing = append(missing, got)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("%d of %d calls answered before the kill (%d answers, %d refusals) are not on the ledger: %v",
			len(missing), len(answered), ok, refused, missing)
	}
	t.Logf("%d answered calls (%d answers, %d refusals), all on the ledger after the kill", len(answered), ok, refused)
}

// crashCall makes one call and reads its answer whole: it returns the
// call's id and what the caller got ("answer", "stream" or "over
// budget"), or an error when the answer did not arrive whole.
func crashCall(c *http.Client, base, key string, stream bool) (string, string, error) {
	body := `{"model":"chat","messages":[{"role":"user","content":"hello there"}]}`
	if stream {
		body = `{"model":"chat","stream":true,"messages":[{"role":"user","content":"hello there"}]}`
	}
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("X-Klique-Project", "fraud")
	resp, err := c.Do(req)
	if err != nil {
		return "", "", err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", "", err
	}
	id := resp.Header.Get("X-Klique-Call-Id")
	switch {
	case id == "":
		return "", "", fmt.Errorf("no call id: %d %s", resp.StatusCode, data)
	case resp.StatusCode == http.StatusTooManyRequests && bytes.Contains(data, []byte("insufficient_quota")):
		return id, "over budget", nil
	case resp.StatusCode == http.StatusOK && stream && bytes.HasSuffix(bytes.TrimSpace(data), []byte("data: [DONE]")):
		return id, "stream", nil
	case resp.StatusCode == http.StatusOK && !stream:
		return id, "answer", nil
	}
	return "", "", fmt.Errorf("unexpected answer: %d %s", resp.StatusCode, data)
}

// served is a `klique serve` process.
type served struct {
	cmd  *exec.Cmd
	base string
	log  *logBuffer
	done chan struct{}
}

// startServe starts klique serve over the data directory under dir and
// waits until it is ready; the test's end stops it.
func startServe(t *testing.T, bin, dir string) *served {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	addr := ln.Addr().String()
	ln.Close()
	s := &served{base: "http://" + addr, log: &logBuffer{}, done: make(chan struct{})}
	s.cmd = exec.Command(bin, "serve")
	s.cmd.Dir = dir
	s.cmd.Env = append(os.Environ(), "HOME="+dir, "KLIQUE_LISTEN="+addr, "KLIQUE_PUBLIC_URL="+s.base, "KLIQUE_DATABASE_URL=",
		"KLIQUE_REDIS_URL=", "KLIQUE_BOOTSTRAP_TOKEN=", "KLIQUE_LOG_LEVEL=warn")
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	s.cmd.WaitDelay = 5 * time.Second
	must(t, s.cmd.Start())
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	t.Cleanup(func() {
		_ = s.cmd.Process.Kill()
		<-s.done
		if t.Failed() {
			t.Logf("server log:\n%s", s.log.String())
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(s.base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s
			}
		}
		select {
		case <-s.done:
			t.Fatalf("klique serve ended early:\n%s", s.log.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("klique serve not ready after a minute:\n%s", s.log.String())
		}
	}
}

// kill ends the server with SIGKILL: nothing of it runs after.
func (s *served) kill(t *testing.T) {
	t.Helper()
	must(t, s.cmd.Process.Kill())
	<-s.done
}

func mustReadFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	must(t, err)
	return data
}

// serveGQL runs a GraphQL operation on a klique serve process.
func serveGQL(t *testing.T, base, cred, query string, vars map[string]any) map[string]any {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, base+"/graphql", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+cred)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	defer resp.Body.Close()
	var out struct {
		Data   map[string]any   `json:"data"`
		Errors []map[string]any `json:"errors"`
	}
	if err := json.NewDecoder(bufio.NewReader(resp.Body)).Decode(&out); err != nil || len(out.Errors) > 0 {
		t.Fatalf("graphql %s: %v %v", query, err, out.Errors)
	}
	return out.Data
}
