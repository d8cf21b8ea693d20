//go:build faults

package faults

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/eventually"
)

// appsEstate adds to the suite's estate a serving app (the test tree's
// OpenAI-compatible model server), a route whose endpoints are its ready
// instances, and an alias on it.
func appsEstate(modelServer string) string {
	return estate + fmt.Sprintf(`apps:
  catalogue:
    - name: tiny
      kind: serving
      port: 8000
      healthPath: /health
      run: {process: "%s --port {port}"}
gateway:
  routes:
    - {name: tiny-route, app: tiny}
  models:
    - {name: tiny-model, route: tiny-route, upstream: tiny, inputPrice: 0, outputPrice: 0}
  aliases:
    - name: chat
      rules: [{targets: [{model: tiny-model}]}]
`, modelServer)
}

// chat calls the alias through the gateway as cred and returns the status
// and the answer's text (or the error's message).
func chat(t *testing.T, url, cred string) (int, string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": "chat", "messages": []any{map[string]any{"role": "user", "content": "hello"}}})
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+cred)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Klique-Project", "fraud-models")
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	_ = json.Unmarshal(raw, &out)
	if len(out.Choices) > 0 {
		return resp.StatusCode, out.Choices[0].Message.Content
	}
	if out.Error.Message != "" {
		return resp.StatusCode, out.Error.Message
	}
	return resp.StatusCode, string(raw)
}

// TestKillWorkerWithAServingInstance launches a serving app instance on
// a route, through the real control plane and a process-mode worker, and
// kills the worker with SIGKILL. The instance is reported lost when the
// worker's lease runs out (it waits again, saying "worker lost"), and its
// route drops it: a call to the alias gets the route's 503 instead of
// reaching a dead endpoint. When the worker comes back with the same
// name and state directory, the instance runs again and the alias reaches
// it through the new worker's tunnel.
func TestKillWorkerWithAServingInstance(t *testing.T) {
	const lease = 5 * time.Second
	s := startServer(t, serveOpts{lease: lease})
	tn := setupTenant(t, s)

	bin := filepath.Join(t.TempDir(), "openai-server")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/klique-ai/klique/agents/testdata/openai-server").CombinedOutput(); err != nil {
		t.Fatalf("go build the model server: %v\n%s", err, out)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "estate.yaml")
	if err := os.WriteFile(file, []byte(appsEstate(bin)), 0o600); err != nil {
		t.Fatal(err)
	}
	apply := exec.Command(klique, "apply", "-f", file)
	apply.Env = append(baseEnv(dir), "KLIQUE_SERVER="+s.url, "KLIQUE_API_KEY="+adminKey)
	if out, err := apply.CombinedOutput(); err != nil {
		t.Fatalf("klique apply: %v\n%s", err, out)
	}

	w := startWorker(t, s.url, tn, "w1", "0,1")
	id := str(mustGQL(t, s.url, tn.alice, `mutation($in: LaunchAppInput!) { launchApp(input: $in) { id } }`, map[string]any{"in": map[string]any{
		"app": "tiny", "computeResource": "1 GPU", "project": "fraud-models", "route": "tiny-route"}}), "launchApp", "id")
	var retries float64
	instance := func() (state, reason string) {
		d := mustGQL(t, s.url, tn.alice, `query($id: ID!) { appInstance(id: $id) { state reason task { retries } } }`, map[string]any{"id": id})
		retries, _ = get(d, "appInstance", "task", "retries").(float64)
		return str(d, "appInstance", "state"), str(d, "appInstance", "reason")
	}
	until := func(what string, timeout time.Duration, ok func() bool) {
		t.Helper()
		if !eventually.Poll(timeout, ok) {
			st, reason := instance()
			t.Fatalf("%s: not within %s (the instance is %s: %s)", what, timeout, st, reason)
		}
	}
	served := func() bool {
		code, text := chat(t, s.url, tn.alice)
		return code == http.StatusOK && text == "served by instance "+id
	}
	until("the instance serves the alias", 60*time.Second, served)

	w.p.kill()
	killed := time.Now()
	// Lost: requeued (one retry counted) and, the engine passing every
	// 100 ms, soon placed again to wait for a worker.
	until("the instance is reported lost", 3*lease, func() bool {
		st, _ := instance()
		return st != "ready" && retries == 1
	})
	lost := time.Since(killed)
	var code int
	var text string
	until("the route drops the lost instance", 10*time.Second, func() bool {
		code, text = chat(t, s.url, tn.alice)
		return code == http.StatusServiceUnavailable && strings.Contains(text, "route tiny-route has no running endpoint")
	})

	w.start()
	restarted := time.Now()
	until("the instance serves again after the worker is back", 60*time.Second, served)
	back := time.Since(restarted)
	st, _ := instance()
	if st != "ready" {
		t.Fatalf("after the worker came back the instance is %s, want ready", st)
	}
	report(t, "scenario=kill-worker-app lease=%s lost_after=%s route_503=%q ready_again_after=%s",
		lease, lost.Round(100*time.Millisecond), text, back.Round(100*time.Millisecond))
}
