package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/tidwall/gjson"

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
// settled to what it used, and recorded on the ledger. It goes through
// the stages that govern a call (reserve, settle, record) on an exchange
// of its own; its refusals are written in the checked call's door's
// shape, to be passed on as they are.
func (g *Gateway) modelGuard(x *exchange, text []string) (guardVerdict, error) {
	grant := x.grant
	body, err := jsonChat(grant.GuardAlias, guardPrompt(text))
	if err != nil {
		return guardVerdict{}, err
	}
	start := g.o.Now()
	guard, err := g.o.Service.AuthorizeModelCall(x.ctx, grant.GuardAlias, grant.ProjectID, start)
	if err != nil {
		return guardVerdict{}, fmt.Errorf("guard alias %s: %s", grant.GuardAlias, platform.PublicMessage(err))
	}
	req, err := wire.Parse(wire.Chat, body)
	if err != nil {
		return guardVerdict{}, err
	}
	// Not from the pool: the refusal's headers are the check's, and are
	// passed on after it.
	refusal := &bufferWriter{header: http.Header{}}
	check := &exchange{w: refusal, door: x.door, ep: wire.Chat, start: start, ctx: x.ctx, body: body, req: req,
		header: refusal.header, grant: guard, check: true,
		rec: &model.ModelCall{ID: model.NewID(), TenantID: grant.TenantID, At: start, UserID: grant.UserID, UserName: grant.UserName,
			ProjectID: grant.ProjectID, ProjectName: grant.ProjectName, GroupID: guard.GroupID, GroupName: guard.GroupName,
			Endpoint: string(wire.Chat), Alias: grant.GuardAlias}}
	if !g.reserve(check) {
		g.record(check)
		if check.outcome != model.CallOverBudget && check.outcome != model.CallRateLimited {
			return guardVerdict{}, fmt.Errorf("guard alias %s: its rate limits and budgets cannot be checked now", grant.GuardAlias)
		}
		return guardVerdict{Refusal: refusal, Outcome: check.outcome}, nil
	}
	answer := &bufferWriter{header: http.Header{}}
	check.attempts = g.attempts(nil, guard)
	// The check is a chat completions call whatever door the checked call
	// came by: its legs are OpenAI's (its refusals above are in the
	// caller's shape, as they reach the caller).
	check.c = call{ep: wire.Chat, body: body, req: check.req, door: openAI{}, maxOut: check.maxOut}
	check.out = g.proxy.do(x.ctx, answer, &check.c, check.attempts)
	g.settle(check)
	if check.out.Status != http.StatusOK {
		check.end(check.out.Status, model.CallUpstreamError)
		g.record(check)
		return guardVerdict{}, fmt.Errorf("guard alias %s answered %d", grant.GuardAlias, check.out.Status)
	}
	check.end(check.out.Status, model.CallOK)
	g.record(check)
	// The verdict is the answer's content: a guard model that reasons
	// first says so apart (reasoning_content), and what it thought is no
	// verdict.
	verdict := strings.ToLower(strings.TrimSpace(gjson.GetBytes(answer.buf.Bytes(), "choices.0.message.content").Str))
	return guardVerdict{Blocked: strings.HasPrefix(verdict, "unsafe")}, nil
}

// guardPrompt is what the guard model is shown of texts: each on a line
// of its own, as the pattern guardrails read them, but for the payload of
// a base64 data: URL (an inline image or file), which is no text to judge
// and could be megabytes: the model is shown the URL's media type and its
// size instead.
func guardPrompt(texts []string) string {
	var sb strings.Builder
	for i, t := range texts {
		if i > 0 {
			sb.WriteByte('\n')
		}
		if head, payload, ok := dataURL(t); ok {
			fmt.Fprintf(&sb, "%s[%d bytes of base64]", head, len(payload))
			continue
		}
		sb.WriteString(t)
	}
	return sb.String()
}

// dataURL splits a base64 data: URL into its head (up to and with the
// comma) and its payload.
func dataURL(s string) (head, payload string, ok bool) {
	if !strings.HasPrefix(s, "data:") {
		return "", "", false
	}
	i := strings.IndexByte(s, ',')
	if i < 0 || i > 256 || !strings.HasSuffix(s[:i], ";base64") {
		return "", "", false
	}
	return s[:i+1], s[i+1:], true
}

// modelCheck runs the model-based check on what (the request's input or
// the model's answer) and, unless it passes, answers the caller and ends
// the call. It returns whether the call goes on. A check refused by the
// guard alias's own limits refuses the call with the same answer; a check
// that fails lets nothing through unchecked.
func (g *Gateway) modelCheck(x *exchange, text []string, what, param string) bool {
	v, err := g.modelGuard(x, text)
	switch {
	case err != nil:
		x.door.writeError(x.w, x.header, http.StatusServiceUnavailable, "guardrail_unavailable",
			"the model-based guardrail could not check "+what+": "+err.Error(), "")
		x.end(http.StatusServiceUnavailable, model.CallUpstreamError)
	case v.Refusal != nil:
		v.Refusal.passOn(x.w, x.header)
		x.end(v.Refusal.status, v.Outcome)
	case v.Blocked:
		x.rec.Guardrail = "model check " + x.grant.GuardAlias
		x.door.writeError(x.w, x.header, http.StatusBadRequest, "guardrail_blocked",
			what+" was blocked by the model-based guardrail "+x.grant.GuardAlias, param)
		x.end(http.StatusBadRequest, model.CallBlocked)
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
