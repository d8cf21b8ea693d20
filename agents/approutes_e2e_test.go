package agents_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	openai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/klique-ai/klique/agents/worker"
	"github.com/klique-ai/klique/internal/appnet"
	"github.com/klique-ai/klique/internal/eventually"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
)

// buildModelServer builds the test tree's OpenAI-compatible model server
// (agents/testdata/openai-server) and returns its path.
func buildModelServer(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "openai-server")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/klique-ai/klique/agents/testdata/openai-server").CombinedOutput(); err != nil {
		t.Fatalf("go build the model server: %v\n%s", err, out)
	}
	return bin
}

// servingEstate is the e2e estate with a serving app "tiny" (the test
// tree's model server), a route whose endpoints are tiny's ready
// instances, and two aliases on it: chat (no fallback) and chat-fb
// (falling back to a static route at backup).
func servingEstate(bin, backup string) string {
	return estate + fmt.Sprintf(`apps:
  catalogue:
    - name: tiny
      kind: serving
      port: 8000
      healthPath: /health
      run: {process: "%s --port {port}"}
    - name: web
      kind: session
      port: 8000
      run: {process: "python3 -m http.server {port} --bind 127.0.0.1"}
gateway:
  routes:
    - {name: tiny-route, app: tiny}
    - {name: backup, endpoints: ["%s/v1"]}
  models:
    - {name: tiny-model, route: tiny-route, upstream: tiny, inputPrice: 1.00, outputPrice: 2.00}
    - {name: backup-model, route: backup, upstream: backup, inputPrice: 0, outputPrice: 0}
  aliases:
    - name: chat
      rules: [{targets: [{model: tiny-model}]}]
    - name: chat-fb
      rules: [{targets: [{model: tiny-model}], fallbacks: [backup-model]}]
`, bin, backup)
}

// TestAServingInstanceBecomesARouteEndpoint runs the real control plane and
// a process-mode worker on loopback. A launch on a route that does not
// exist, or of a session app on a route, is refused with what to do.
// Before any instance is ready a call to the route's alias gets a 503
// naming the route, and one with a fallback falls back. A serving
// instance (the test tree's model server) launched with the route becomes
// its endpoint once ready: the official OpenAI SDK calls the alias through
// /v1 and reaches it, streaming included; the ledger holds the calls'
// tokens naming the route and the instance, and the instance's GPU
// interval. Stopping it drops the endpoint: the next call gets the 503
// again, or falls back.
func TestAServingInstanceBecomesARouteEndpoint(t *testing.T) {
	t.Parallel()
	bin := buildModelServer(t)
	backup := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"b","object":"chat.completion","created":1,"model":"backup","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"from the backup"}}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
	}))
	t.Cleanup(backup.Close)
	e := startControlPlane(t, servingEstate(bin, backup.URL))
	_, logs := e.startWorkerTuned(t, "gpu-host-serving", "0,1", func(c *worker.Config) {
		c.AppProbeInterval = 50 * time.Millisecond
		c.AppStartTimeout = 20 * time.Second
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	client := openai.NewClient(option.WithBaseURL(e.url+"/v1/"), option.WithAPIKey(e.alice),
		option.WithHeader("X-Klique-Project", "fraud-models"), option.WithMaxRetries(0))
	ask := func(alias string) (string, error) {
		c, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: alias,
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")}})
		if err != nil {
			return "", err
		}
		return c.Choices[0].Message.Content, nil
	}
	want503 := func(when string) {
		t.Helper()
		_, err := ask("chat")
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusServiceUnavailable ||
			!strings.Contains(apiErr.Message, "route tiny-route has no running endpoint") || !strings.Contains(apiErr.Message, "klique app launch tiny --route tiny-route") {
			t.Fatalf("%s, a call to chat: %v, want a 503 naming route tiny-route and how to launch an instance", when, err)
		}
		if got, err := ask("chat-fb"); err != nil || got != "from the backup" {
			t.Fatalf("%s, a call to chat-fb: %q %v, want the fallback's answer", when, got, err)
		}
	}
	launch := `mutation($in: LaunchAppInput!) { launchApp(input: $in) { id state } }`
	in := func(app, route string) map[string]any {
		return map[string]any{"in": map[string]any{"app": app, "computeResource": "1 GPU", "project": "fraud-models", "route": route}}
	}

	// Refusals: a route that does not exist, a session app on a route.
	if msg := gqlRefused(t, e.url, e.alice, launch, in("tiny", "nope")); !strings.Contains(msg, "no static route 'nope'") ||
		!strings.Contains(msg, "routes: [{name: nope, app: tiny}]") {
		t.Fatalf("launch on an unknown route: %s", msg)
	}
	if msg := gqlRefused(t, e.url, e.alice, launch, in("web", "tiny-route")); !strings.Contains(msg, "only a serving app's instances can serve route 'tiny-route'") {
		t.Fatalf("launch of a session app on a route: %s", msg)
	}
	want503("before any instance")

	id := str(gql(t, e.url, e.alice, launch, in("tiny", "tiny-route")), "launchApp", "id")
	waitInstance(t, e.url, e.alice, instanceQuery, id, logs, "the serving instance to be ready", instanceReady)
	// The readiness event reaches the serving index right after: the
	// alias lands on the instance.
	var got string
	eventually.True(t, "", func() bool {
		var err error
		got, err = ask("chat")
		return err == nil
	})
	if got != "served by instance "+id {
		t.Fatalf("chat answered %q, want the instance %s", got, id)
	}
	stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "chat",
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}})
	acc := openai.ChatCompletionAccumulator{}
	chunks := 0
	for stream.Next() {
		acc.AddChunk(stream.Current())
		chunks++
	}
	if stream.Err() != nil || chunks < 3 || len(acc.Choices) != 1 || acc.Choices[0].Message.Content != "served by instance "+id || acc.Usage.CompletionTokens != 5 {
		t.Fatalf("streamed chat: %d chunks, %+v, %v", chunks, acc.Choices, stream.Err())
	}
	if got, err := ask("chat-fb"); err != nil || got != "served by instance "+id {
		t.Fatalf("chat-fb with a ready instance: %q %v, want the instance first", got, err)
	}

	// The ledger: the calls' tokens name the route and the instance.
	endpoint := "tiny-route " + appnet.InstanceBaseURL(id)
	var calls []*model.ModelCall
	eventually.True(t, "", func() bool {
		all, err := e.app.Store.ListModelCalls(ctx, e.tenant, store.ModelUsageQuery{From: time.Now().Add(-time.Hour), To: time.Now().Add(time.Hour)}, store.Page{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		calls = calls[:0]
		for _, c := range all {
			if c.Target == endpoint {
				calls = append(calls, c)
			}
		}
		return len(calls) == 3
	})
	for _, c := range calls {
		if c.Model != "tiny-model" || c.InputTokens != 7 || c.OutputTokens != 5 || c.CostMicros != 17 || c.Outcome != model.CallOK {
			t.Fatalf("a call through the instance on the ledger: %+v", c)
		}
	}

	gql(t, e.url, e.alice, `mutation($id: ID!) { stopApp(id: $id) { state } }`, map[string]any{"id": id})
	// Stopped, the route has no endpoint: the very next call is refused
	// (the stop's event drops it), or falls back.
	eventually.True(t, "", func() bool { _, err := ask("chat"); return err != nil })
	want503("after the stop")

	// The instance's GPU interval is on the ledger, closed by the stop.
	ps, err := e.app.Store.ListPlacements(ctx, e.tenant, store.PlacementFilter{TaskID: id})
	if err != nil || len(ps) != 1 || ps[0].EndedAt == nil || ps[0].Size <= 0 {
		t.Fatalf("the instance's ledger interval: %+v, %v", ps, err)
	}
}
