package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/klique-ai/klique/gateway/wire"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
)

// guardVerdict is what a model-based check said.
type guardVerdict struct {
	// Blocked is true when the guard alias judged the text unsafe.
	Blocked bool
	// Refusal is the guard alias's own refusal of the check (its rate
	// limit or the project's budget), to pass on to the caller as it is,
	// and Outcome its ledger outcome.
	Refusal *bufferWriter
	Outcome string
}

// modelGuard asks the guard alias whether text is safe: a model-based
// check (Llama Guard, NeMo/NIM guardrails) answers "safe" or "unsafe ...".
// The check is a call of the same caller, to the guard alias, governed
// like any other: reserved against the budgets and rate limits that cover
// the guard alias (so a guard model shared by many is protected too),
// settled to what it used, and recorded on the ledger.
func (g *Gateway) modelGuard(ctx context.Context, grant *platform.ModelGrant, text []string) (guardVerdict, error) {
	body, err := jsonChat(grant.GuardAlias, strings.Join(text, "\n"))
	if err != nil {
		return guardVerdict{}, err
	}
	start := g.o.Now()
	guard, err := g.o.Service.AuthorizeModelCall(ctx, grant.GuardAlias, grant.ProjectID, start)
	if err != nil {
		return guardVerdict{}, fmt.Errorf("guard alias %s: %s", grant.GuardAlias, platform.PublicMessage(err))
	}
	req, err := wire.Parse(wire.Chat, body)
	if err != nil {
		return guardVerdict{}, err
	}
	rec := &model.ModelCall{ID: model.NewID(), TenantID: grant.TenantID, At: start, UserID: grant.UserID, UserName: grant.UserName,
		ProjectID: grant.ProjectID, ProjectName: grant.ProjectName, GroupID: guard.GroupID, GroupName: guard.GroupName,
		Endpoint: string(wire.Chat), Alias: grant.GuardAlias}
	record := func(status int, outcome string) {
		rec.Status, rec.Outcome = status, outcome
		rec.LatencyMicros = g.o.Now().Sub(start).Microseconds()
		g.meter.record(rec)
	}
	refusal := &bufferWriter{header: http.Header{}}
	res, windows, ok := g.reserve(ctx, refusal, refusal.header, guard, &req, wire.Chat, rec.ID, start)
	if !ok {
		status, outcome := refused(ctx, guard, windows)
		record(status, outcome)
		if windows < 0 {
			return guardVerdict{}, fmt.Errorf("guard alias %s: its rate limits and budgets cannot be checked now", grant.GuardAlias)
		}
		return guardVerdict{Refusal: refusal, Outcome: outcome}, nil
	}
	answer := &bufferWriter{header: http.Header{}}
	attempts := g.attempts(guard)
	out := g.proxy.do(ctx, answer, &call{ep: wire.Chat, body: body, req: req, header: http.Header{}}, attempts)
	g.charge(guard, attempts, &out, res, rec)
	if out.Status != http.StatusOK {
		record(out.Status, model.CallUpstreamError)
		return guardVerdict{}, fmt.Errorf("guard alias %s answered %d", grant.GuardAlias, out.Status)
	}
	record(out.Status, model.CallOK)
	verdict := strings.ToLower(strings.TrimSpace(wire.OutputText(answer.buf.Bytes())))
	return guardVerdict{Blocked: strings.HasPrefix(verdict, "unsafe")}, nil
}

// modelCheck runs the model-based check on what (the request's input or
// the model's answer) and, unless it passes, answers the caller and
// finishes the call. It returns whether the call goes on. A check refused
// by the guard alias's own limits refuses the call with the same answer;
// a check that fails lets nothing through unchecked.
func (g *Gateway) modelCheck(ctx context.Context, w http.ResponseWriter, header http.Header, grant *platform.ModelGrant,
	rec *model.ModelCall, text []string, what, param string, finish func(status int, outcome string)) bool {
	v, err := g.modelGuard(ctx, grant, text)
	switch {
	case err != nil:
		writeError(w, header, http.StatusServiceUnavailable, "guardrail_unavailable",
			"the model-based guardrail could not check "+what+": "+err.Error(), "")
		finish(http.StatusServiceUnavailable, model.CallUpstreamError)
	case v.Refusal != nil:
		v.Refusal.passOn(w, header)
		finish(v.Refusal.status, v.Outcome)
	case v.Blocked:
		rec.Guardrail = "model check " + grant.GuardAlias
		writeError(w, header, http.StatusBadRequest, "guardrail_blocked",
			what+" was blocked by the model-based guardrail "+grant.GuardAlias, param)
		finish(http.StatusBadRequest, model.CallBlocked)
	default:
		return true
	}
	return false
}

// passOn writes an answer held in b to w, with the call's own headers.
func (b *bufferWriter) passOn(w http.ResponseWriter, header http.Header) {
	h := w.Header()
	for k, v := range b.header {
		h[k] = v
	}
	for k, v := range header {
		h[k] = v
	}
	w.WriteHeader(b.status)
	_, _ = w.Write(b.buf.Bytes())
}

// jsonChat builds a one-message chat request.
func jsonChat(alias, text string) ([]byte, error) {
	return json.Marshal(map[string]any{"model": alias, "max_tokens": 16,
		"messages": []map[string]string{{"role": "user", "content": text}}})
}

// bufferWriter is an http.ResponseWriter into memory.
type bufferWriter struct {
	header http.Header
	status int
	buf    bytes.Buffer
}

func (b *bufferWriter) Header() http.Header    { return b.header }
func (b *bufferWriter) WriteHeader(status int) { b.status = status }

func (b *bufferWriter) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.status = http.StatusOK
	}
	return b.buf.Write(p)
}
