package gateway

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/klique-ai/klique/gateway/wire"
	"github.com/klique-ai/klique/internal/model"
)

// recordingLeg passes every event through and records what the relay was
// given, as a door's leg sees a stream.
type recordingLeg struct {
	openAIPass
	events []string
	closed bool
}

func (l *recordingLeg) relay(*call) relay { return l }

func (l *recordingLeg) event(raw []byte, name string, data []byte) (out, held []byte, info eventInfo) {
	l.events = append(l.events, name+"|"+string(data)+"|"+string(raw))
	if name == "message_stop" {
		return nil, []byte("event: message_stop\n\n"), info
	}
	if strings.Contains(string(data), `"usage"`) {
		info.usage, info.counted = wire.Usage{Input: 3, Output: 4}, true
	}
	return raw, nil, info
}

func (l *recordingLeg) text(_ string, data []byte) string {
	if strings.Contains(string(data), "text") {
		return "t"
	}
	return ""
}

func (l *recordingLeg) end() (out, held []byte) { l.closed = true; return nil, nil }

func (l *recordingLeg) errorEvent(int, string, string) []byte { return []byte("event: error\n\n") }

// A stream is read event by event whatever its lines are like: named
// events, a payload over several data lines, comments, CRLF line ends
// and a last event the stream ends without its blank line. The relay
// gets each event whole, the caller what the relay gives back, and the
// closing event is held for after the ledger.
func TestTheStreamIsReadEventByEvent(t *testing.T) {
	upstream := "event: message_start\r\ndata: {\"type\":\"message_start\"}\r\n\r\n" +
		": a comment\n\n" +
		"event: content_block_delta\ndata: {\"text\":\ndata:\"hi\"}\n\n" +
		"data:{\"usage\":1}\n\n" +
		"event: message_stop\ndata: {}\n\n" +
		"data: {\"text\":\"late\"}"
	resp := &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader(upstream))}
	lg := &recordingLeg{}
	w := httptest.NewRecorder()
	var out Outcome
	(&proxy{}).stream(context.Background(), w, &call{}, lg, resp, &out, func() {})

	want := []string{
		"message_start|{\"type\":\"message_start\"}|event: message_start\r\ndata: {\"type\":\"message_start\"}\r\n\r\n",
		"||: a comment\n\n",
		"content_block_delta|{\"text\":\n\"hi\"}|event: content_block_delta\ndata: {\"text\":\ndata:\"hi\"}\n\n",
		"|{\"usage\":1}|data:{\"usage\":1}\n\n",
		"message_stop|{}|event: message_stop\ndata: {}\n\n",
		"|{\"text\":\"late\"}|data: {\"text\":\"late\"}",
	}
	if strings.Join(lg.events, "\n---\n") != strings.Join(want, "\n---\n") {
		t.Fatalf("the relay got\n%q\nwant\n%q", lg.events, want)
	}
	if got := w.Body.String(); got != strings.TrimSuffix(strings.Replace(upstream, "event: message_stop\ndata: {}\n\n", "", 1), "") {
		t.Fatalf("the caller got %q", got)
	}
	if string(out.Held) != "event: message_stop\n\n" || !out.Counted || out.Usage != (wire.Usage{Input: 3, Output: 4}) {
		t.Fatalf("the outcome: held %q, usage %+v counted %v", out.Held, out.Usage, out.Counted)
	}
	if lg.closed {
		t.Fatal("the relay was told the stream ended without its closing event")
	}
}

// A stream cut before its closing event asks the relay for what it
// still owes the caller.
func TestAStreamWithoutItsClosingEventIsEndedByTheRelay(t *testing.T) {
	resp := &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("data: {\"text\":\"a\"}\n\n"))}
	lg := &recordingLeg{}
	var out Outcome
	(&proxy{}).stream(context.Background(), httptest.NewRecorder(), &call{req: wire.Call{InputTokens: 9}}, lg, resp, &out, func() {})
	if !lg.closed || out.Held != nil || out.Counted || out.Usage != (wire.Usage{Input: 9, Output: 1}) {
		t.Fatalf("closed %v, held %q, usage %+v counted %v", lg.closed, out.Held, out.Usage, out.Counted)
	}
}

// An upstream the door cannot reach (chat completions to an Anthropic
// provider) is skipped with the reason, and the next target answers;
// each upstream gets its key the way its API takes it.
func TestAnUpstreamTheDoorCannotReachIsSkipped(t *testing.T) {
	var got []http.Header
	rt := &roundTrip{answer: func(r *http.Request) (*http.Response, error) {
		got = append(got, r.Header.Clone())
		return answers(r)
	}}
	p := &proxy{transport: rt, balance: newBalancer()}
	c := &call{ep: wire.Chat, body: []byte(`{"model":"chat","messages":[{"role":"user","content":"hi"}]}`), door: openAI{}}
	attempts := []Attempt{
		{Model: "claude", Upstream: "claude-x", BaseURL: "http://anthropic.test/v1", Key: "sk-ant", API: model.APIAnthropic, Provider: "anthropic"},
		{Model: "gpt", Upstream: "gpt-x", BaseURL: "http://openai.test/v1", Key: "sk-oai", API: model.APIOpenAI, Provider: "openai"},
	}
	w := httptest.NewRecorder()
	out := p.do(context.Background(), w, c, attempts)
	if out.Status != 200 || out.Attempt != 1 || len(out.Tried) != 1 || !strings.Contains(out.Tried[0], "claude: it speaks Anthropic's Messages API") {
		t.Fatalf("the outcome: %+v", out)
	}
	if len(got) != 1 || got[0].Get("Authorization") != "Bearer sk-oai" || got[0].Get("X-Api-Key") != "" {
		t.Fatalf("the upstream calls' headers: %v", got)
	}
	if rt.n.Load() != 1 {
		t.Fatalf("%d upstream calls, want 1", rt.n.Load())
	}
}
