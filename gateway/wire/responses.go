package wire

import (
	"errors"
	"fmt"
	"strings"

	"github.com/tidwall/gjson"
)

// ParseResponses reads a Responses API request body (ResponseNewParams in
// openai-go) into a Call, with gjson rather than the SDK's param types:
// the SDK's union decoding drops a whole input list it cannot place (a
// message item without its "type", as most clients send one), and the
// request path reads only what the stages need. The input bound follows
// Parse: every item's text is counted a token a byte, every item costs a
// message's overhead, and the tools' definitions and tool-call arguments
// count by their raw length. The error says what to change, for the
// caller.
func ParseResponses(body []byte) (Call, error) {
	root, err := parseRoot(body)
	if err != nil {
		return Call{}, err
	}
	var c Call
	m := root.Get("model")
	if m.Type != gjson.String || strings.TrimSpace(m.Str) == "" {
		return Call{}, errors.New("model is required: name one of the aliases GET /v1/models lists")
	}
	c.Model = m.Str
	if c.Stream, err = streamOf(root); err != nil {
		return Call{}, err
	}
	c.Choices = 1
	c.MaxTokens = root.Get("max_output_tokens").Int()
	if err := CheckMaxTokens("max_output_tokens", c.MaxTokens); err != nil {
		return Call{}, err
	}
	if ins := root.Get("instructions"); ins.Type == gjson.String && ins.Str != "" {
		c.InputTokens += perMessage
		c.add(ins.Str)
	}
	input := root.Get("input")
	switch {
	case input.Type == gjson.String:
		c.InputTokens += perMessage
		c.add(input.Str)
	case input.IsArray():
		var err error
		input.ForEach(func(i, item gjson.Result) bool {
			err = c.addItem(int(i.Int()), item)
			return err == nil
		})
		if err != nil {
			return Call{}, err
		}
	case !input.Exists() && (root.Get("previous_response_id").Exists() || root.Get("conversation").Exists() || root.Get("prompt").Exists()):
		// The input lives upstream (a stored response or conversation,
		// or a stored prompt): the door's translation refuses what a
		// chat upstream cannot have.
	default:
		return Call{}, errors.New("input is required: a string, or an array of input items")
	}
	if !input.Exists() {
		c.InputTokens += perMessage
	}
	if tools := root.Get("tools"); tools.Exists() {
		c.InputTokens += int64(len(tools.Raw))
	}
	c.Input = TextOf(nil, Responses, root)
	return c, nil
}

// addItem reads one input item: a message (with or without its "type"),
// a function call and its output, a custom tool call and its output, a
// reasoning item's summary; any other item counts by its raw length.
func (c *Call) addItem(i int, item gjson.Result) error {
	if !item.IsObject() {
		return fmt.Errorf("input[%d] must be an object (an input item)", i)
	}
	c.InputTokens += perMessage
	typ := item.Get("type").Str
	switch {
	case typ == "message" || typ == "" && item.Get("role").Exists():
		content := item.Get("content")
		switch {
		case content.Type == gjson.String:
			c.add(content.Str)
		case content.IsArray():
			content.ForEach(func(_, part gjson.Result) bool {
				c.addPart(part)
				return true
			})
		default:
			return fmt.Errorf("input[%d].content must be a string or an array of content parts", i)
		}
	case typ == "function_call":
		c.addText(item.Get("arguments"))
	case typ == "custom_tool_call":
		c.addText(item.Get("input"))
	case typ == "function_call_output" || typ == "custom_tool_call_output":
		out := item.Get("output")
		if out.IsArray() {
			out.ForEach(func(_, part gjson.Result) bool {
				c.addPart(part)
				return true
			})
		} else {
			c.addText(out)
		}
	case typ == "reasoning":
		item.Get("summary").ForEach(func(_, part gjson.Result) bool {
			c.addPart(part)
			return true
		})
		c.InputTokens += int64(len(item.Get("encrypted_content").Str))
	case typ == "":
		return fmt.Errorf("input[%d] needs a type (message, function_call, function_call_output, …) or a role", i)
	default:
		c.InputTokens += int64(len(item.Raw))
	}
	return nil
}

// addPart reads a content part: its text (input_text, output_text,
// refusal, summary_text) is prompt; an image, a file or audio counts as
// media.go counts it; any other part by its raw length.
func (c *Call) addPart(part gjson.Result) {
	if part.Type == gjson.String {
		c.add(part.Str)
		return
	}
	if t := part.Get("text"); t.Type == gjson.String {
		c.add(t.Str)
		return
	}
	if t := part.Get("refusal"); t.Type == gjson.String {
		c.add(t.Str)
		return
	}
	if !c.addResponsesMedia(part) {
		c.InputTokens += int64(len(part.Raw))
	}
}

func (c *Call) addText(v gjson.Result) {
	if v.Type == gjson.String {
		c.add(v.Str)
	} else if v.Exists() {
		c.InputTokens += int64(len(v.Raw))
	}
}

// ResponsesUsage reads the usage of a Responses answer: a Response object
// ("usage" at its root) or a stream event that carries one
// (response.completed, response.incomplete, response.failed: under
// "response"). A negative count reads as 0, as in UsageOf.
func ResponsesUsage(data []byte) (Usage, bool) {
	r := gjson.ParseBytes(data)
	u := r.Get("usage")
	if !u.IsObject() {
		u = r.Get("response.usage")
	}
	if !u.IsObject() {
		return Usage{}, false
	}
	return Usage{Input: max(u.Get("input_tokens").Int(), 0), Output: max(u.Get("output_tokens").Int(), 0)}, true
}

// ResponsesOutputText returns the generated text of a Response object:
// every output message's text and refusals, the names and arguments of
// its function calls, the names and input of its custom tool calls, its
// reasoning (summaries and text) and the code it wrote for the code
// interpreter (what a guardrail reads, and what is counted when an
// upstream says no usage).
func ResponsesOutputText(data []byte) string {
	var sb strings.Builder
	parts := func(v gjson.Result) {
		v.ForEach(func(_, part gjson.Result) bool {
			sb.WriteString(part.Get("text").Str)
			sb.WriteString(part.Get("refusal").Str)
			return true
		})
	}
	gjson.GetBytes(data, "output").ForEach(func(_, item gjson.Result) bool {
		switch item.Get("type").Str {
		case "message":
			parts(item.Get("content"))
		case "function_call":
			sb.WriteString(item.Get("name").Str)
			sb.WriteString(item.Get("arguments").Str)
		case "custom_tool_call":
			sb.WriteString(item.Get("name").Str)
			sb.WriteString(item.Get("input").Str)
		case "reasoning":
			parts(item.Get("summary"))
			parts(item.Get("content"))
		case "code_interpreter_call":
			sb.WriteString(item.Get("code").Str)
		}
		return true
	})
	return sb.String()
}

// ResponsesEventText returns the generated text a Responses stream event
// carries: the delta of every event that streams a part of the answer
// (output text, refusals, reasoning and its summaries, function-call
// arguments, custom tool input, code: every "….delta" event but audio,
// whose delta is base64 sound), and the name of a tool call as its item
// is added. The ".done" events and the terminal response repeat what the
// deltas said, and are not read again. The text may be a view of data
// (see MessagesEventText): read it before data changes.
func ResponsesEventText(name string, data []byte) string {
	if name == "" {
		name = gjson.Get(view(data), "type").Str
	}
	switch {
	case name == "response.output_item.added":
		return gjson.Get(view(data), "item.name").Str
	case name == "response.audio.delta":
		return ""
	case strings.HasSuffix(name, ".delta"):
		return gjson.Get(view(data), "delta").Str
	}
	return ""
}
