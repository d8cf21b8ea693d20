package gateway_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/klique-ai/klique/internal/model"
)

// A stream of 50 events of about 10 tokens each, then its usage: 500
// tokens out, 321 in (as Anthropic's upstreams and vLLM with a stream
// interval send them: several tokens an event).
const (
	cutEvents     = 50
	cutEventWords = " alpha bravo charlie delta echo foxtrot golf hotel india juliet"
	cutTokens     = 10 // an event's tokens
	cutInput      = 321
	cutOutput     = 500
)

func cutStream(path string) answer {
	var evs []string
	if path == "/v1/messages" {
		evs = append(evs,
			sse("message_start", fmt.Sprintf(`{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":%d,"output_tokens":1}}}`, cutInput)),
			sse("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`))
		for range cutEvents {
			evs = append(evs, sse("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"`+cutEventWords+`"}}`))
		}
		evs = append(evs,
			sse("content_block_stop", `{"type":"content_block_stop","index":0}`),
			sse("message_delta", fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":%d}}`, cutOutput)),
			sse("message_stop", `{"type":"message_stop"}`))
		return answer{events: evs, pause: 5 * time.Millisecond}
	}
	evs = append(evs, sse("", `{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`))
	for range cutEvents {
		evs = append(evs, sse("", `{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"`+cutEventWords+`"}}]}`))
	}
	evs = append(evs,
		sse("", `{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`),
		sse("", fmt.Sprintf(`{"id":"c","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`, cutInput, cutOutput, cutInput+cutOutput)),
		"data: [DONE]\n\n")
	return answer{events: evs, pause: 5 * time.Millisecond}
}

// readStream calls path with body as a stream and reads it until it has
// read stopAfter events with text (0: to its end), then hangs up.
func (e *env) readStream(path, body string, stopAfter int) int {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, e.srv.URL+"/v1/"+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+e.keys["alice"])
	req.Header.Set("X-Klique-Project", "fraud")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		e.t.Fatalf("the stream answered %d", resp.StatusCode)
	}
	n := 0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || !strings.Contains(gjson.Get(data, "choices.0.delta.content").Str+gjson.Get(data, "delta.text").Str, "alpha") {
			continue
		}
		if n++; n == stopAfter {
			cancel() // the caller hangs up
			break
		}
	}
	return n
}

// A caller who hangs up before a stream's usage is charged what was
// produced, counted as an answer without usage is (a token per byte of
// its text, high rather than low), and the input the stream already said
// (Anthropic's message_start) rather than the estimate: never less than
// the tokens it got. On the chat door and on the Messages door passed
// through to an Anthropic upstream, cut after 10, 25 and 40 of 50 events;
// the controls, read to the end, are charged the usage the stream said.
func TestACallerWhoHangsUpIsChargedWhatTheStreamProduced(t *testing.T) {
	m := newTextMock(t)
	m.setScript(func(path, _ string, _ gjson.Result) answer { return cutStream(path) })
	e := newEnv(t, textWorld(m))
	doors := []struct {
		name, path, body string
		// saysInput: the stream says its input before its end.
		saysInput bool
	}{
		{"chat", "chat/completions", `{"model":"pat-chat","stream":true,"messages":[{"role":"user","content":"tell me"}]}`, false},
		{"messages to anthropic", "messages", `{"model":"pat-anthropic","max_tokens":1000,"stream":true,"messages":[{"role":"user","content":"tell me"}]}`, true},
	}
	calls := 0
	for _, d := range doors {
		for _, cut := range []int{10, 25, 40, 0} {
			got := e.readStream(d.path, d.body, cut)
			calls++
			rec := e.ledger(calls)[calls-1]
			if cut == 0 {
				if got != cutEvents || rec.Outcome != model.CallOK || rec.InputTokens != cutInput || rec.OutputTokens != cutOutput {
					t.Errorf("%s read to the end (%d events): %s", d.name, got, dump(rec))
				}
				continue
			}
			// At least the tokens of the events the caller got, at most
			// the bytes of the whole stream's text.
			least, most := int64(cut*cutTokens), int64(cutEvents*len(cutEventWords))
			if rec.Outcome != model.CallDisconnected || rec.OutputTokens < least || rec.OutputTokens > most {
				t.Errorf("%s cut after %d events: charged %d output tokens, want %d to %d: %s", d.name, cut, rec.OutputTokens, least, most, dump(rec))
			}
			if d.saysInput && rec.InputTokens != cutInput || rec.InputTokens == 0 {
				t.Errorf("%s cut after %d events: charged %d input tokens, want the %d the stream said: %s", d.name, cut, rec.InputTokens, cutInput, dump(rec))
			}
		}
	}
}
