package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/klique-ai/klique/gateway"
	"github.com/klique-ai/klique/gateway/limits"
	"github.com/klique-ai/klique/internal/eventually"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
	"github.com/klique-ai/klique/internal/redistest"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/sqlite"
	"github.com/klique-ai/klique/internal/testclock"
	"github.com/klique-ai/klique/internal/vault"
)

// upstream is a fake OpenAI-compatible model server, built from what vLLM
// and OpenAI answer: each model name it is sent behaves as told.
type upstream struct {
	*httptest.Server
	mu    sync.Mutex
	seen  []seenCall
	behav map[string]behaviour
}

type seenCall struct {
	Path, Model, Auth string
	IncludeUsage      bool
}

type behaviour struct {
	// status other than 200 answers an error; delay waits first.
	status int
	delay  time.Duration
	// reply is the generated text, streamed word by word; chunkDelay
	// spaces the chunks.
	reply      string
	chunkDelay time.Duration
	// errorBody replaces the error answer.
	errorBody string
	// noUsage leaves usage out of a whole answer, as some self-hosted
	// model servers do.
	noUsage bool
	// unsafeIf makes a guard model: it answers "unsafe S1" to a request
	// that contains unsafeIf, and "safe" to any other.
	unsafeIf string
	// cutAfter > 0 breaks a stream's connection after that many chunks, as
	// a model server that crashes mid-answer does.
	cutAfter int
	// raw, when set, is the whole answer's body, sent as it is.
	raw string
	// rawStream, when set, is a stream's whole body, sent as it is.
	rawStream string
}

func newUpstream(t testing.TB) *upstream {
	u := &upstream{behav: map[string]behaviour{}}
	u.Server = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) set(model string, b behaviour) {
	u.mu.Lock()
	u.behav[model] = b
	u.mu.Unlock()
}

func (u *upstream) calls() []seenCall {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]seenCall(nil), u.seen...)
}

// words counts the tokens of a reply: one per word, as the fake streams.
func words(s string) int { return len(strings.Fields(s)) }

func (u *upstream) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	m := gjson.GetBytes(body, "model").Str
	u.mu.Lock()
	u.seen = append(u.seen, seenCall{Path: r.URL.Path, Model: m, Auth: r.Header.Get("Authorization"),
		IncludeUsage: gjson.GetBytes(body, "stream_options.include_usage").Bool()})
	b, ok := u.behav[m]
	u.mu.Unlock()
	if !ok {
		b = behaviour{reply: "hello from " + m}
	}
	select {
	case <-time.After(b.delay):
	case <-r.Context().Done():
		return
	}
	if b.status != 0 && b.status != http.StatusOK {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(b.status)
		if b.errorBody != "" {
			_, _ = io.WriteString(w, b.errorBody)
		} else {
			fmt.Fprintf(w, `{"error":{"message":"upstream says %d","type":"server_error"}}`, b.status)
		}
		return
	}
	prompt := int64(len(body) / 10)
	if strings.HasSuffix(r.URL.Path, "/embeddings") {
		fmt.Fprintf(w, `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.1,0.2]}],"model":%q,"usage":{"prompt_tokens":%d,"total_tokens":%d}}`, m, prompt, prompt)
		return
	}
	reply := b.reply
	if b.unsafeIf != "" {
		reply = "safe"
		if strings.Contains(string(body), b.unsafeIf) {
			reply = "unsafe S1"
		}
	}
	if b.raw != "" {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, b.raw)
		return
	}
	if b.rawStream != "" && gjson.GetBytes(body, "stream").Bool() {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, b.rawStream)
		return
	}
	if !gjson.GetBytes(body, "stream").Bool() && b.noUsage {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":%q,"choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}]}`, m, reply)
		return
	}
	if !gjson.GetBytes(body, "stream").Bool() {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":%q,"choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`,
			m, reply, prompt, words(reply), prompt+int64(words(reply)))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	for i, word := range strings.Fields(reply) {
		if i > 0 {
			word = " " + word
		}
		fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"model\":%q,\"choices\":[{\"index\":0,\"delta\":{\"content\":%q}}]}\n\n", m, word)
		fl.Flush()
		if b.cutAfter > 0 && i+1 == b.cutAfter {
			panic(http.ErrAbortHandler) // the connection breaks
		}
		if b.chunkDelay > 0 {
			select {
			case <-time.After(b.chunkDelay):
			case <-r.Context().Done():
				return
			}
		}
	}
	fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"model\":%q,\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n", m)
	if gjson.GetBytes(body, "stream_options.include_usage").Bool() {
		fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"model\":%q,\"choices\":[],\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d,\"total_tokens\":%d}}\n\n",
			m, prompt, words(reply), prompt+int64(words(reply)))
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	fl.Flush()
}

const testEstate = `apiVersion: klique/v1
kind: Estate
gpuClasses:
  - {name: h100, memoryGb: 80, pricePerGpuHour: 2}
pools:
  - {name: p1, kind: kubernetes, capacity: 8, gpuClass: h100}
profiles:
  - {name: one-gpu, size: 1, pools: [p1]}
groups:
  - {name: ml}
  - {name: vision}
policies:
  - {group: ml, reservation: 4, limit: 8, computeResources: [{name: 1 GPU, profile: one-gpu}]}
  - {group: vision, reservation: 4, limit: 8, computeResources: [{name: 1 GPU, profile: one-gpu}]}
projects:
  - {name: fraud, group: ml}
  - {name: detect, group: vision}
  - {name: shared}
`

// env is a platform service over SQLite with two groups and their
// members, a fake upstream, and a gateway serving on loopback.
type env struct {
	t        testing.TB
	store    store.Store
	svc      *platform.Service
	auth     *identity.Authenticator
	up       *upstream
	gw       *gateway.Gateway
	srv      *httptest.Server
	limiter  limits.Limiter
	logs     *logBuffer
	admin    context.Context
	keys     map[string]string // user → API key
	adminKey string
}

// logBuffer keeps every log line, to look for secrets in.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

type envOption func(*envConfig)

type envConfig struct {
	limiter func(t testing.TB) limits.Limiter
	metrics *gateway.Metrics
	// now is the gateway's clock (default: the wall clock).
	now func() time.Time
	// noProviderKey leaves the provider's key out of the vault.
	noProviderKey bool
	// journal is the gateway's ledger journal directory ("": none).
	journal string
}

// clock is a test's clock for the gateway: it stands still unless the test
// moves it, so that a test that counts calls in a rate window (a minute)
// never sees the window end under it, and can end it when it wants to.
type clock = testclock.Clock

// newClock starts at the middle of this minute: near the wall clock, by
// which Redis drops the limiters' counters (an hour after their window)
// and the ledger is read.
func newClock() *clock {
	return testclock.New(time.Now().Truncate(time.Minute).Add(30 * time.Second))
}

// settleCounter is a limiter that counts the reservations settled on it,
// so that a test can wait for the gateway's settling, in the background,
// to catch up with the calls it answered.
type settleCounter struct {
	limits.Limiter
	n       atomic.Int64
	settled chan struct{} // a settlement was counted
}

func (c *settleCounter) Settle(ctx context.Context, r limits.Request, actual []int64) error {
	err := c.Limiter.Settle(ctx, r, actual)
	c.count(1)
	return err
}

// SettleBatch keeps the limiter's own batches (Redis's one round trip).
func (c *settleCounter) SettleBatch(ctx context.Context, batch []limits.Settlement) []error {
	errs := limits.SettleAll(ctx, c.Limiter, batch)
	c.count(len(batch))
	return errs
}

func (c *settleCounter) count(n int) {
	c.n.Add(int64(n))
	select {
	case c.settled <- struct{}{}:
	default:
	}
}

// wait waits until n reservations are settled.
func (c *settleCounter) wait(t testing.TB, n int64) {
	t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for c.n.Load() < n {
		select {
		case <-c.settled:
		case <-deadline.C:
			t.Fatalf("%d reservations settled, want %d", c.n.Load(), n)
		}
	}
}

// countSettlements puts the gateway's limiter, as the options before it
// chose it, in c.
func countSettlements(c *settleCounter) envOption {
	return func(cfg *envConfig) {
		inner := cfg.limiter
		cfg.limiter = func(t testing.TB) limits.Limiter {
			c.Limiter, c.settled = inner(t), make(chan struct{}, 1)
			return c
		}
	}
}

// withClock makes c the gateway's clock (Options.Now): the time of its
// calls on the ledger, and of their limit windows.
func withClock(c *clock) envOption {
	return func(cfg *envConfig) { cfg.now = c.Now }
}

// withoutProviderKey leaves the provider's key out of the tenant vault, as
// a fresh install has it.
func withoutProviderKey() envOption {
	return func(c *envConfig) { c.noProviderKey = true }
}

// withMetrics has the gateway count into m.
func withMetrics(m *gateway.Metrics) envOption {
	return func(c *envConfig) { c.metrics = m }
}

// withJournal gives the gateway a ledger journal in a directory of its own,
// as klique serve does.
func withJournal(t testing.TB) envOption {
	dir := t.TempDir()
	return func(c *envConfig) { c.journal = dir }
}

func withRedis() envOption {
	return func(c *envConfig) {
		c.limiter = func(t testing.TB) limits.Limiter {
			client, prefix := redistest.Require(t)
			return limits.NewRedis(client, prefix)
		}
	}
}

// backends runs fn with the in-process limiter and with Redis.
func backends(t *testing.T, fn func(t *testing.T, opts ...envOption)) {
	t.Run("memory", func(t *testing.T) { fn(t) })
	t.Run("redis", func(t *testing.T) { fn(t, withRedis()) })
}

// newEnv builds the world; configure sets the gateway configuration, given
// the upstream's URL.
func newEnv(t *testing.T, configure func(g *model.Gateway, upstreamURL string), opts ...envOption) *env {
	return newEnvTB(t, configure, opts...)
}

func newEnvTB(t testing.TB, configure func(g *model.Gateway, upstreamURL string), opts ...envOption) *env {
	t.Helper()
	cfg := envConfig{limiter: func(testing.TB) limits.Limiter { return limits.NewMemory() }}
	for _, o := range opts {
		o(&cfg)
	}
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "k.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	v, err := vault.New(bytes.Repeat([]byte{9}, 32))
	if err != nil {
		t.Fatal(err)
	}
	signer, err := identity.LoadOrCreateSigner(ctx, st, v, "https://klique.test", "klique", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, store: st, up: newUpstream(t), logs: &logBuffer{}, keys: map[string]string{}}
	log := slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e.auth = identity.NewAuthenticator(st, signer, nil, nil)
	setup := platform.New(platform.Options{Store: st, Auth: e.auth, Vault: v, Logger: log})
	e.adminKey, err = setup.Bootstrap(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	e.admin = e.signIn(e.adminKey)
	if _, err := setup.ApplyEstate(e.admin, []byte(testEstate), false); err != nil {
		t.Fatal(err)
	}
	for _, u := range []struct{ name, group string }{{"alice", "ml"}, {"bob", "ml"}, {"vic", "vision"}} {
		name, role := u.name, model.RoleMember
		if _, err := setup.CreateUser(e.admin, platform.UserInput{Name: &name, Role: &role,
			Groups: []platform.GroupGrantInput{{Group: u.group, Role: model.GroupRoleMember}}}); err != nil {
			t.Fatal(err)
		}
		_, secret, err := setup.CreateAPIKey(e.admin, platform.APIKeyInput{Name: "key", User: name})
		if err != nil {
			t.Fatal(err)
		}
		e.keys[name] = secret
	}
	if cfg.noProviderKey {
		// nothing in the vault
	} else if _, err := setup.SetSecret(e.admin, model.ScopeTenant, "", "OPENAI_API_KEY", providerKey); err != nil {
		t.Fatal(err)
	}
	var g model.Gateway
	configure(&g, e.up.URL+"/v1")
	must(t, st.InTx(ctx, func(q store.Queries) error {
		tenant := mustPrincipal(e.admin).TenantID
		if _, err := q.BumpEstateVersion(ctx, tenant); err != nil {
			return err
		}
		return q.PutGateway(ctx, tenant, &g, time.Now())
	}))
	// A service of its own, so that nothing of the setup is cached.
	e.svc = platform.New(platform.Options{Store: st, Auth: e.auth, Vault: v, Logger: log})
	e.limiter = cfg.limiter(t)
	e.gw = gateway.New(gateway.Options{Service: e.svc, Auth: e.auth, Limiter: e.limiter, Log: log, Metrics: cfg.metrics, Now: cfg.now,
		Journal: cfg.journal})
	e.srv = httptest.NewServer(e.gw)
	t.Cleanup(func() {
		e.srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = e.gw.Close(ctx)
	})
	return e
}

// providerKey is the public provider's key the vault holds.
const providerKey = "sk-test-0123456789abcdefghijklmnopqrstuv"

func (e *env) signIn(secret string) context.Context {
	p, err := e.auth.Authenticate(context.Background(), secret)
	if err != nil {
		e.t.Fatal(err)
	}
	return identity.WithPrincipal(context.Background(), p)
}

func mustPrincipal(ctx context.Context) *identity.Principal {
	p, _ := identity.PrincipalFrom(ctx)
	return p
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// response is a gateway answer.
type response struct {
	status int
	header http.Header
	body   string
}

func (r response) json(path string) gjson.Result { return gjson.Get(r.body, path) }

// post sends a call as user for project.
func (e *env) post(user, project, path, body string) response {
	e.t.Helper()
	r, err := e.postErr(user, project, path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// postErr is post for goroutines other than the test's: it returns a
// transport error rather than stopping the test.
func (e *env) postErr(user, project, path, body string) (response, error) {
	req, err := http.NewRequest(http.MethodPost, e.srv.URL+"/v1/"+path, strings.NewReader(body))
	if err != nil {
		return response{}, err
	}
	req.Header.Set("Authorization", "Bearer "+e.keys[user])
	if project != "" {
		req.Header.Set("X-Klique-Project", project)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: string(data)}, err
}

func chat(model string, extra string) string {
	return `{"model":"` + model + `","messages":[{"role":"user","content":"hello there"}]` + extra + `}`
}

// ledger waits for the gateway to record n calls and returns them, oldest
// first.
func (e *env) ledger(n int) []*model.ModelCall {
	e.t.Helper()
	tenant := mustPrincipal(e.admin).TenantID
	q := store.ModelUsageQuery{From: time.Now().Add(-time.Hour), To: time.Now().Add(time.Hour)}
	var calls []*model.ModelCall
	if !eventually.Poll(10*time.Second, func() bool {
		calls = nil
		page := store.Page{Limit: 1000}
		for {
			batch, err := e.store.ListModelCalls(context.Background(), tenant, q, page)
			must(e.t, err)
			calls = append(calls, batch...)
			if len(batch) < page.Limit {
				return len(calls) >= n
			}
			page.After = batch[len(batch)-1].ID
		}
	}) {
		e.t.Fatalf("%d calls on the ledger, want %d", len(calls), n)
	}
	slices.Reverse(calls)
	return calls
}

func dump(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// replica starts a second gateway over the same store and limiter, with
// platform and identity services of its own, and returns its URL.
func (e *env) replica() string {
	e.t.Helper()
	v, err := vault.New(bytes.Repeat([]byte{9}, 32))
	must(e.t, err)
	signer, err := identity.LoadOrCreateSigner(context.Background(), e.store, v, "https://klique.test", "klique", time.Hour)
	must(e.t, err)
	auth := identity.NewAuthenticator(e.store, signer, nil, nil)
	svc := platform.New(platform.Options{Store: e.store, Auth: auth, Vault: v})
	gw := gateway.New(gateway.Options{Service: svc, Auth: auth, Limiter: e.limiter})
	srv := httptest.NewServer(gw)
	e.t.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = gw.Close(ctx)
	})
	return srv.URL
}
