package gateway

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klique-ai/klique/gateway/wire"
	"github.com/klique-ai/klique/internal/guard"
	"github.com/klique-ai/klique/internal/model"
)

// Attempt is one upstream a call may go to: a model on a route endpoint or
// at a provider.
type Attempt struct {
	// Model is the configured model's name (for the ledger); Upstream the
	// id sent upstream.
	Model    string
	Upstream string
	// BaseURL is the endpoint or provider base, ending before the
	// operation (".../v1").
	BaseURL string
	// Key is the provider's API key, sent as a bearer token; empty for
	// routes. Never logged, never returned.
	Key     string
	Timeout time.Duration
	// Route names the static route the endpoint belongs to ("" for a
	// provider), for the balancer; Provider the provider.
	Route    string
	Provider string
	// API is what the upstream speaks (one of model.APIs): it chooses the
	// door's leg to it and how the key is sent.
	API string
	// MaxOutput is the most the model produces (its maxOutputTokens; 0
	// when it says none): the upstream is asked for no more.
	MaxOutput int64
}

// Outcome is what happened upstream.
type Outcome struct {
	// Attempt is the index of the attempt that answered (or the last
	// tried).
	Attempt int
	Status  int
	Usage   wire.Usage
	// Counted is true when the upstream said what the call used; false
	// when the gateway counted it (a client that went away mid-stream, or
	// a model server that reports no usage).
	Counted bool
	// Blocked names the guardrail rule that stopped the output.
	Blocked string
	// Disconnected is true when the caller went away before the end.
	Disconnected bool
	// Err is the last upstream failure when none answered, or what cut
	// off the answer of the one that did.
	Err error
	// Tried lists the failures of attempts before the one that answered.
	Tried []string
	// Unreachable counts the attempts skipped because the door has no way
	// to what their upstream speaks (door.leg): when it is every attempt,
	// the call is one no target of the alias can take, the caller's to
	// change, not a failure upstream.
	Unreachable int
	// Held is a stream's closing event (chat's "data: [DONE]"), held
	// back to be sent once the call is on the ledger.
	Held []byte
	// Text is the generated text of a whole answer, when the call asked
	// for it (call.wantText): what the model-based guardrail checks.
	Text string
}

// maxUpstreamBody bounds a non-streamed upstream answer the gateway reads.
const maxUpstreamBody = 64 << 20

// retryable says whether an upstream answer is a failure worth trying the
// next target for: server errors and overload, not the caller's mistakes.
func retryable(status int) bool {
	return status >= 500 || status == http.StatusTooManyRequests || status == http.StatusRequestTimeout
}

// proxy sends one call to its attempts in order until one answers, and
// writes the answer to w.
type proxy struct {
	transport http.RoundTripper
	balance   *balancer
	urls      sync.Map // urlKey → *url.URL
	nurls     atomic.Int64
}

// call is one proxied call's inputs.
type call struct {
	ep   wire.Endpoint
	body []byte
	req  wire.Call
	// guard checks the output; nil when there are no rules.
	guard *guard.Set
	// header is set on the caller's answer before it is written (rate
	// limit headers, request id).
	header http.Header
	// door writes the errors of the answer, and has the leg to each
	// upstream (see door).
	door door
	// in is the caller's request headers (an Anthropic caller's version
	// and betas go on to an Anthropic upstream).
	in http.Header
	// wantText asks for a whole answer's generated text in Outcome.Text.
	wantText bool
	// maxOut is the output bound the call reserved for each choice (0:
	// none, for embeddings), and bound this attempt's: maxOut, or the
	// attempt's model's own most when that is lower. A leg's request
	// asks the upstream for no more than bound (wire.BoundOutput).
	maxOut, bound int64
}

func (p *proxy) do(ctx context.Context, w http.ResponseWriter, c *call, attempts []Attempt) Outcome {
	var out Outcome
	for i, a := range attempts {
		out.Attempt = i
		lg, err := c.door.leg(c, a.API)
		if err != nil {
			// This door cannot reach what the upstream speaks: try the
			// next.
			out.Err = err
			out.Tried = append(out.Tried, fmt.Sprintf("%s: %v", a.Model, err))
			out.Unreachable++
			continue
		}
		c.bound = c.maxOut
		if a.MaxOutput > 0 && a.MaxOutput < c.bound {
			c.bound = a.MaxOutput
		}
		body, err := lg.request(c, a.Upstream)
		if err != nil {
			out.Err = fmt.Errorf("prepare the upstream body: %w", err)
			return out
		}
		resp, cancel, touch, err := p.send(ctx, a, lg, c, body)
		if err != nil {
			p.balance.failed(a)
			if ctx.Err() != nil {
				out.Disconnected = true
				out.Err = ctx.Err()
				return out
			}
			out.Err = err
			out.Tried = append(out.Tried, fmt.Sprintf("%s: %v", a.Model, err))
			continue
		}
		if retryable(resp.StatusCode) && i < len(attempts)-1 {
			p.balance.failed(a)
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
			cancel()
			out.Tried = append(out.Tried, fmt.Sprintf("%s: HTTP %d", a.Model, resp.StatusCode))
			continue
		}
		p.balance.succeeded(a)
		out.Status, out.Err = resp.StatusCode, nil // earlier attempts' failures are in Tried
		if c.req.Stream && resp.StatusCode == http.StatusOK {
			p.stream(ctx, w, c, lg, resp, &out, touch)
		} else {
			p.whole(w, c, lg, resp, &out, a.Key)
		}
		resp.Body.Close()
		cancel()
		return out
	}
	return out
}

// Upstream request headers, shared by every request: the transport only
// reads them.
var (
	jsonType   = []string{"application/json"}
	eventTypes = []string{"text/event-stream"}
)

// send makes one upstream request. The attempt's timeout bounds the wait
// for the answer's headers (for a stream, its first byte); the body of a
// non-streamed answer is read under the same deadline. A stream may take
// its time, but not go quiet: touch, called as each part of it arrives,
// starts the timeout again, and a stream that sends nothing for that long
// is cut.
//
// The request goes straight to the transport, not through http.Client:
// the client's redirect and cookie handling copies every request's headers
// and is of no use here (a model server does not redirect a POST), and
// each attempt carries its own deadline.
func (p *proxy) send(ctx context.Context, a Attempt, lg leg, c *call, body []byte) (resp *http.Response, done context.CancelFunc, touch func(), err error) {
	stream := c.req.Stream
	u, err := p.url(a.BaseURL, lg.op(c))
	if err != nil {
		return nil, nil, nil, err
	}
	actx, cancel := context.WithCancel(ctx)
	timeout := a.Timeout
	if timeout <= 0 {
		timeout = 60 * time.Second
	}
	timer := time.AfterFunc(timeout, cancel)
	h := make(http.Header, 4)
	h["Content-Type"] = jsonType
	if stream {
		h["Accept"] = eventTypes
	}
	switch {
	case a.API == model.APIAnthropic:
		// Anthropic's API takes its key in a header of its own, and
		// every request names the API version.
		if a.Key != "" {
			h["X-Api-Key"] = []string{a.Key}
		}
		h["Anthropic-Version"] = anthropicVersion
	case a.Key != "":
		h["Authorization"] = []string{"Bearer " + a.Key}
	}
	lg.header(h, c)
	req := (&http.Request{Method: http.MethodPost, URL: u, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: h,
		Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)), Host: u.Host,
		// GetBody lets the transport send the call again on another
		// connection when a kept-alive one turns out closed.
		GetBody: func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }}).WithContext(actx)
	resp, err = p.transport.RoundTrip(req)
	if err != nil {
		timer.Stop()
		cancel()
		if errors.Is(err, context.Canceled) && ctx.Err() == nil {
			return nil, nil, nil, fmt.Errorf("no answer within %s", timeout)
		}
		return nil, nil, nil, scrub(fmt.Errorf("POST %s: %w", u.Redacted(), err), a)
	}
	if stream {
		touch = func() { timer.Reset(timeout) }
		touch()
	}
	return resp, func() { timer.Stop(); cancel() }, touch, nil
}

// url returns the URL of an operation at a base URL, parsed once: the
// request gets a copy, which the transport may not change but could.
func (p *proxy) url(base string, ep wire.Endpoint) (*url.URL, error) {
	k := urlKey{base, ep}
	if v, ok := p.urls.Load(k); ok {
		u := *v.(*url.URL)
		return &u, nil
	}
	u, err := url.Parse(strings.TrimSuffix(base, "/") + "/" + string(ep))
	if err != nil {
		return nil, fmt.Errorf("upstream URL: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("upstream URL %s: not an http(s) URL", u.Redacted())
	}
	if p.nurls.Add(1) <= maxURLs {
		p.urls.Store(k, u)
	}
	c := *u
	return &c, nil
}

type urlKey struct {
	base string
	ep   wire.Endpoint
}

// maxURLs bounds the parsed URLs kept (a few per route endpoint and
// provider).
const maxURLs = 4096

// scrub keeps an upstream error from carrying the provider's key (a URL
// never holds it, but an error may quote a request).
func scrub(err error, a Attempt) error {
	if a.Key == "" || !strings.Contains(err.Error(), a.Key) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), a.Key, "[redacted]"))
}

// anthropicVersion is the Messages API version asked for when the caller
// names none.
var anthropicVersion = []string{"2023-06-01"}

// whole copies a non-streamed answer, through the leg, counting its usage
// and checking its output.
func (p *proxy) whole(w http.ResponseWriter, c *call, lg leg, resp *http.Response, out *Outcome, key string) {
	buf, err := readBody(resp.Body, maxUpstreamBody-1, resp.ContentLength)
	defer putBuffer(buf)
	data := buf.Bytes()
	if key != "" && resp.StatusCode != http.StatusOK && bytes.Contains(data, []byte(key)) {
		// A provider refusing a key may quote it; the caller never sees it.
		data = bytes.ReplaceAll(data, []byte(key), []byte("[redacted]"))
	}
	if err != nil {
		out.Err = fmt.Errorf("read the upstream answer: %w", err)
		out.Status = http.StatusBadGateway
		c.door.writeError(w, c.header, http.StatusBadGateway, "upstream_error", "the model's answer was cut off", "")
		return
	}
	wantText := c.wantText || !c.guard.Empty()
	data, u, counted, text := lg.answer(c, resp.StatusCode, data, wantText)
	if counted {
		out.Usage, out.Counted = u, true
	} else if resp.StatusCode == http.StatusOK {
		// The model server says nothing of usage (some self-hosted ones
		// do not): charge the prompt as estimated and the answer as
		// counted here (a token per byte, counting high), never nothing.
		out.Usage = wire.Usage{Input: c.req.InputTokens, Output: int64(len(text))}
	}
	if c.wantText && resp.StatusCode == http.StatusOK {
		out.Text = text
	}
	if resp.StatusCode == http.StatusOK && !c.guard.Empty() {
		if rule := c.guard.Output(text); rule != "" {
			out.Blocked = rule
			c.door.writeError(w, c.header, http.StatusBadRequest, "guardrail_blocked",
				"the model's answer was blocked by the guardrail "+rule, "")
			return
		}
	}
	h := w.Header()
	for k, v := range c.header {
		h[k] = v
	}
	h.Set("Content-Type", nonEmpty(resp.Header.Get("Content-Type"), "application/json"))
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(data)
}

func nonEmpty(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

var lineReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 16<<10) }}

// eventBufs hold one server-sent event as it is read.
var eventBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// stream copies a server-sent event stream as it comes, one event at a
// time through the leg's relay: passed through unchanged, or translated.
// Each event the caller gets is flushed at once. Output is checked as it
// arrives; a blocked stream ends with an error event. The stream's
// closing event is held back (Outcome.Held) until the call is on the
// ledger.
func (p *proxy) stream(ctx context.Context, w http.ResponseWriter, c *call, lg leg, resp *http.Response, out *Outcome, touch func()) {
	s := &eventStream{w: w, out: out, fl: startEventStream(w, c.header)}
	if !c.guard.Empty() {
		s.st = c.guard.Stream()
	}
	s.rl = lg.relay(c)
	br := lineReaders.Get().(*bufio.Reader)
	br.Reset(resp.Body)
	evp := eventBufs.Get().(*[]byte)
	defer func() { br.Reset(nil); lineReaders.Put(br); *evp = (*evp)[:0]; eventBufs.Put(evp) }()
	s.ev = (*evp)[:0]
	s.copy(ctx, br, touch)
	if !s.ended && out.Blocked == "" && !out.Disconnected && out.Err == nil {
		if o, held := s.rl.end(); len(o) > 0 || held != nil {
			_, _ = w.Write(o)
			out.Held = held
		}
	}
	*evp = s.ev[:0]
	s.flush()
	if !out.Counted {
		// The stream ended before its usage (the caller went away, or the
		// upstream stopped): charge what was produced as an answer
		// without usage is charged (a token per byte of its text, high
		// rather than low), and the prompt as the upstream said it, or
		// else as estimated.
		out.Usage = wire.Usage{Input: c.req.InputTokens, Output: s.produced}
		if s.saidInput {
			out.Usage = wire.Usage{Input: s.said.Input, Output: max(s.produced, s.said.Output)}
		}
	}
}

// startEventStream sends the caller the headers of an event stream (the
// call's own, then those that keep proxies from buffering it) and flushes
// them, so that the caller knows at once the stream has begun. It returns
// the writer's flusher, nil when it has none.
func startEventStream(w http.ResponseWriter, header http.Header) http.Flusher {
	h := w.Header()
	for k, v := range header {
		h[k] = v
	}
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	if fl != nil {
		fl.Flush()
	}
	return fl
}

// eventStream is one stream being copied: where it goes, what the relay
// and the guardrails make of it, the event being read, and what it said of
// its usage.
type eventStream struct {
	w   http.ResponseWriter
	fl  http.Flusher
	out *Outcome
	rl  relay
	st  *guard.Stream
	// produced is the bytes of generated text the stream carried;
	// said is the usage it said before its end (the input, and the
	// output so far), when saidInput.
	produced  int64
	said      wire.Usage
	saidInput bool
	// ev is the event being read; name and data are where its fields
	// are in it (a second data line is joined to the first, with a
	// newline, in joined).
	ev             []byte
	name, data     [2]int
	joined         []byte
	ended, stopped bool
	lastName       string
}

func (s *eventStream) flush() {
	if s.fl != nil {
		s.fl.Flush()
	}
}

// copy reads the upstream's lines until the stream ends, stops or is cut,
// taking each into the event being read. A stream cut before its end
// (not by the caller going away) gets an error event, so that the caller
// knows it was cut, not finished.
func (s *eventStream) copy(ctx context.Context, br *bufio.Reader, touch func()) {
	for !s.stopped {
		line, err := readEventLine(br)
		if len(line) > 0 {
			touch()
			s.take(line)
		}
		if err != nil {
			if len(s.ev) > 0 && !s.stopped {
				// An event the stream ended without its blank line.
				s.stopped = !s.dispatch()
			}
			if ctx.Err() != nil {
				s.out.Disconnected = true
			} else if err != io.EOF && !s.stopped {
				s.out.Err = fmt.Errorf("read the upstream stream: %w", err)
				// Tell the caller the stream was cut, not finished.
				_, _ = s.w.Write(s.rl.errorEvent(http.StatusBadGateway, "upstream_error", "the model's stream was cut off before its end"))
			}
			break
		}
	}
}

// readEventLine reads one line of the stream; a long event line, longer
// than the reader's buffer, is gathered whole.
func readEventLine(br *bufio.Reader) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		full := append([]byte(nil), line...)
		for err == bufio.ErrBufferFull {
			line, err = br.ReadSlice('\n')
			full = append(full, line...)
		}
		line = full
	}
	return line, err
}

// take adds one line to the event being read: its data (a second data
// line joined to the first) or its name; the blank line that ends an
// event dispatches it.
func (s *eventStream) take(line []byte) {
	start := len(s.ev)
	s.ev = append(s.ev, line...)
	field := bytes.TrimRight(s.ev[start:], "\r\n")
	switch {
	case len(field) == 0:
		// The blank line that ends an event.
		s.stopped = !s.dispatch()
	case bytes.HasPrefix(field, []byte("data:")):
		at := fieldValue(s.ev, start, len("data:"), len(field))
		switch {
		case s.data[1] == 0 && s.joined == nil:
			s.data = at
		case s.joined == nil:
			s.joined = append(append(append([]byte(nil), s.ev[s.data[0]:s.data[1]]...), '\n'), s.ev[at[0]:at[1]]...)
		default:
			s.joined = append(append(s.joined, '\n'), s.ev[at[0]:at[1]]...)
		}
	case bytes.HasPrefix(field, []byte("event:")):
		s.name = fieldValue(s.ev, start, len("event:"), len(field))
	}
}

// dispatch hands the event read to the relay and writes what the
// caller gets of it. It returns false when the stream is to stop.
func (s *eventStream) dispatch() bool {
	d := s.ev[s.data[0]:s.data[1]]
	if s.joined != nil {
		d = s.joined
	}
	// An event's name is one of a few a stream repeats: keep the last
	// as a string rather than make one per event.
	if n := s.ev[s.name[0]:s.name[1]]; string(n) != s.lastName {
		s.lastName = string(n)
	}
	// The event's text is checked before the relay takes the event:
	// what a translation has taken is the answer's, and its failure
	// event sends that back.
	if text := s.rl.text(s.lastName, d); text != "" {
		s.produced += int64(len(text))
		if s.st != nil {
			if rule := s.st.Add(text); rule != "" {
				s.out.Blocked = rule
				_, _ = s.w.Write(s.rl.errorEvent(http.StatusBadRequest, "guardrail_blocked", "the model's answer was blocked by the guardrail "+rule))
				s.out.Held = nil
				s.flush()
				return false
			}
		}
	}
	o, held, info := s.rl.event(s.ev, s.lastName, d)
	s.ev, s.name, s.data, s.joined = s.ev[:0], [2]int{}, [2]int{}, nil
	if held != nil {
		s.out.Held, s.ended = held, true
	}
	switch {
	case info.counted:
		s.out.Usage, s.out.Counted = info.usage, true
	case info.input:
		s.said, s.saidInput = info.usage, true
	}
	if len(o) > 0 {
		if _, err := s.w.Write(o); err != nil {
			s.out.Disconnected = true
			return false
		}
		s.flush()
	}
	return true
}

// fieldValue returns where the value of an event's field is in ev: after
// its name and the one space that may follow the colon, up to the line's
// end (n bytes from start, line ending excluded).
func fieldValue(ev []byte, start, prefix, n int) [2]int {
	from := start + prefix
	if from < start+n && ev[from] == ' ' {
		from++
	}
	return [2]int{from, start + n}
}

func hasChoices(data []byte) bool {
	i := bytes.Index(data, []byte(`"choices"`))
	if i < 0 {
		return false
	}
	rest := bytes.TrimLeft(data[i+len(`"choices"`):], " \t:")
	return !bytes.HasPrefix(rest, []byte("[]"))
}
