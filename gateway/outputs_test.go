package gateway_test

import (
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/model"
)

// A model server that breaks its connection mid-stream leaves the caller
// an error event at the end of what was streamed (not a stream that looks
// finished), and the call on the ledger as an upstream error, charged what
// was produced.
func TestAStreamCutByTheUpstreamEndsWithAnErrorAndIsRecorded(t *testing.T) {
	e := newEnv(t, standard)
	e.up.set("meta/llama", behaviour{reply: strings.Repeat("word ", 20), cutAfter: 3})
	events, _ := e.stream("vic", "detect", chat("chat", `,"stream":true,"max_tokens":50`), 0)
	if len(events) != 4 || jsonField(events[3], "error.code") != "upstream_error" || jsonField(events[3], "error.type") != "api_error" ||
		!strings.Contains(jsonField(events[3], "error.message"), "cut off") {
		t.Fatalf("events %q, want three chunks and an error", events)
	}
	for _, ev := range events {
		if ev == "[DONE]" {
			t.Fatalf("a cut stream ended as if finished: %q", events)
		}
	}
	// Charged what the three chunks carried, a token a byte (no usage came).
	c := e.ledger(1)[0]
	if c.Outcome != model.CallUpstreamError || c.OutputTokens != int64(len("word word word")) || c.InputTokens == 0 || c.CostMicros == 0 {
		t.Fatalf("the call on the ledger: %s", dump(c))
	}
}

// Guardrails read what a model puts in its tool calls' arguments as they
// read its text: a denied pattern there blocks the answer.
func TestGuardrailsReadToolCallArguments(t *testing.T) {
	e := newEnv(t, func(g *model.Gateway, up string) {
		standard(g, up)
		g.Guardrails = model.Guardrails{Deny: []string{`(?i)\bpassword\s*[:=]`}}
	})
	e.up.set("meta/llama", behaviour{raw: `{"id":"chatcmpl-1","object":"chat.completion","model":"meta/llama","choices":[{"index":0,"message":{"role":"assistant","content":null,` +
		`"tool_calls":[{"id":"call_1","type":"function","function":{"name":"login","arguments":"{\"user\":\"bob\",\"password=hunter2\":1}"}}]},"finish_reason":"tool_calls"}],` +
		`"usage":{"prompt_tokens":9,"completion_tokens":12,"total_tokens":21}}`})
	r := e.post("vic", "detect", "chat/completions", chat("chat", ""))
	if r.status != 400 || r.json("error.code").Str != "guardrail_blocked" || strings.Contains(r.body, "hunter2") {
		t.Fatalf("a tool call with a denied pattern: %d %s", r.status, r.body)
	}
	if c := e.ledger(1)[0]; c.Outcome != model.CallBlocked || c.Guardrail == "" || c.OutputTokens != 12 {
		t.Fatalf("the call on the ledger: %s", dump(c))
	}
}

// A stream may take its time but not go quiet: the route's timeout bounds
// the wait for its first byte and then every wait between two of its
// parts, so a model server that hangs mid-answer does not hold the call
// (and its reservation) for ever.
func TestAStreamThatGoesQuietIsCut(t *testing.T) {
	e := newEnv(t, func(g *model.Gateway, up string) {
		standard(g, up)
		g.Routes[0].Timeout = 300 * time.Millisecond
	})
	// Six parts 100 ms apart take longer than the timeout, but never wait
	// as long: the stream finishes.
	e.up.set("meta/llama", behaviour{reply: "one two three four five six", chunkDelay: 100 * time.Millisecond})
	events, _ := e.stream("vic", "detect", chat("chat", `,"stream":true`), 0)
	if len(events) == 0 || events[len(events)-1] != "[DONE]" {
		t.Fatalf("a slow but steady stream: %q, want it finished", events)
	}
	// A part, then a second of silence: cut at the timeout.
	e.up.set("meta/llama", behaviour{reply: "one two three", chunkDelay: time.Second})
	events, _ = e.stream("vic", "detect", chat("chat", `,"stream":true`), 0)
	if len(events) != 2 || jsonField(events[1], "error.code") != "upstream_error" {
		t.Fatalf("a stream gone quiet: %q, want one part and an error", events)
	}
	calls := e.ledger(2)
	if c := calls[0]; c.Outcome != model.CallOK {
		t.Fatalf("the steady stream on the ledger: %s", dump(c))
	}
	if c := calls[1]; c.Outcome != model.CallUpstreamError || c.OutputTokens != int64(len("one")) {
		t.Fatalf("the quiet stream on the ledger: %s", dump(c))
	}
}
