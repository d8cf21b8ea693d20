package gateway

import (
	"errors"
	"net/http"
	"unsafe"

	"github.com/tidwall/gjson"

	"github.com/klique-ai/klique/gateway/translate"
	"github.com/klique-ai/klique/gateway/wire"
	"github.com/klique-ai/klique/internal/model"
)

// responsesDoor is the door of OpenAI's Responses API (POST /v1/responses),
// the API Codex CLI and OpenAI's Agents SDK speak. To an upstream whose
// API is openai the request goes as it came (the model patched in); to a
// chat completions upstream (openai-compatible: vLLM, SGLang, llama.cpp,
// NIM) it is translated, both ways, streams included (gateway/translate).
// Errors are OpenAI's, as on the chat door.
type responsesDoor struct{}

func (responsesDoor) decode(x *exchange, body []byte) error {
	req, err := wire.ParseResponses(body)
	x.req, x.body = req, body
	return err
}

// writeError writes OpenAI's error shape. A spent budget is 402 Payment
// Required here rather than the chat door's 429: Codex CLI answers every
// 429 with a message of its own ("Quota exceeded. Check your plan and
// billing details.", or a retry count) and drops the gateway's, which
// says which budget is spent and when it resets; a 402 it shows as sent.
// The code stays insufficient_quota, and no SDK retries a 402.
func (responsesDoor) writeError(w http.ResponseWriter, extra http.Header, status int, code, message, param string) {
	if status == http.StatusTooManyRequests && code == "insufficient_quota" {
		status = http.StatusPaymentRequired
	}
	writeError(w, extra, status, code, message, param)
}

// errNoMessagesLeg refuses a Responses call to an Anthropic upstream.
var errNoMessagesLeg = errors.New("the Responses API is not translated to Anthropic's Messages API: route the alias to an openai or openai-compatible upstream")

// leg passes the call through to OpenAI's own API and translates it for
// a chat completions one (the request is read again for each such
// attempt: a call has one or two). What a chat upstream cannot do
// (translate.ErrUntranslatable) skips the attempt with the reason.
func (responsesDoor) leg(c *call, api string) (leg, error) {
	switch api {
	case model.APIOpenAI:
		return responsesPass{}, nil
	case model.APIAnthropic:
		return nil, errNoMessagesLeg
	}
	tr, err := translate.ResponsesToChat(c.body)
	if err != nil {
		return nil, err
	}
	return &responsesChat{tr: tr}, nil
}

// responsesPass passes a Responses call through to an OpenAI upstream:
// raw bytes both ways, the usage read from the answer (a stream's from
// response.completed).
type responsesPass struct{}

func (responsesPass) op(*call) wire.Endpoint { return wire.Responses }

func (responsesPass) request(c *call, upstream string) ([]byte, error) {
	body, err := wire.SetModel(c.body, upstream)
	if err != nil {
		return nil, err
	}
	return wire.BoundOutput(body, wire.Responses, c.bound, false)
}

func (responsesPass) header(http.Header, *call) {}

func (responsesPass) answer(c *call, status int, data []byte, wantText bool) (body []byte, u wire.Usage, counted bool, text string) {
	if status == http.StatusOK {
		u, counted = wire.ResponsesUsage(data)
		if wantText || !counted {
			text = wire.ResponsesOutputText(data)
		}
	}
	return data, u, counted, text
}

func (responsesPass) relay(c *call) relay { return &responsesPassRelay{model: c.req.Model} }

// responsesPassRelay passes a Responses stream on as it comes, holding its
// terminal event (response.completed, .incomplete or .failed) back until
// the call is on the ledger, and reading the usage from it.
type responsesPassRelay struct {
	model string
	// events counts the events passed, for the sequence numbers of an
	// end the gateway writes itself.
	events int64
	closed bool
}

func (r *responsesPassRelay) event(raw []byte, name string, data []byte) (out, held []byte, info eventInfo) {
	if r.closed {
		return nil, nil, info
	}
	r.events++
	if name == "" {
		// Read in place: name is compared, never kept.
		name = gjson.Get(unsafe.String(unsafe.SliceData(data), len(data)), "type").Str
	}
	switch name {
	case "response.completed", "response.incomplete", "response.failed":
		info.usage, info.counted = wire.ResponsesUsage(data)
		r.closed = true
		// Held past the stream: a copy, not the reader's buffer.
		return nil, append([]byte(nil), raw...), info
	}
	return raw, nil, info
}

func (r *responsesPassRelay) text(name string, data []byte) string {
	if r.closed {
		return ""
	}
	return wire.ResponsesEventText(name, data)
}

func (r *responsesPassRelay) errorEvent(status int, code, message string) []byte {
	if r.closed {
		return nil
	}
	r.closed = true
	return translate.ResponsesFailure(r.model, r.events, code, message)
}

func (r *responsesPassRelay) end() (out, held []byte) {
	if r.closed {
		return nil, nil
	}
	r.closed = true
	return translate.ResponsesFailure(r.model, r.events, "upstream_error", "the model's stream was cut off before its end"), nil
}

// responsesChat translates a Responses call for a chat completions
// upstream.
type responsesChat struct{ tr *translate.ResponsesChat }

func (*responsesChat) op(*call) wire.Endpoint { return wire.Chat }

func (l *responsesChat) request(c *call, upstream string) ([]byte, error) {
	body, err := l.tr.Request(upstream)
	if err != nil {
		return nil, err
	}
	return wire.BoundOutput(body, wire.Chat, c.bound, false)
}

func (*responsesChat) header(http.Header, *call) {}

func (l *responsesChat) answer(_ *call, status int, data []byte, wantText bool) ([]byte, wire.Usage, bool, string) {
	body, u, counted := l.tr.Answer(status, data)
	return body, u, counted, chatAnswerText(status, data, wantText, counted)
}

func (l *responsesChat) relay(*call) relay { return &responsesChatRelay{s: l.tr.Stream()} }

type responsesChatRelay struct {
	chatText
	s *translate.ResponsesStream
}

func (r *responsesChatRelay) event(_ []byte, _ string, data []byte) (out, held []byte, info eventInfo) {
	out, held, info.usage, info.counted = r.s.Event(data)
	return out, held, info
}

func (r *responsesChatRelay) errorEvent(_ int, code, message string) []byte {
	return r.s.ErrorEvent(code, message)
}

func (r *responsesChatRelay) end() (out, held []byte) { return r.s.End() }
