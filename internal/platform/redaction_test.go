package platform_test

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/engine/loop"
	"github.com/klique-ai/klique/internal/agentapi"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
	"github.com/klique-ai/klique/internal/platform/platformtest"
)

// redactionSecret is the value of the secret the redaction tests' task
// names; it has characters that percent- and JSON-encoding change.
const redactionSecret = `hf_Sup3r/Secret+Value"x`

// leaks are the forms of redactionSecret a task may write, by name.
func leaks() map[string]string {
	s := redactionSecret
	rev := []byte(s)
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	// Embedded at each byte offset of a longer base64 blob.
	blob := func(k int) string {
		return base64.StdEncoding.EncodeToString([]byte(strings.Repeat("p", k) + "Authorization: Bearer " + s + " and more"))
	}
	return map[string]string{
		"plain":           s,
		"upper":           strings.ToUpper(s),
		"lower":           strings.ToLower(s),
		"reversed":        string(rev),
		"hex":             hex.EncodeToString([]byte(s)),
		"HEX":             strings.ToUpper(hex.EncodeToString([]byte(s))),
		"base64":          base64.StdEncoding.EncodeToString([]byte(s)),
		"base64url":       base64.URLEncoding.EncodeToString([]byte(s)),
		"base64raw":       base64.RawStdEncoding.EncodeToString([]byte(s)),
		"base64 blob 0":   blob(0),
		"base64 blob 1":   blob(1),
		"base64 blob 2":   blob(2),
		"url query":       url.QueryEscape(s),
		"url path":        url.PathEscape(s),
		"json":            `hf_Sup3r/Secret+Value\"x`,
		"json \\/ escape": `hf_Sup3r\/Secret+Value\"x`,
	}
}

// noLeak fails when text holds the secret in any form the test knows.
func noLeak(t *testing.T, where, text string) {
	t.Helper()
	probes := map[string]string{"plain": redactionSecret, "core": "Sup3r/Secret",
		"base64 core": base64.RawStdEncoding.EncodeToString([]byte("Sup3r/Secret")), "hex core": hex.EncodeToString([]byte("Sup3r/Secret"))}
	for name, form := range leaks() {
		probes[name] = form
	}
	for name, p := range probes {
		if strings.Contains(text, p) {
			t.Errorf("%s holds the secret (%s form): %q", where, name, text)
		}
	}
}

// runningWithSecret enqueues a task naming HF_TOKEN, places and claims it,
// and returns the worker's context and the assignment.
func runningWithSecret(t *testing.T, b *testBundle) (context.Context, *agentapi.Assignment) {
	t.Helper()
	b.ApplyExample(t)
	_, err := b.Svc.SetSecret(b.Admin, "tenant", "", "HF_TOKEN", redactionSecret)
	platformtest.Must(t, err)
	rita := b.User(t, "rita", model.RoleMember, "ml-research")
	task, err := b.Svc.EnqueueTask(rita, platform.EnqueueInput{Name: "leaky", Project: "fraud-models", ComputeResource: "1 A100",
		Spec: model.TaskSpec{Command: []string{"python", "leak.py"}, Secrets: []string{"HF_TOKEN"}}})
	platformtest.Must(t, err)
	eng := &loop.Loop{State: platform.EngineState{Store: b.Store}, Planner: b.Svc, Holder: "test"}
	_, err = eng.PassAll(context.Background())
	platformtest.Must(t, err)
	_, secret, err := b.Svc.CreateWorkerCredential(b.Admin, "bare-metal", "w")
	platformtest.Must(t, err)
	wk, err := b.Svc.AuthenticateWorker(context.Background(), secret)
	platformtest.Must(t, err)
	wctx := identity.WithWorker(context.Background(), wk)
	reg, err := b.Svc.RegisterWorker(wctx, agentapi.RegisterRequest{Hostname: "h1", GPUs: []agentapi.GPU{{Index: 0}}})
	platformtest.Must(t, err)
	a, err := b.Svc.ClaimTask(wctx, agentapi.ClaimRequest{WorkerID: reg.WorkerID, FreeGPUs: 1, WaitSeconds: 1})
	platformtest.Must(t, err)
	if a == nil || a.TaskID != task.ID {
		t.Fatalf("claimed %+v, want task %s", a, task.ID)
	}
	return wctx, a
}

// Every form of a secret a task writes into its log is cut out before the
// line is stored, one test line per form.
func TestSecretsAreRedactedFromLogsInEveryEncoding(t *testing.T) {
	forEachStore(t, func(t *testing.T, b *testBundle) {
		wctx, a := runningWithSecret(t, b)
		var lines []agentapi.LogLine
		var names []string
		for name, form := range leaks() {
			names = append(names, name)
			lines = append(lines, agentapi.LogLine{At: time.Now(), Stream: agentapi.StreamStdout, Line: "leak " + name + ": <" + form + ">", N: int64(len(lines) + 1)})
		}
		_, err := b.Svc.AppendLogs(wctx, a.TaskID, agentapi.LogsRequest{Attempt: a.Attempt, Lines: lines})
		platformtest.Must(t, err)
		stored, err := b.Store.ListLogs(context.Background(), b.Tenant, a.TaskID, 0, 1000, false)
		platformtest.Must(t, err)
		if len(stored) != len(lines) {
			t.Fatalf("%d lines stored, want %d", len(stored), len(lines))
		}
		for i, l := range stored {
			t.Run(names[i], func(t *testing.T) {
				noLeak(t, "log line "+names[i], l.Line)
				if !strings.Contains(l.Line, "[redacted]") || !strings.HasPrefix(l.Line, "leak "+names[i]+": <") {
					t.Errorf("log line %q: want the secret replaced by [redacted] and the rest kept", l.Line)
				}
			})
		}
	})
}

// A secret cut over two lines is found, in one batch and over two.
func TestASecretSplitOverLogLinesIsRedacted(t *testing.T) {
	forEachStore(t, func(t *testing.T, b *testBundle) {
		wctx, a := runningWithSecret(t, b)
		s, b64 := redactionSecret, base64.StdEncoding.EncodeToString([]byte(redactionSecret))
		send := func(n int64, lines ...string) {
			var ll []agentapi.LogLine
			for i, l := range lines {
				ll = append(ll, agentapi.LogLine{At: time.Now(), Stream: agentapi.StreamStdout, Line: l, N: n + int64(i)})
			}
			_, err := b.Svc.AppendLogs(wctx, a.TaskID, agentapi.LogsRequest{Attempt: a.Attempt, Lines: ll})
			platformtest.Must(t, err)
		}
		send(1, "token="+s[:7], s[7:]+" end", "b64="+b64[:10], b64[10:])
		send(5, "next token="+s[:9])
		send(6, s[9:]+" after")
		stored, err := b.Store.ListLogs(context.Background(), b.Tenant, a.TaskID, 0, 100, false)
		platformtest.Must(t, err)
		var all []string
		for _, l := range stored {
			all = append(all, l.Line)
		}
		joined := strings.Join(all, "")
		noLeak(t, "the joined log", joined)
		for _, piece := range []string{s[:7], s[7:], b64[:10], b64[10:], s[:9], s[9:]} {
			if strings.Contains(joined, piece) {
				t.Errorf("a piece of a split secret %q is in the log: %q", piece, all)
			}
		}
		if !strings.Contains(joined, " end") || !strings.Contains(joined, " after") || !strings.Contains(joined, "next token=") {
			t.Errorf("redaction took more than the secret: %q", all)
		}
	})
}

// Metric names, outputs and the message of a task's end (its reason and
// its audit entry) are redacted like its log.
func TestSecretsAreRedactedFromMetricsOutputsAndTheEnd(t *testing.T) {
	forEachStore(t, func(t *testing.T, b *testBundle) {
		wctx, a := runningWithSecret(t, b)
		lk := leaks()
		platformtest.Must(t, b.Svc.AppendMetrics(wctx, a.TaskID, agentapi.MetricsRequest{Attempt: a.Attempt, Points: []agentapi.MetricPoint{
			{At: time.Now(), Name: "loss/" + lk["plain"], Value: 1}, {At: time.Now(), Name: "acc/" + lk["hex"], Value: 2}}}))
		err := b.Svc.FinishTask(wctx, a.TaskID, agentapi.FinishRequest{Attempt: a.Attempt, State: agentapi.StateFailed, ExitCode: 1,
			Message: "auth failed with header Basic " + lk["base64"] + " (" + lk["upper"] + ")",
			Outputs: []string{"s3://bucket/" + url.PathEscape(redactionSecret), "token=" + lk["base64url"]}})
		platformtest.Must(t, err)
		ctx := context.Background()
		points, err := b.Store.ListMetrics(ctx, b.Tenant, a.TaskID, "", 0, 100)
		platformtest.Must(t, err)
		if len(points) != 2 {
			t.Fatalf("%d metric points stored, want 2", len(points))
		}
		for _, p := range points {
			noLeak(t, "metric name", p.Name)
		}
		task, err := b.Store.GetTask(ctx, b.Tenant, a.TaskID)
		platformtest.Must(t, err)
		noLeak(t, "reason", task.Reason)
		if !strings.Contains(task.Reason, "auth failed with header Basic [redacted]") {
			t.Errorf("reason %q: want the message kept with the secret redacted", task.Reason)
		}
		if len(task.Run.Outputs) != 2 {
			t.Fatalf("outputs %q", task.Run.Outputs)
		}
		for _, o := range task.Run.Outputs {
			noLeak(t, "output", o)
		}
		found := false
		for _, e := range b.AuditLog(t) {
			noLeak(t, "audit entry "+e.Action, e.Detail)
			found = found || e.Action == "task.failed"
		}
		if !found {
			t.Error("no task.failed audit entry")
		}
	})
}
