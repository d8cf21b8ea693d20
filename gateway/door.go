package gateway

import (
	"fmt"
	"net/http"
	"unsafe"

	"github.com/klique-ai/klique/gateway/wire"
	"github.com/klique-ai/klique/internal/model"
)

// door is an API shape calls come in by: how a request in that shape is
// decoded into the common call the stages work on, how it reaches an
// upstream (leg), and how a refusal is written back in it. OpenAI's chat
// completions, completions and embeddings share one door (openAI);
// Anthropic's Messages and OpenAI's Responses are doors of their own in
// front of the same stages, not copies of them.
type door interface {
	// decode reads a request body into x.req (what the stages read of the
	// call) and x.body (the body as the caller wrote it, which a leg sends
	// upstream or translates). x.ep is the operation called. The error is
	// for the caller, as it is.
	decode(x *exchange, body []byte) error
	// writeError answers with an error in the door's shape, after the
	// headers in extra. code and param are OpenAI's (see writeError), which
	// another door maps to its own.
	writeError(w http.ResponseWriter, extra http.Header, status int, code, message, param string)
	// leg says how the call goes to an upstream that speaks api (one of
	// model.APIs): passed through when the upstream speaks the door's own
	// API, translated when it does not. The error says why the call cannot
	// go there at all; that attempt is skipped, and the error is among the
	// failures the caller is told of when no attempt answers.
	leg(c *call, api string) (leg, error)
}

// leg is the way from a door to an upstream API: what is called there and
// with what body, and how its answer comes back to the caller. A
// pass-through leg sends the caller's bytes with only the model changed
// and gives the answer back as it came; a translation rewrites both.
type leg interface {
	// op is the operation called at the upstream's base URL.
	op(c *call) wire.Endpoint
	// request is the body sent upstream, with upstream as its model, its
	// output bounded by c.bound in the upstream API's own field (see
	// wire.BoundOutput), and for a stream, usage asked for where the API
	// must be asked.
	request(c *call, upstream string) ([]byte, error)
	// header adds the headers the upstream API needs beyond the
	// credential and the content type (Anthropic's version and betas).
	header(h http.Header, c *call)
	// answer reads a whole (not streamed) answer of any status: the body
	// the caller gets (data itself when passed through; an upstream's
	// error in the door's shape when translated), what the upstream says
	// the call used (counted false when it says nothing), and, when
	// wantText or when it says nothing of usage, the generated text:
	// what guardrails read and what is counted in usage's place.
	answer(c *call, status int, data []byte, wantText bool) (body []byte, u wire.Usage, counted bool, text string)
	// relay returns what turns one upstream stream into the caller's.
	relay(c *call) relay
}

// relay reads an upstream's server-sent events, one at a time, and says
// what the caller gets of each. For each event the proxy reads its text
// first, checks it, and only then hands the event to event: a blocked
// event is never part of what a relay (a translation) has produced, and
// so never in what it sends after (its failure event).
type relay interface {
	// text is the generated text an event carries (content, reasoning,
	// refusals, tool calls' names and arguments): what the guardrails
	// read, and what is counted when the stream ends before its usage. It
	// may be a view of a buffer the relay reuses, or of data: read at
	// once, never kept.
	text(name string, data []byte) string
	// event takes one event: raw is its bytes as they came (its lines and
	// the blank line ending it), name its "event:" field ("" when it has
	// none) and data its "data:" field. out is what the caller gets of it
	// now (raw itself when passed through; it may be a buffer the relay
	// reuses, valid until the next call). held is the stream's closing
	// event, kept back until the call is on the ledger (Gateway.serve): it
	// must stay valid after the stream, so it never refers to raw or a
	// buffer the relay reuses.
	event(raw []byte, name string, data []byte) (out, held []byte, info eventInfo)
	// end is called when the upstream's stream ended without its closing
	// event (cut off, or the caller went away): what a translation still
	// owes the caller, and the closing bytes to hold, if any.
	end() (out, held []byte)
	// errorEvent is an event saying the stream failed, in the door's
	// streaming shape: the answer was blocked by a guardrail, or the
	// upstream's stream was cut off.
	errorEvent(status int, code, message string) []byte
}

// eventInfo is what an upstream event says of the call's usage.
type eventInfo struct {
	// usage is what the upstream says the call used: all of it when
	// counted; when input, the prompt's count it said before its end
	// (Anthropic's message_start), and the output so far.
	usage   wire.Usage
	counted bool
	input   bool
}

// chatText reads the generated text of a chat completions stream's
// chunks (wire.AppendOutputText) into a buffer it reuses: the text of
// every upstream that speaks chat, passed through or translated.
type chatText struct{ buf []byte }

func (c *chatText) text(_ string, data []byte) string {
	if len(data) == 0 || data[0] != '{' {
		c.buf = c.buf[:0]
		return ""
	}
	c.buf = wire.AppendOutputText(c.buf[:0], data)
	return unsafe.String(unsafe.SliceData(c.buf), len(c.buf))
}

// openAI is the door of OpenAI's API: the request goes upstream as it came
// (the model patched in by the proxy), and errors are OpenAI's.
type openAI struct{}

func (openAI) decode(x *exchange, body []byte) error {
	req, err := wire.Parse(x.ep, body)
	x.req, x.body = req, body
	return err
}

func (openAI) writeError(w http.ResponseWriter, extra http.Header, status int, code, message, param string) {
	writeError(w, extra, status, code, message, param)
}

// leg: chat completions, completions and embeddings go as they came to
// anything that speaks OpenAI's API, whole or in part; an Anthropic
// upstream speaks none of them.
func (openAI) leg(c *call, api string) (leg, error) {
	if api == model.APIAnthropic {
		return nil, fmt.Errorf("it speaks Anthropic's Messages API, and /v1/%s calls are not translated to it: call /v1/messages, or send this alias to an OpenAI-compatible model", c.ep)
	}
	return openAIPass{completion: api == model.APIOpenAI}, nil
}

// openAIPass passes OpenAI calls through. completion is true for OpenAI's
// own API, where a chat call with no output bound of its own is given
// max_completion_tokens (its reasoning models refuse max_tokens); every
// other chat server is given max_tokens.
type openAIPass struct{ completion bool }

func (openAIPass) op(c *call) wire.Endpoint { return c.ep }

func (l openAIPass) request(c *call, upstream string) ([]byte, error) {
	body, err := wire.SetModel(c.body, upstream)
	if err == nil && c.req.Stream {
		body, err = wire.AskUsage(body)
	}
	if err == nil {
		body, err = wire.BoundOutput(body, c.ep, c.bound, l.completion)
	}
	return body, err
}

func (openAIPass) header(http.Header, *call) {}

func (openAIPass) answer(c *call, status int, data []byte, wantText bool) ([]byte, wire.Usage, bool, string) {
	u, counted := wire.UsageOf(data)
	return data, u, counted, chatAnswerText(status, data, wantText, counted)
}

// chatAnswerText is the generated text of a whole chat answer from the
// upstream (passed through or translated), when it is asked for or the
// answer says no usage: what the guardrails read, and what is counted in
// usage's place. It is read from the upstream's own answer, so that it is
// every field the model generated whatever a translation keeps of it.
func chatAnswerText(status int, data []byte, wantText, counted bool) string {
	if status != http.StatusOK || !wantText && counted {
		return ""
	}
	return wire.OutputText(data)
}

func (openAIPass) relay(c *call) relay { return &chatRelay{includeUsage: c.req.IncludeUsage} }

// chatRelay passes a chat completions or completions stream through. The
// gateway asks every stream for its usage; the chunk that says it is
// dropped unless the caller asked for it too.
type chatRelay struct {
	chatText
	includeUsage bool
}

func (r *chatRelay) event(raw []byte, _ string, data []byte) (out, held []byte, info eventInfo) {
	if string(data) == "[DONE]" {
		return nil, doneEvent, info
	}
	if len(data) == 0 || data[0] != '{' {
		return raw, nil, info
	}
	if u, ok := wire.UsageOf(data); ok {
		info.usage, info.counted = u, true
		// The usage chunk carries no choices; drop it unless the caller
		// asked for it. (r.buf is this event's text: text read it.)
		if !r.includeUsage && len(r.buf) == 0 && !hasChoices(data) {
			return nil, nil, info
		}
	}
	return raw, nil, info
}

func (*chatRelay) end() (out, held []byte) { return nil, nil }

func (*chatRelay) errorEvent(status int, code, message string) []byte {
	return fmt.Appendf(nil, "data: %s\n\n", errorJSONStatus(status, code, message, ""))
}
