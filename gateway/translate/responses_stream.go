package translate

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/openai/openai-go/v3/responses"
	openai "github.com/sashabaranov/go-openai"
	"github.com/tidwall/gjson"

	"github.com/klique-ai/klique/gateway/wire"
)

// ResponsesStream turns one chat completion stream into a Responses
// stream: response.created and response.in_progress first, then for each
// output item (a message, or a function call) its output_item.added,
// content_part.added, the deltas, the .done events and output_item.done,
// and response.completed last with the usage (or response.incomplete
// when the answer ran out of tokens). Every event carries its
// sequence_number.
//
// The per-token events (output_text.delta, function_call_arguments.delta)
// are appended to a reused buffer, with the upstream's own JSON string of
// the delta copied as it came: decoding and encoding each of a stream's
// hundreds of chunks through the SDK's types would cost more than the
// rest of the call. Their fields are those of openai-go's
// ResponseTextDeltaEvent and ResponseFunctionCallArgumentsDeltaEvent (the
// tests decode them with the SDK); the events sent once per item or call
// are encoded from the SDK's types.
type ResponsesStream struct {
	t       *ResponsesChat
	buf     []byte
	seq     int64
	started bool
	// closed is set once the stream's terminal event was written.
	closed bool
	id     string
	// created is the Unix time of the response.
	created int64
	items   []responsesItem
	// open is the index of the message item text goes to, -1 when none.
	open   int
	finish string
	usage  *openai.Usage
}

type responsesItem struct {
	fn   bool
	id   string
	done bool
	// index is a function call's index among the chat tool calls.
	index        int64
	callID, name string
	// text is a message's text, or a function call's arguments.
	text strings.Builder
}

// Stream returns a translator for the chat stream answering t.
func (t *ResponsesChat) Stream() *ResponsesStream {
	return &ResponsesStream{t: t, open: -1, buf: make([]byte, 0, 1024)}
}

// Event translates one chat stream event, given its data ("[DONE]" or a
// chunk). out is what the caller gets now (a buffer reused by the next
// call); held is the stream's terminal event, for the gateway to send
// once the call is on the ledger. usage and counted are what the upstream
// said the call used, on the chunk that says it.
//
// What Event takes is the response's: its failure event (ErrorEvent)
// sends back what was produced. So a chunk a guardrail is to read is read
// before it is given here (its text is wire.OutputText's), and a chunk it
// blocks never is.
func (s *ResponsesStream) Event(data []byte) (out, held []byte, u wire.Usage, counted bool) {
	s.buf = s.buf[:0]
	if s.closed {
		return nil, nil, u, false
	}
	if string(data) == "[DONE]" {
		held = s.close()
		return s.buf, held, u, false
	}
	if len(data) == 0 || data[0] != '{' {
		return nil, nil, u, false
	}
	// One pass over the chunk's fields (readChatChunk), and one over its
	// first choice's.
	chunk := readChatChunk(data)
	choices, usage := chunk.choices, chunk.usage
	if chunk.err != "" {
		held = s.fail("upstream_error", "the model's server failed mid-stream: "+chunk.err)
		return s.buf, held, u, false
	}
	s.start()
	var content, toolCalls gjson.Result
	choices.ForEach(func(_, ch gjson.Result) bool {
		ch.ForEach(func(k, v gjson.Result) bool {
			switch k.Str {
			case "delta":
				v.ForEach(func(k, v gjson.Result) bool {
					switch k.Str {
					case "content":
						content = v
					case "tool_calls":
						toolCalls = v
					}
					return true
				})
			case "finish_reason":
				if v.Type == gjson.String {
					s.finish = v.Str
				}
			}
			return true
		})
		return false // the first choice: a Responses call asks for one
	})
	// The delta's JSON string goes to the caller as it came: it must be
	// one.
	if content.Type == gjson.String && content.Str != "" && gjson.Valid(content.Raw) {
		s.textDelta(content)
	}
	if toolCalls.IsArray() {
		toolCalls.ForEach(func(_, tc gjson.Result) bool {
			s.toolDelta(tc)
			return true
		})
	}
	if usage.IsObject() {
		var ou openai.Usage
		if json.Unmarshal([]byte(usage.Raw), &ou) == nil {
			s.usage = &ou
			ru := responsesUsage(&ou)
			u, counted = wire.Usage{Input: ru.InputTokens, Output: ru.OutputTokens}, true
		}
	}
	return s.buf, nil, u, counted
}

// End closes a stream that ended without its [DONE]: one that finished
// (a finish reason came) completes as usual; one cut off before fails,
// with what it produced. Nothing when the stream was closed already.
func (s *ResponsesStream) End() (out, held []byte) {
	s.buf = s.buf[:0]
	if s.closed {
		return nil, nil
	}
	if s.finish == "" {
		held = s.fail("upstream_error", "the model's stream was cut off before its end")
		return s.buf, held
	}
	held = s.close()
	return s.buf, held
}

// ErrorEvent ends the stream with an error, as a Responses stream carries
// one: an error event, then response.failed with the error and what was
// produced so far. Its bytes are the caller's now.
func (s *ResponsesStream) ErrorEvent(code, message string) []byte {
	s.buf = s.buf[:0]
	if s.closed {
		return nil
	}
	held := s.fail(code, message)
	return append(s.buf, held...)
}

// start writes response.created and response.in_progress once.
func (s *ResponsesStream) start() {
	if s.started {
		return
	}
	s.started = true
	s.id, s.created = responsesID("resp_"), time.Now().Unix()
	r := s.t.newResponse(s.id, s.created)
	s.event("response.created", &responsesEvent{Type: "response.created", Response: &r})
	s.event("response.in_progress", &responsesEvent{Type: "response.in_progress", Response: &r})
}

// textDelta writes a content delta, opening a message item first when
// none is open.
func (s *ResponsesStream) textDelta(c gjson.Result) {
	if s.open < 0 {
		s.items = append(s.items, responsesItem{id: responsesID("msg_")})
		s.open = len(s.items) - 1
		it := &s.items[s.open]
		s.event("response.output_item.added", &responsesItemEvent{Type: "response.output_item.added", OutputIndex: s.open,
			Item: responses.ResponseInputItemUnionParam{OfOutputMessage: responsesMessage(it.id, "", false)}})
		s.event("response.content_part.added", &responsesPartEvent{Type: "response.content_part.added", ItemID: it.id, OutputIndex: s.open,
			Part: *responsesOutputText("")})
	}
	it := &s.items[s.open]
	it.text.WriteString(c.Str)
	s.buf = append(s.buf, "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":"...)
	s.buf = strconv.AppendInt(s.buf, s.next(), 10)
	s.buf = append(s.buf, ",\"item_id\":\""...)
	s.buf = append(s.buf, it.id...)
	s.buf = append(s.buf, "\",\"output_index\":"...)
	s.buf = strconv.AppendInt(s.buf, int64(s.open), 10)
	s.buf = append(s.buf, ",\"content_index\":0,\"delta\":"...)
	s.buf = append(s.buf, c.Raw...)
	s.buf = append(s.buf, ",\"logprobs\":[]}\n\n"...)
}

// toolDelta writes a tool call's part: a new call opens a function_call
// item (closing the items before it); arguments are a delta.
func (s *ResponsesStream) toolDelta(tc gjson.Result) {
	index := tc.Get("index").Int()
	at := -1
	for i := range s.items {
		if s.items[i].fn && s.items[i].index == index && !s.items[i].done {
			at = i
		}
	}
	if at < 0 {
		// Items are streamed one after another: a new call closes the
		// items before it.
		s.closeItems()
		callID := tc.Get("id").Str
		if callID == "" {
			callID = responsesID("call_")
		}
		s.items = append(s.items, responsesItem{fn: true, id: responsesID("fc_"), index: index, callID: callID, name: tc.Get("function.name").Str})
		at = len(s.items) - 1
		it := &s.items[at]
		s.event("response.output_item.added", &responsesItemEvent{Type: "response.output_item.added", OutputIndex: at,
			Item: responses.ResponseInputItemUnionParam{OfFunctionCall: s.t.function(it.id, it.callID, it.name, "", false)}})
	}
	a := tc.Get("function.arguments")
	if a.Type != gjson.String || a.Str == "" || !gjson.Valid(a.Raw) {
		return
	}
	it := &s.items[at]
	it.text.WriteString(a.Str)
	s.buf = append(s.buf, "event: response.function_call_arguments.delta\ndata: {\"type\":\"response.function_call_arguments.delta\",\"sequence_number\":"...)
	s.buf = strconv.AppendInt(s.buf, s.next(), 10)
	s.buf = append(s.buf, ",\"item_id\":\""...)
	s.buf = append(s.buf, it.id...)
	s.buf = append(s.buf, "\",\"output_index\":"...)
	s.buf = strconv.AppendInt(s.buf, int64(at), 10)
	s.buf = append(s.buf, ",\"delta\":"...)
	s.buf = append(s.buf, a.Raw...)
	s.buf = append(s.buf, "}\n\n"...)
}

// closeMessage writes the open message's .done events.
func (s *ResponsesStream) closeMessage() {
	if s.open < 0 {
		return
	}
	i := s.open
	it := &s.items[i]
	text := it.text.String()
	s.event("response.output_text.done", &responses.ResponseTextDoneEvent{ItemID: it.id, OutputIndex: int64(i), Text: text,
		Logprobs: []responses.ResponseTextDoneEventLogprob{}, SequenceNumber: s.peek()})
	s.event("response.content_part.done", &responsesPartEvent{Type: "response.content_part.done", ItemID: it.id, OutputIndex: i, Part: *responsesOutputText(text)})
	s.event("response.output_item.done", &responsesItemEvent{Type: "response.output_item.done", OutputIndex: i,
		Item: responses.ResponseInputItemUnionParam{OfOutputMessage: responsesMessage(it.id, text, true)}})
	it.done, s.open = true, -1
}

// closeItems writes the .done events of every item still open.
func (s *ResponsesStream) closeItems() {
	s.closeMessage()
	for i := range s.items {
		it := &s.items[i]
		if it.done {
			continue
		}
		args := it.text.String()
		s.event("response.function_call_arguments.done", &responses.ResponseFunctionCallArgumentsDoneEvent{ItemID: it.id,
			OutputIndex: int64(i), Arguments: args, SequenceNumber: s.peek()})
		s.event("response.output_item.done", &responsesItemEvent{Type: "response.output_item.done", OutputIndex: i,
			Item: responses.ResponseInputItemUnionParam{OfFunctionCall: s.t.function(it.id, it.callID, it.name, args, true)}})
		it.done = true
	}
}

// close writes the closing item events into s.buf and returns the
// terminal event (response.completed, or response.incomplete), which the
// gateway holds back until the call is on the ledger.
func (s *ResponsesStream) close() []byte {
	s.start()
	s.closeItems()
	r := s.snapshot()
	r.Status, r.IncompleteDetails = responsesStatus(s.finish)
	typ := "response.completed"
	if r.Status == responses.ResponseStatusIncomplete {
		typ = "response.incomplete"
	}
	return s.terminal(typ, &r)
}

// fail writes the error event into s.buf and returns response.failed.
func (s *ResponsesStream) fail(code, message string) []byte {
	s.start()
	s.event("error", &responses.ResponseErrorEvent{Code: code, Message: message, SequenceNumber: s.peek()})
	r := s.snapshot()
	r.Status, r.Error = responses.ResponseStatusFailed, &responsesError{Code: code, Message: message}
	return s.terminal("response.failed", &r)
}

// terminal encodes the stream's last event apart from s.buf, and closes
// the stream.
func (s *ResponsesStream) terminal(typ string, r *responseObject) []byte {
	n := len(s.buf)
	s.event(typ, &responsesEvent{Type: typ, Response: r})
	held := append([]byte(nil), s.buf[n:]...)
	s.buf = s.buf[:n]
	s.closed = true
	return held
}

// snapshot is the response as the stream has produced it so far.
func (s *ResponsesStream) snapshot() responseObject {
	r := s.t.newResponse(s.id, s.created)
	for i := range s.items {
		it := &s.items[i]
		if it.fn {
			r.Output = append(r.Output, responses.ResponseInputItemUnionParam{OfFunctionCall: s.t.function(it.id, it.callID, it.name, it.text.String(), true)})
		} else {
			r.Output = append(r.Output, responses.ResponseInputItemUnionParam{OfOutputMessage: responsesMessage(it.id, it.text.String(), true)})
		}
	}
	r.Usage = responsesUsage(s.usage)
	return r
}

func (s *ResponsesStream) next() int64 { s.seq++; return s.seq - 1 }
func (s *ResponsesStream) peek() int64 { return s.seq }

// responsesSequenced is an event whose sequence number event sets.
type responsesSequenced interface{ setSeq(int64) }

// event appends one event, its sequence number the next.
func (s *ResponsesStream) event(typ string, v any) {
	if e, ok := v.(responsesSequenced); ok {
		e.setSeq(s.seq)
	}
	s.seq++
	data, err := json.Marshal(v)
	if err != nil {
		data = responsesErrorJSON("upstream_error", "an event could not be encoded: "+err.Error(), "server_error")
	}
	s.buf = append(s.buf, "event: "...)
	s.buf = append(s.buf, typ...)
	s.buf = append(s.buf, "\ndata: "...)
	s.buf = append(s.buf, data...)
	s.buf = append(s.buf, "\n\n"...)
}

// The envelopes of the events that carry an item, a part or the whole
// response: openai-go's event types hold those as decoding unions, which
// marshal every variant's fields.
type responsesEvent struct {
	Type           string          `json:"type"`
	SequenceNumber int64           `json:"sequence_number"`
	Response       *responseObject `json:"response"`
}

type responsesItemEvent struct {
	Type           string                                `json:"type"`
	SequenceNumber int64                                 `json:"sequence_number"`
	OutputIndex    int                                   `json:"output_index"`
	Item           responses.ResponseInputItemUnionParam `json:"item"`
}

type responsesPartEvent struct {
	Type           string                            `json:"type"`
	SequenceNumber int64                             `json:"sequence_number"`
	ItemID         string                            `json:"item_id"`
	OutputIndex    int                               `json:"output_index"`
	ContentIndex   int                               `json:"content_index"`
	Part           responses.ResponseOutputTextParam `json:"part"`
}

func (e *responsesEvent) setSeq(n int64)     { e.SequenceNumber = n }
func (e *responsesItemEvent) setSeq(n int64) { e.SequenceNumber = n }
func (e *responsesPartEvent) setSeq(n int64) { e.SequenceNumber = n }

// ResponsesFailure is the end of a Responses stream the gateway did not
// translate (a pass-through from an OpenAI upstream) when it has to end
// it itself: an error event and response.failed, numbered on from seq
// (the events the caller got so far).
func ResponsesFailure(model string, seq int64, code, message string) []byte {
	s := &ResponsesStream{t: &ResponsesChat{model: model}, open: -1, started: true, seq: seq, id: responsesID("resp_"), created: time.Now().Unix()}
	return s.ErrorEvent(code, message)
}
