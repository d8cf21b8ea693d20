package wire

import (
	"errors"
	"fmt"
	"strings"

	"github.com/tidwall/gjson"
)

// ParseMessages reads a Messages request body (Anthropic's shape) into a
// Call, as Parse reads OpenAI's: the model, whether it streams, the most
// it may produce, the text a guardrail reads (TextOf, by messagesFields),
// and an upper bound of its prompt's tokens counted the same way (a token
// per byte of text, perMessage for each message, the raw JSON of tool
// definitions and tool inputs; images and documents as media.go counts
// them: Call.Images and Call.UnsizedFiles). count is true for
// count_tokens, which takes no max_tokens and never streams. The error
// says what is wrong with the body, for the caller.
func ParseMessages(body []byte, count bool) (Call, error) {
	root, err := parseRoot(body)
	if err != nil {
		return Call{}, err
	}
	c := Call{Choices: 1}
	m := root.Get("model")
	if m.Type != gjson.String || strings.TrimSpace(m.Str) == "" {
		return Call{}, errors.New("model is required: name one of the aliases GET /v1/models lists")
	}
	c.Model = m.Str
	stream, err := streamOf(root)
	if err != nil {
		return Call{}, err
	}
	if !count {
		c.Stream = stream
		mt := root.Get("max_tokens")
		if mt.Type != gjson.Number || mt.Int() < 1 {
			return Call{}, errors.New("max_tokens is required: a whole number of tokens, at least 1")
		}
		c.MaxTokens = mt.Int()
		if err := CheckMaxTokens("max_tokens", c.MaxTokens); err != nil {
			return Call{}, err
		}
	}
	switch sys := root.Get("system"); {
	case sys.Type == gjson.String:
		c.add(sys.Str)
	case sys.IsArray():
		c.addBlocks(sys)
	case sys.Exists() && sys.Type != gjson.Null:
		return Call{}, errors.New("system must be a string or an array of text blocks")
	}
	msgs := root.Get("messages")
	if !msgs.IsArray() || len(msgs.Array()) == 0 {
		return Call{}, errors.New("messages is required: a non-empty array of {role, content}")
	}
	var bad error
	msgs.ForEach(func(i, msg gjson.Result) bool {
		c.InputTokens += perMessage
		switch content := msg.Get("content"); {
		case content.Type == gjson.String:
			c.add(content.Str)
		case content.IsArray():
			c.addBlocks(content)
		default:
			bad = fmt.Errorf("messages[%d].content must be a string or an array of content blocks", i.Int())
		}
		return bad == nil
	})
	if bad != nil {
		return Call{}, bad
	}
	if tools := root.Get("tools"); tools.Exists() {
		c.InputTokens += int64(len(tools.Raw))
	}
	c.Input = TextOf(nil, Messages, root)
	return c, nil
}

// addBlocks reads an array of content blocks: their text for the
// guardrails and the count, a tool call's input as the JSON it is, a tool
// result's content (a string or blocks of its own), images and documents
// (addMessagesMedia), and any other block by its raw size.
func (c *Call) addBlocks(blocks gjson.Result) {
	blocks.ForEach(func(_, b gjson.Result) bool {
		switch b.Get("type").Str {
		case "text":
			c.add(b.Get("text").Str)
		case "thinking":
			c.add(b.Get("thinking").Str)
		case "tool_use", "server_tool_use":
			in := b.Get("input")
			c.add(in.Raw)
			c.InputTokens += int64(len(b.Get("name").Str))
		case "tool_result":
			switch inner := b.Get("content"); {
			case inner.Type == gjson.String:
				c.add(inner.Str)
			case inner.IsArray():
				c.addBlocks(inner)
			}
		default:
			if !c.addMessagesMedia(b) {
				c.InputTokens += int64(len(b.Raw))
			}
		}
		return true
	})
}

// MessagesUsage reads the usage of a whole Messages answer. Input counts
// the prompt's tokens whether or not a prompt cache served them
// (input_tokens, cache_creation_input_tokens and cache_read_input_tokens),
// so that a cached prompt is never charged as nothing.
func MessagesUsage(body []byte) (Usage, bool) {
	u := gjson.GetBytes(body, "usage")
	if !u.IsObject() {
		return Usage{}, false
	}
	return Usage{Input: messagesInput(u), Output: max(u.Get("output_tokens").Int(), 0)}, true
}

func messagesInput(u gjson.Result) int64 {
	return max(u.Get("input_tokens").Int(), 0) + max(u.Get("cache_creation_input_tokens").Int(), 0) + max(u.Get("cache_read_input_tokens").Int(), 0)
}

// MessagesOutputText is the generated text of a whole Messages answer:
// its text and thinking blocks, and its tool calls' names and inputs (what
// a guardrail reads, and what is counted when an upstream says no usage).
func MessagesOutputText(body []byte) string {
	var sb strings.Builder
	gjson.GetBytes(body, "content").ForEach(func(_, b gjson.Result) bool {
		switch b.Get("type").Str {
		case "text":
			sb.WriteString(b.Get("text").Str)
		case "thinking":
			sb.WriteString(b.Get("thinking").Str)
		case "tool_use", "server_tool_use":
			sb.WriteString(b.Get("name").Str)
			sb.WriteString(b.Get("input").Raw)
		}
		return true
	})
	return sb.String()
}

// MessagesEventText returns the generated text an event of a Messages
// stream carries, by its name: a content_block_delta's text, thinking or
// tool call's partial input, and a content_block_start's tool name (and
// any text the block starts with). It may be a view of data (read in
// place, as every event of a stream is: a copy of each would be most of
// what the relay allocates): read it before data changes.
func MessagesEventText(name string, data []byte) string {
	switch name {
	case "content_block_delta":
		d := gjson.Get(view(data), "delta")
		switch d.Get("type").Str {
		case "text_delta":
			return d.Get("text").Str
		case "input_json_delta":
			return d.Get("partial_json").Str
		case "thinking_delta":
			return d.Get("thinking").Str
		}
	case "content_block_start":
		// Once a block: a copy is cheap.
		b := gjson.Get(view(data), "content_block")
		var text string
		for _, f := range [...]string{"name", "text", "thinking"} {
			text += b.Get(f).Str
		}
		if in := b.Get("input"); in.IsObject() && len(in.Map()) > 0 {
			text += in.Raw
		}
		return text
	}
	return ""
}

// MessagesEventUsage reads the usage an event of a Messages stream says,
// by its name: message_start says the input (in, with what a prompt cache
// served), message_delta the output so far (out) and sometimes the input
// again. Any other event says neither.
func MessagesEventUsage(name string, data []byte) (in, out int64, hasIn, hasOut bool) {
	switch name {
	case "message_start":
		u := gjson.Get(view(data), "message.usage")
		if u.IsObject() {
			return messagesInput(u), max(u.Get("output_tokens").Int(), 0), true, true
		}
	case "message_delta":
		u := gjson.Get(view(data), "usage")
		if u.IsObject() {
			hasIn = u.Get("input_tokens").Exists() && u.Get("input_tokens").Type == gjson.Number
			if hasIn {
				in = messagesInput(u)
			}
			return in, max(u.Get("output_tokens").Int(), 0), hasIn, true
		}
	}
	return 0, 0, false, false
}
