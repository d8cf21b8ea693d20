package gateway_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/klique-ai/klique/internal/model"
)

// billingMock is a model server that bills as providers do, for the tests
// of a reservation's bound (issue 39, defect 2): 20 tokens of prompt and
// 1,500 per image, and an answer as long as the request's output bound
// allows, or, when it sets none, 20,000 tokens, as vLLM generates until
// its context ends. It speaks chat completions and completions (vLLM),
// Anthropic's Messages and OpenAI's Responses, and keeps every request.
type billingMock struct {
	*httptest.Server
	mu   sync.Mutex
	seen []billed
	// delay is how long each answer takes, so that calls overlap.
	delay time.Duration
	// output, when not 0, is what every answer bills as its output,
	// whatever the request asked for.
	output int64
}

// billed is a request the mock answered: its path, its body, and the
// output bound it carried ("" when none).
type billed struct {
	path, body, bound string
}

const (
	billedPrompt   = 20
	billedPerImage = 1500
	unboundedReply = 20_000
)

func newBillingMock(t testing.TB) *billingMock {
	m := &billingMock{}
	m.Server = httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(m.Close)
	return m
}

func (m *billingMock) requests() []billed {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]billed(nil), m.seen...)
}

// images counts the image parts anywhere in a request: chat's image_url,
// Messages' image blocks, Responses' input_image.
func images(v gjson.Result) int64 {
	var n int64
	switch {
	case v.IsObject():
		switch v.Get("type").Str {
		case "image_url", "image", "input_image":
			n++
		}
		v.ForEach(func(_, x gjson.Result) bool { n += images(x); return true })
	case v.IsArray():
		v.ForEach(func(_, x gjson.Result) bool { n += images(x); return true })
	}
	return n
}

func (m *billingMock) serve(w http.ResponseWriter, r *http.Request) {
	data, _ := io.ReadAll(r.Body)
	body := gjson.ParseBytes(data)
	// The output bound, in the field each API takes.
	var field string
	switch {
	case strings.HasSuffix(r.URL.Path, "/responses"):
		field = "max_output_tokens"
	case body.Get("max_completion_tokens").Exists():
		field = "max_completion_tokens"
	default:
		field = "max_tokens"
	}
	bound := body.Get(field)
	m.mu.Lock()
	m.seen = append(m.seen, billed{path: r.URL.Path, body: string(data), bound: bound.Raw})
	delay, fixed := m.delay, m.output
	m.mu.Unlock()
	select {
	case <-time.After(delay):
	case <-r.Context().Done():
		return
	}
	in := billedPrompt + billedPerImage*images(body)
	out := int64(unboundedReply)
	if bound.Int() > 0 {
		out = bound.Int()
	}
	if best := body.Get("best_of").Int(); best > 1 {
		out *= best // every candidate is generated, and billed
	}
	if fixed > 0 {
		out = fixed
	}
	w.Header().Set("Content-Type", "application/json")
	model := body.Get("model").Str
	switch {
	case strings.HasSuffix(r.URL.Path, "/messages"):
		fmt.Fprintf(w, `{"id":"msg_1","type":"message","role":"assistant","model":%q,"content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","usage":{"input_tokens":%d,"output_tokens":%d}}`,
			model, in, out)
	case strings.HasSuffix(r.URL.Path, "/responses"):
		fmt.Fprintf(w, `{"id":"resp_1","object":"response","created_at":1,"status":"completed","model":%q,"output":[{"type":"message","id":"m1","role":"assistant","status":"completed","content":[{"type":"output_text","text":"ok","annotations":[]}]}],"usage":{"input_tokens":%d,"output_tokens":%d,"total_tokens":%d}}`,
			model, in, out, in+out)
	case strings.HasSuffix(r.URL.Path, "/completions") && !strings.HasSuffix(r.URL.Path, "/chat/completions"):
		fmt.Fprintf(w, `{"id":"cmpl-1","object":"text_completion","created":1,"model":%q,"choices":[{"index":0,"text":"ok","finish_reason":"length"}],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`,
			model, in, out, in+out)
	case body.Get("stream").Bool():
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":%q,\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"},\"finish_reason\":\"length\"}]}\n\n", model)
		fmt.Fprintf(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":%q,\"choices\":[],\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d,\"total_tokens\":%d}}\n\n", model, in, out, in+out)
		fmt.Fprint(w, "data: [DONE]\n\n")
	default:
		fmt.Fprintf(w, `{"id":"c1","object":"chat.completion","created":1,"model":%q,"choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"length"}],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`,
			model, in, out, in+out)
	}
}

// billingGateway is a gateway in front of a billingMock: alias "vlm" goes
// to a self-hosted model (a route that speaks chat completions, and has
// Messages and Responses calls translated), "capped" to one that states
// it produces at most 2,048 tokens, "claude" to Anthropic's API and "gpt"
// to OpenAI's (both passed through). The self-hosted model states no
// maxOutputTokens, and every model bills at most 1,600 tokens an image.
// budget is the token budget of project detect, and of project shared,
// per day.
func billingGateway(t *testing.T, m *billingMock, budget int64, opts ...envOption) *env {
	t.Helper()
	return newEnv(t, func(g *model.Gateway, _ string) {
		up := m.URL + "/v1"
		g.Providers = []*model.Provider{
			{Name: "anthropic", BaseURL: up, KeySecret: "OPENAI_API_KEY", API: model.APIAnthropic, Timeout: 5 * time.Second},
			{Name: "openai", BaseURL: up, KeySecret: "OPENAI_API_KEY", API: model.APIOpenAI, Timeout: 5 * time.Second},
		}
		g.Routes = []*model.Route{{Name: "vllm", Endpoints: []string{up}, Timeout: 5 * time.Second}}
		g.Models = []*model.LLMModel{
			{Name: "vlm", Route: "vllm", Upstream: "qwen-vl", Currency: "USD", MaxImageTokens: 1600},
			{Name: "vlm-capped", Route: "vllm", Upstream: "qwen-vl-small", Currency: "USD", MaxOutputTokens: 2048, MaxImageTokens: 1600},
			{Name: "claude", Provider: "anthropic", Upstream: "claude-x", Currency: "USD", MaxOutputTokens: 4096, MaxImageTokens: 1600},
			{Name: "gpt", Provider: "openai", Upstream: "gpt-x", Currency: "USD", MaxOutputTokens: 4096, MaxImageTokens: 1600},
		}
		for _, a := range [][2]string{{"vlm", "vlm"}, {"capped", "vlm-capped"}, {"claude", "claude"}, {"gpt", "gpt"}} {
			g.Aliases = append(g.Aliases, &model.Alias{Name: a[0], Rules: []model.AliasRule{{Targets: []model.Target{{Model: a[1], Weight: 1}}}}})
		}
		g.Budgets = []*model.TokenBudget{{Project: "detect", Period: model.PeriodDay, Tokens: budget},
			{Project: "shared", Period: model.PeriodDay, Tokens: budget}}
	}, opts...)
}

// door is a way in and an alias behind it: the path, the body of a call,
// and how a spent budget is refused there.
type doorCase struct {
	name, path string
	body       func(alias string) string
	// alias is the alias called; budgetStatus the status of a budget
	// refusal (402 on the Responses door), code reads its code, and
	// spent is that code (a budget's in OpenAI's shape, a rate limit's
	// type in Anthropic's, with X-Should-Retry: false).
	alias        string
	budgetStatus int
	code         func(r response) string
	spent        string
}

func openAICode(r response) string    { return r.json("error.code").Str }
func anthropicCode(r response) string { return r.json("error.type").Str }

// imageDoors are the doors and paths an image call takes: chat passed
// through, Messages translated to chat and passed through to Anthropic,
// Responses translated to chat and passed through to OpenAI. Each call
// carries four images given by URL (their size unknown) and a little text.
func imageDoors() []doorCase {
	const url = "https://img.example.com/scan-%d.png"
	chatBody := func(alias string) string {
		parts := `{"type":"text","text":"what is in these?"}`
		for i := range 4 {
			parts += `,{"type":"image_url","image_url":{"url":"` + fmt.Sprintf(url, i) + `","detail":"high"}}`
		}
		return `{"model":"` + alias + `","max_tokens":10,"messages":[{"role":"user","content":[` + parts + `]}]}`
	}
	messagesBody := func(alias string) string {
		parts := `{"type":"text","text":"what is in these?"}`
		for i := range 4 {
			parts += `,{"type":"image","source":{"type":"url","url":"` + fmt.Sprintf(url, i) + `"}}`
		}
		return `{"model":"` + alias + `","max_tokens":10,"messages":[{"role":"user","content":[` + parts + `]}]}`
	}
	responsesBody := func(alias string) string {
		parts := `{"type":"input_text","text":"what is in these?"}`
		for i := range 4 {
			parts += `,{"type":"input_image","image_url":"` + fmt.Sprintf(url, i) + `"}`
		}
		return `{"model":"` + alias + `","max_output_tokens":10,"input":[{"role":"user","content":[` + parts + `]}]}`
	}
	return []doorCase{
		{"chat", "chat/completions", chatBody, "vlm", 429, openAICode, "insufficient_quota"},
		{"chat to openai", "chat/completions", chatBody, "gpt", 429, openAICode, "insufficient_quota"},
		{"messages translated", "messages", messagesBody, "vlm", 429, anthropicCode, "rate_limit_error"},
		{"messages to anthropic", "messages", messagesBody, "claude", 429, anthropicCode, "rate_limit_error"},
		{"responses translated", "responses", responsesBody, "vlm", 402, openAICode, "insufficient_quota"},
		{"responses to openai", "responses", responsesBody, "gpt", 402, openAICode, "insufficient_quota"},
	}
}

// chargedTo sums what the ledger charged project's calls, once n calls
// (answered and refused) are on it.
func (e *env) chargedTo(project string, n int) (total int64, answered int) {
	e.t.Helper()
	for _, c := range e.ledger(n) {
		if c.ProjectName != project {
			continue
		}
		total += c.InputTokens + c.OutputTokens
		if c.Outcome == model.CallOK {
			answered++
		}
	}
	return total, answered
}

// A call's images count toward its reservation with an upper bound (here,
// unknown in size, the most the model bills for one), so a budget holds:
// against an upstream that bills 20 + 1,500 tokens an image, calls of four
// images one at a time and 20 at once are never charged more than the
// budget of 10,000 tokens a day, and the calls past it are refused as a
// spent budget. Before, an image counted nothing: such a call reserved 40
// tokens and was billed 6,030, and 20 at once were charged 12 times the
// budget.
func TestImagesCannotOverrunABudget(t *testing.T) {
	for _, d := range imageDoors() {
		t.Run(d.name, func(t *testing.T) {
			backends(t, func(t *testing.T, opts ...envOption) {
				m := newBillingMock(t)
				e := billingGateway(t, m, 10_000, opts...)
				body := d.body(d.alias)
				// One at a time, on project detect.
				var refused response
				for range 10 {
					r := e.post("vic", "detect", d.path, body)
					if r.status != 200 {
						refused = r
						continue
					}
				}
				if refused.status != d.budgetStatus || d.code(refused) != d.spent || refused.header.Get("X-Should-Retry") != "false" {
					t.Errorf("a call past the budget: %d %s", refused.status, refused.body)
				}
				if total, answered := e.chargedTo("detect", 10); total > 10_000 || answered == 0 {
					t.Errorf("10 calls one at a time: %d answered, charged %d tokens of a budget of 10000", answered, total)
				}
				// 20 at once, on project shared, against an upstream that takes
				// its time: they overlap.
				m.mu.Lock()
				m.delay = 300 * time.Millisecond
				m.mu.Unlock()
				var wg sync.WaitGroup
				statuses := make([]int, 20)
				for i := range 20 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						if r, err := e.postErr("vic", "shared", d.path, body); err == nil {
							statuses[i] = r.status
						}
					}()
				}
				wg.Wait()
				total, answered := e.chargedTo("shared", 30)
				if total > 10_000 || answered == 0 {
					t.Fatalf("20 calls at once: %d answered, charged %d tokens of a budget of 10000 (statuses %v)", answered, total, statuses)
				}
				for _, s := range statuses {
					if s != 200 && s != d.budgetStatus {
						t.Fatalf("20 calls at once answered %v: want each answered or refused as a spent budget", statuses)
					}
				}
			})
		})
	}
}

// boundCase is a call without an output bound of its own (or with one
// above its model's), and the bound its upstream must be sent.
type boundCase struct {
	name, path, body string
	// field and want are the output bound the upstream must see.
	field string
	want  int64
}

// A call that states no output bound (or one above what its model
// produces) sends its upstream the bound it reserved, in the field that
// API takes, on every door and path: so a server that would generate
// until its context ends (vLLM, given no max_tokens, here 20,000 tokens)
// stops where the reservation does. 10 such calls at once, on a budget of
// 50,000 tokens a day, are never charged more than the budget. Before, the
// request went without a bound: 10 calls were billed 200,200 tokens.
func TestTheReservedOutputBoundReachesTheUpstream(t *testing.T) {
	const user = `"messages":[{"role":"user","content":"write me an essay"}]`
	for _, tc := range []boundCase{
		{"chat, no max_tokens", "chat/completions", `{"model":"vlm",` + user + `}`, "max_tokens", 4096},
		{"chat streamed, no max_tokens", "chat/completions", `{"model":"vlm","stream":true,` + user + `}`, "max_tokens", 4096},
		{"chat to openai, no max_tokens", "chat/completions", `{"model":"gpt",` + user + `}`, "max_completion_tokens", 4096},
		{"chat, max_tokens above the model's", "chat/completions", `{"model":"capped","max_tokens":100000,` + user + `}`, "max_tokens", 2048},
		{"chat, max_completion_tokens above the model's", "chat/completions", `{"model":"capped","max_completion_tokens":100000,` + user + `}`, "max_completion_tokens", 2048},
		{"chat, the caller's own lower", "chat/completions", `{"model":"vlm","max_completion_tokens":50,` + user + `}`, "max_completion_tokens", 50},
		{"completions, no max_tokens", "completions", `{"model":"vlm","prompt":"write me an essay"}`, "max_tokens", 16},
		{"completions, best_of counted as n", "completions", `{"model":"vlm","prompt":"write me an essay","best_of":5,"max_tokens":4000}`, "max_tokens", 4000},
		{"messages translated, max_tokens above the model's", "messages", `{"model":"capped","max_tokens":64000,` + user + `}`, "max_tokens", 2048},
		{"messages to anthropic, max_tokens above the model's", "messages", `{"model":"claude","max_tokens":64000,` + user + `}`, "max_tokens", 4096},
		{"responses translated, no max_output_tokens", "responses", `{"model":"vlm","input":"write me an essay"}`, "max_tokens", 4096},
		{"responses to openai, no max_output_tokens", "responses", `{"model":"gpt","input":"write me an essay"}`, "max_output_tokens", 4096},
	} {
		t.Run(tc.name, func(t *testing.T) {
			backends(t, func(t *testing.T, opts ...envOption) {
				m := newBillingMock(t)
				m.delay = 200 * time.Millisecond
				e := billingGateway(t, m, 50_000, opts...)
				var wg sync.WaitGroup
				for range 10 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						_, _ = e.postErr("vic", "detect", tc.path, tc.body)
					}()
				}
				wg.Wait()
				seen := m.requests()
				if len(seen) == 0 {
					t.Fatal("no call reached the upstream")
				}
				for _, r := range seen {
					if got := gjson.Get(r.body, tc.field); got.Type != gjson.Number || got.Int() != tc.want {
						t.Errorf("the upstream was sent %s %s, want %d: %s", tc.field, got.Raw, tc.want, r.body)
						break
					}
				}
				total, answered := e.chargedTo("detect", 10)
				if total > 50_000 || answered != len(seen) {
					t.Errorf("10 calls at once: %d answered (%d upstream), charged %d tokens of a budget of 50000", answered, len(seen), total)
				}
			})
		})
	}
}

// A call whose upstream bills more than it reserved (an upstream that
// ignores the bound it is sent) is charged in full, and the next
// reservation in the budget's window counts it: with the Redis limiter and
// the in-process one.
func TestUsageAboveTheReservationIsChargedAndCounted(t *testing.T) {
	backends(t, func(t *testing.T, opts ...envOption) {
		m := newBillingMock(t)
		m.output = 5000
		var settled settleCounter
		e := billingGateway(t, m, 6000, append(opts, countSettlements(&settled))...)
		for i, path := range []string{"chat/completions", "messages"} {
			body := `{"model":"vlm","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`
			if r := e.post("vic", "detect", path, body); r.status != 200 {
				t.Fatalf("call %d: %d %s", i+1, r.status, r.body)
			}
			settled.wait(t, int64(i+1))
		}
		r := e.post("vic", "detect", "chat/completions", `{"model":"vlm","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`)
		if r.status != 429 || r.json("error.code").Str != "insufficient_quota" || !strings.Contains(r.json("error.message").Str, "10040 of it is used") {
			t.Fatalf("the call after two of 5,020 tokens each: %d %s", r.status, r.body)
		}
		calls := e.ledger(3)
		for _, c := range calls[:2] {
			if c.InputTokens != billedPrompt || c.OutputTokens != 5000 {
				t.Fatalf("a call billed above its reservation is on the ledger as %s", dump(c))
			}
		}
	})
}
