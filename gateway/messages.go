package gateway

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/klique-ai/klique/gateway/translate"
	"github.com/klique-ai/klique/gateway/wire"
	"github.com/klique-ai/klique/internal/model"
)

// messagesDoor is the door of Anthropic's Messages API (POST
// /v1/messages), the API Claude Code speaks. A call passes through, as the
// caller wrote it but for the model, to an upstream that speaks Messages
// (api: anthropic), and is translated to chat completions for any other
// (vLLM, SGLang, OpenAI); what a chat upstream cannot do is refused (see
// translate.MessagesToChat). Refusals are in Anthropic's error shape.
type messagesDoor struct{}

func (messagesDoor) decode(x *exchange, body []byte) error {
	req, err := wire.ParseMessages(body, false)
	x.req, x.body = req, body
	return err
}

// writeError answers in Anthropic's shape: its error type follows the
// status (translate.ErrorType); OpenAI's code and param have no place in
// it, and the message says what the code would.
func (messagesDoor) writeError(w http.ResponseWriter, extra http.Header, status int, _, message, _ string) {
	writeMessagesError(w, extra, status, message)
}

func writeMessagesError(w http.ResponseWriter, extra http.Header, status int, message string) {
	h := w.Header()
	for k, v := range extra {
		h[k] = v
	}
	body := translate.ErrorBody(status, message)
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// leg: passed through to an upstream that speaks Messages; translated to
// chat completions for any other. A request a chat upstream cannot take
// (a server tool, MCP servers) cannot go there, and the attempt is
// skipped with the reason.
func (messagesDoor) leg(c *call, api string) (leg, error) {
	if api == model.APIAnthropic {
		return messagesPass{}, nil
	}
	body, err := translate.MessagesToChat(c.body, "", c.req.Stream)
	if err != nil {
		return nil, err
	}
	return &messagesToChat{body: body}, nil
}

// messagesPass is a Messages call to an upstream that speaks Messages:
// the body as the caller wrote it but for the model, the caller's
// anthropic-version and anthropic-beta headers, and the answer as it
// comes.
type messagesPass struct{}

func (messagesPass) op(*call) wire.Endpoint { return wire.Messages }

func (messagesPass) request(c *call, upstream string) ([]byte, error) {
	body, err := wire.SetModel(c.body, upstream)
	if err != nil {
		return nil, err
	}
	return wire.BoundOutput(body, wire.Messages, c.bound, false)
}

// header passes on the caller's API version (the proxy's default
// otherwise) and betas. The caller's header values are shared, not
// copied: the transport only reads them.
func (messagesPass) header(h http.Header, c *call) {
	if v := c.in["Anthropic-Version"]; len(v) > 0 {
		h["Anthropic-Version"] = v
	}
	if v := c.in["Anthropic-Beta"]; len(v) > 0 {
		h["Anthropic-Beta"] = v
	}
}

func (messagesPass) answer(c *call, status int, data []byte, wantText bool) ([]byte, wire.Usage, bool, string) {
	if status != http.StatusOK {
		return data, wire.Usage{}, false, ""
	}
	u, counted := wire.MessagesUsage(data)
	var text string
	if wantText || !counted {
		text = wire.MessagesOutputText(data)
	}
	return data, u, counted, text
}

func (messagesPass) relay(*call) relay { return &messagesPassRelay{} }

// messagesPassRelay passes a Messages stream through, reading its usage
// (the input in message_start, the output in message_delta) and holding
// back its message_stop until the call is on the ledger.
type messagesPassRelay struct {
	usage wire.Usage
	// input is set once message_start said the input, and counted once
	// message_delta said the output.
	input, counted bool
}

func (*messagesPassRelay) text(name string, data []byte) string {
	return wire.MessagesEventText(name, data)
}

func (r *messagesPassRelay) event(raw []byte, name string, data []byte) (out, held []byte, info eventInfo) {
	in, output, hasIn, hasOut := wire.MessagesEventUsage(name, data)
	if hasIn {
		r.usage.Input, r.input = in, true
	}
	if hasOut {
		r.usage.Output = output
		if name == "message_delta" {
			r.counted = true
		}
	}
	info.usage, info.counted, info.input = r.usage, r.counted, r.input
	if name == "message_stop" {
		return nil, messageStop, info
	}
	return raw, nil, info
}

// messageStop ends a Messages stream (held: it must outlive the relay's
// buffers).
var messageStop = []byte("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")

func (*messagesPassRelay) errorEvent(status int, _, message string) []byte {
	return translate.ErrorEvent(status, message)
}

// end owes the caller nothing: the upstream's stream is passed on as it
// was.
func (*messagesPassRelay) end() (out, held []byte) { return nil, nil }

// messagesToChat is a Messages call to a chat completions upstream: the
// request translated once per call, each answer translated back.
type messagesToChat struct{ body []byte }

func (*messagesToChat) op(*call) wire.Endpoint { return wire.Chat }

func (l *messagesToChat) request(c *call, upstream string) ([]byte, error) {
	body, err := wire.SetModel(l.body, upstream)
	if err != nil {
		return nil, err
	}
	return wire.BoundOutput(body, wire.Chat, c.bound, false)
}

func (*messagesToChat) header(http.Header, *call) {}

func (*messagesToChat) answer(c *call, status int, data []byte, wantText bool) ([]byte, wire.Usage, bool, string) {
	body, u, counted := translate.ChatToMessages(status, data, c.req.Model)
	return body, u, counted, chatAnswerText(status, data, wantText, counted)
}

func (*messagesToChat) relay(c *call) relay {
	return &chatToMessagesRelay{s: translate.NewChatToMessagesStream(c.req.Model)}
}

// chatToMessagesRelay translates a chat stream into a Messages stream as
// it comes (translate.ChatToMessagesStream).
type chatToMessagesRelay struct {
	chatText
	s *translate.ChatToMessagesStream
}

func (r *chatToMessagesRelay) event(_ []byte, _ string, data []byte) (out, held []byte, info eventInfo) {
	out, held, info.usage, info.counted = r.s.Chunk(data)
	return out, held, info
}

func (*chatToMessagesRelay) errorEvent(status int, _, message string) []byte {
	return translate.ErrorEvent(status, message)
}

func (r *chatToMessagesRelay) end() (out, held []byte) { return r.s.End() }

// countTokens answers POST /v1/messages/count_tokens: authenticated and
// resolved as a call is (the caller's alias rules, the project), checked
// by the pattern guardrails, not charged and not on the ledger. When the
// alias's first target speaks Messages, the count is its provider's
// (the request passed through); otherwise it is the gateway's own upper
// bound, the one a call reserves (wire.ParseMessages, estimate).
func (g *Gateway) countTokens(w http.ResponseWriter, r *http.Request) {
	d := messagesDoor{}
	ctx, ok := g.caller(w, r, d)
	if !ok {
		return
	}
	buf, err := readBody(r.Body, g.o.MaxBody, r.ContentLength)
	defer putBuffer(buf)
	if err != nil || int64(buf.Len()) > g.o.MaxBody {
		writeMessagesError(w, nil, http.StatusBadRequest, fmt.Sprintf("could not read the request body (at most %d bytes)", g.o.MaxBody))
		return
	}
	body := buf.Bytes()
	req, err := wire.ParseMessages(body, true)
	if err != nil {
		writeMessagesError(w, nil, http.StatusBadRequest, err.Error())
		return
	}
	grant, err := g.o.Service.AuthorizeModelCall(ctx, req.Model, r.Header.Get("X-Klique-Project"), g.o.Now())
	if err != nil {
		g.platformError(w, nil, d, err)
		return
	}
	if rule := grant.Guard.Input(req.Input); rule != "" {
		writeMessagesError(w, nil, http.StatusBadRequest, "the request was blocked by the guardrail "+rule)
		return
	}
	attempts := g.attempts(nil, grant)
	if len(attempts) > 0 && attempts[0].API == model.APIAnthropic {
		g.countUpstream(ctx, w, r, attempts[0], body)
		return
	}
	// The prompt's bound as a call reserves it: its images and documents
	// counted for the alias's models.
	out := strconv.AppendInt([]byte(`{"input_tokens":`), estimate(grant, &req, wire.Messages).input, 10)
	out = append(out, '}')
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(out)
}

// countUpstream passes a count_tokens request to an Anthropic upstream,
// with the model its id there, and its answer back (a key it quotes cut
// out).
func (g *Gateway) countUpstream(ctx context.Context, w http.ResponseWriter, r *http.Request, a Attempt, body []byte) {
	body, err := wire.SetModel(body, a.Upstream)
	if err != nil {
		writeMessagesError(w, nil, http.StatusBadRequest, "the request body: "+err.Error())
		return
	}
	timeout := a.Timeout
	if timeout <= 0 {
		timeout = 60 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	url := strings.TrimSuffix(a.BaseURL, "/") + "/messages/count_tokens"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		writeMessagesError(w, nil, http.StatusBadGateway, "the provider's URL is not valid")
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header["Anthropic-Version"] = anthropicVersion
	messagesPass{}.header(req.Header, &call{in: r.Header})
	if a.Key != "" {
		req.Header.Set("X-Api-Key", a.Key)
	}
	resp, err := g.proxy.transport.RoundTrip(req)
	if err != nil {
		writeMessagesError(w, nil, http.StatusBadGateway, "counting at "+a.Provider+" failed: "+scrub(err, a).Error())
		return
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		writeMessagesError(w, nil, http.StatusBadGateway, "counting at "+a.Provider+" was cut off")
		return
	}
	if a.Key != "" {
		data = bytes.ReplaceAll(data, []byte(a.Key), []byte("[redacted]"))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(data)
}
