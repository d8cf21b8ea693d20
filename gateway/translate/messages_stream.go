package translate

import (
	"bytes"
	"strconv"

	"github.com/tidwall/gjson"

	"github.com/klique-ai/klique/gateway/wire"
)

// ChatToMessagesStream turns a chat completions stream (with its usage
// chunk at the end, as MessagesToChat asks) into a Messages stream, one
// chunk at a time: message_start before the first output; a text block
// for content and a tool_use block per tool call (content_block_start,
// text_delta / input_json_delta, content_block_stop); message_delta with
// the stop reason and usage; message_stop, which the gateway holds back
// until the call is on the ledger.
//
// A chat upstream says what a call used only at its end, so message_start
// says input_tokens 0 and message_delta carries both counts (input_tokens
// and output_tokens, as Anthropic's message_delta usage may): the SDKs'
// accumulators take the final counts from it.
//
// Chunks are read with gjson and events written by appending to one
// buffer: a text delta's text is the chunk's JSON string as it came,
// never unescaped and escaped again.
type ChatToMessagesStream struct {
	model string
	buf   []byte

	started bool
	// next is the index of the next content block; text the open text
	// block's (-1: none); tools the open tool blocks' by the chat tool
	// call's index.
	next  int
	text  int
	tools map[int64]int
	open  []int

	stop      string
	usage     wire.Usage
	counted   bool
	produced  int64
	deltaSent bool
	finished  bool
}

// NewChatToMessagesStream starts the translation of one stream for a
// caller who asked for model.
func NewChatToMessagesStream(model string) *ChatToMessagesStream {
	return &ChatToMessagesStream{model: model, text: -1}
}

// Chunk translates one chat chunk (an SSE data payload). out is the
// Messages events for the caller now (valid until the next call); held is
// the stream's closing event (message_stop), set when the chunk is the
// stream's [DONE]; usage is set (counted) when the chunk says what the
// call used. A chunk a guardrail is to read is read before it is given
// here (its text is wire.OutputText's), and a chunk it blocks never is.
func (s *ChatToMessagesStream) Chunk(data []byte) (out, held []byte, u wire.Usage, counted bool) {
	s.buf = s.buf[:0]
	data = bytes.TrimSpace(data)
	if string(data) == "[DONE]" {
		out, held = s.End()
		return out, held, s.usage, s.counted
	}
	if len(data) == 0 || data[0] != '{' || s.finished {
		return nil, nil, wire.Usage{}, false
	}
	// One pass over the chunk's keys (readChatChunk), and one over each
	// choice's and delta's.
	chunk := readChatChunk(data)
	choices, usage := chunk.choices, chunk.usage
	if chunk.err != "" {
		s.buf = append(s.buf, ErrorEvent(502, "the model server failed mid-stream: "+chunk.err)...)
		return s.buf, nil, wire.Usage{}, false
	}
	if !s.started {
		s.start(chunk.id.Str)
	}
	choices.ForEach(func(_, ch gjson.Result) bool {
		var index, delta, finish gjson.Result
		ch.ForEach(func(k, v gjson.Result) bool {
			switch k.Str {
			case "index":
				index = v
			case "delta":
				delta = v
			case "finish_reason":
				finish = v
			}
			return true
		})
		if index.Int() != 0 {
			return true // a Messages answer has one choice
		}
		var content, toolCalls gjson.Result
		delta.ForEach(func(k, v gjson.Result) bool {
			switch k.Str {
			case "content":
				content = v
			case "tool_calls":
				toolCalls = v
			}
			return true
		})
		if content.Type == gjson.String && content.Str != "" {
			if s.text < 0 {
				s.text = s.next
				s.next++
				s.open = append(s.open, s.text)
				s.event("content_block_start", `{"type":"content_block_start","index":`, s.text, `,"content_block":{"type":"text","text":""}}`)
			}
			s.buf = append(s.buf, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":"...)
			s.buf = strconv.AppendInt(s.buf, int64(s.text), 10)
			s.buf = append(s.buf, `,"delta":{"type":"text_delta","text":`...)
			s.buf = appendJSONText(s.buf, content)
			s.buf = append(s.buf, "}}\n\n"...)
			s.produced += int64(len(content.Str))
		}
		toolCalls.ForEach(func(_, tc gjson.Result) bool {
			i := tc.Get("index").Int()
			if s.tools == nil {
				s.tools = make(map[int64]int, 2)
			}
			block, ok := s.tools[i]
			if !ok {
				s.closeText()
				block = s.next
				s.next++
				s.tools[i] = block
				s.open = append(s.open, block)
				id := tc.Get("id").Str
				if id == "" {
					id = "toolu_" + strconv.Itoa(block)
				}
				s.buf = append(s.buf, "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":"...)
				s.buf = strconv.AppendInt(s.buf, int64(block), 10)
				s.buf = append(s.buf, `,"content_block":{"type":"tool_use","id":`...)
				s.buf = appendJSONString(s.buf, id)
				s.buf = append(s.buf, `,"name":`...)
				s.buf = appendJSONString(s.buf, tc.Get("function.name").Str)
				s.buf = append(s.buf, `,"input":{}}}`+"\n\n"...)
			}
			if a := tc.Get("function.arguments"); a.Type == gjson.String && a.Str != "" {
				s.buf = append(s.buf, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":"...)
				s.buf = strconv.AppendInt(s.buf, int64(block), 10)
				s.buf = append(s.buf, `,"delta":{"type":"input_json_delta","partial_json":`...)
				s.buf = appendJSONText(s.buf, a)
				s.buf = append(s.buf, "}}\n\n"...)
				s.produced += int64(len(a.Str))
			}
			return true
		})
		if finish.Type == gjson.String && finish.Str != "" {
			s.stop = finish.Str
			s.closeAll()
		}
		return true
	})
	if usage.IsObject() {
		s.usage = wire.Usage{Input: max(usage.Get("prompt_tokens").Int(), 0), Output: max(usage.Get("completion_tokens").Int(), 0)}
		s.counted = true
		if s.stop != "" {
			s.messageDelta()
		}
		return s.buf, nil, s.usage, true
	}
	return s.buf, nil, wire.Usage{}, false
}

// End closes the stream: the blocks still open, message_delta when the
// usage chunk did not send it (with the output counted as the gateway
// charges it: a token per byte of the text produced), and message_stop as
// held. It is what [DONE] does, and what a
// stream that ended without it is owed.
func (s *ChatToMessagesStream) End() (out, held []byte) {
	if s.finished {
		return nil, nil
	}
	s.buf = s.buf[:0]
	if !s.started {
		s.start("")
	}
	s.closeAll()
	if !s.deltaSent {
		if !s.counted {
			s.usage = wire.Usage{Output: s.produced}
		}
		s.messageDelta()
	}
	s.finished = true
	return s.buf, messageStop
}

// Usage is what the stream said the call used (counted), else its output
// as counted here: a token per byte of the text produced.
func (s *ChatToMessagesStream) Usage() (wire.Usage, bool) {
	if s.counted {
		return s.usage, true
	}
	return wire.Usage{Output: s.produced}, false
}

var messageStop = []byte("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")

func (s *ChatToMessagesStream) start(id string) {
	s.started = true
	if id == "" {
		id = "gateway"
	}
	s.buf = append(s.buf, `event: message_start`+"\n"+`data: {"type":"message_start","message":{"id":`...)
	s.buf = appendJSONString(s.buf, "msg_"+id)
	s.buf = append(s.buf, `,"type":"message","role":"assistant","model":`...)
	s.buf = appendJSONString(s.buf, s.model)
	s.buf = append(s.buf, `,"content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":0,"output_tokens":0}}}`+"\n\n"...)
}

func (s *ChatToMessagesStream) event(name, pre string, index int, post string) {
	s.buf = append(s.buf, "event: "...)
	s.buf = append(s.buf, name...)
	s.buf = append(s.buf, "\ndata: "...)
	s.buf = append(s.buf, pre...)
	s.buf = strconv.AppendInt(s.buf, int64(index), 10)
	s.buf = append(s.buf, post...)
	s.buf = append(s.buf, "\n\n"...)
}

func (s *ChatToMessagesStream) closeText() {
	if s.text < 0 {
		return
	}
	s.closeBlock(s.text)
	s.text = -1
}

func (s *ChatToMessagesStream) closeBlock(block int) {
	for i, b := range s.open {
		if b == block {
			s.open = append(s.open[:i], s.open[i+1:]...)
			s.event("content_block_stop", `{"type":"content_block_stop","index":`, block, `}`)
			return
		}
	}
}

func (s *ChatToMessagesStream) closeAll() {
	for len(s.open) > 0 {
		s.closeBlock(s.open[0])
	}
	s.text = -1
}

func (s *ChatToMessagesStream) messageDelta() {
	s.deltaSent = true
	s.buf = append(s.buf, `event: message_delta`+"\n"+`data: {"type":"message_delta","delta":{"stop_reason":"`...)
	s.buf = append(s.buf, StopReason(s.stop)...)
	s.buf = append(s.buf, `","stop_sequence":null},"usage":{"input_tokens":`...)
	s.buf = strconv.AppendInt(s.buf, s.usage.Input, 10)
	s.buf = append(s.buf, `,"output_tokens":`...)
	s.buf = strconv.AppendInt(s.buf, s.usage.Output, 10)
	s.buf = append(s.buf, "}}\n\n"...)
}
