// Package translate turns a call made by one of the gateway's doors into
// the shape of an upstream that speaks another API, and the upstream's
// answer back, whole or streamed: Anthropic's Messages to OpenAI's Chat
// Completions and back (messages.go). Requests and whole answers are read
// and written with the official SDKs' types; streamed answers are read
// and written chunk by chunk on raw bytes, for a stream of hundreds of
// chunks must cost little more than a pass-through.
package translate

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/shared"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/klique-ai/klique/gateway/wire"
)

// Untranslatable is what a Messages request asks for that a chat
// completions upstream cannot do. The door refuses the call (or skips the
// attempt, when another target speaks Messages) with its message, which
// names the part and says what to change.
type Untranslatable struct{ What string }

func (e *Untranslatable) Error() string {
	return e.What + " cannot be translated for a chat-completions model; remove it, or ask for an alias whose model speaks Anthropic's Messages API"
}

// MessagesToChat turns a Messages request body into a Chat Completions
// request body for the upstream model id upstream; stream asks for a
// stream with its usage at the end. What the chat API has no place for is
// refused (*Untranslatable): server-side tools (web search, code
// execution, Anthropic-defined tools), MCP servers, containers, documents.
// Thinking is dropped: the request's thinking setting and the thinking
// blocks of earlier turns are Anthropic models' own, and a chat model
// answers without them. cache_control, top_k and service_tier are
// dropped too: hints a chat model server does without.
func MessagesToChat(body []byte, upstream string, stream bool) ([]byte, error) {
	for _, f := range [...]string{"mcp_servers", "container"} {
		if v := gjson.GetBytes(body, f); v.Exists() && v.Type != gjson.Null {
			return nil, &Untranslatable{What: f}
		}
	}
	var p anthropic.MessageNewParams
	if err := json.Unmarshal(body, &p); err != nil {
		return nil, fmt.Errorf("the request body is not a Messages request: %w", err)
	}
	q := openai.ChatCompletionNewParams{Model: shared.ChatModel(upstream)}
	var sys []string
	for _, b := range p.System {
		sys = append(sys, b.Text)
	}
	if len(sys) > 0 {
		q.Messages = append(q.Messages, openai.SystemMessage(strings.Join(sys, "\n")))
	}
	for i, m := range p.Messages {
		var err error
		switch {
		case m.OfUser != nil:
			q.Messages, err = userToChat(q.Messages, m.OfUser.Content)
		case m.OfAssistant != nil:
			q.Messages, err = assistantToChat(q.Messages, m.OfAssistant.Content)
		case m.OfSystem != nil:
			var parts []string
			for _, b := range m.OfSystem.Content {
				parts = append(parts, b.Text)
			}
			q.Messages = append(q.Messages, openai.SystemMessage(strings.Join(parts, "\n")))
		default:
			err = errors.New("a message with a role other than user or assistant")
		}
		if err != nil {
			var u *Untranslatable
			if errors.As(err, &u) {
				u.What = fmt.Sprintf("messages[%d]: %s", i, u.What)
				return nil, u
			}
			return nil, fmt.Errorf("messages[%d]: %w", i, err)
		}
	}
	if err := toolsToChat(&q, body, p.Tools); err != nil {
		return nil, err
	}
	toolChoiceToChat(&q, p.ToolChoice)
	q.MaxTokens = param.NewOpt(p.MaxTokens)
	// The SDK's params no longer carry temperature and top_p (newer
	// models fix them), but callers still send them and chat models take
	// them.
	if v := gjson.GetBytes(body, "temperature"); v.Type == gjson.Number {
		q.Temperature = param.NewOpt(v.Float())
	}
	if v := gjson.GetBytes(body, "top_p"); v.Type == gjson.Number {
		q.TopP = param.NewOpt(v.Float())
	}
	if len(p.StopSequences) > 0 {
		q.Stop.OfStringArray = p.StopSequences
	}
	if p.Metadata.UserID.Valid() {
		q.User = param.NewOpt(p.Metadata.UserID.Value)
	}
	if stream {
		q.StreamOptions.IncludeUsage = param.NewOpt(true)
	}
	out, err := json.Marshal(q)
	if err != nil {
		return nil, fmt.Errorf("write the chat request: %w", err)
	}
	if stream {
		out, err = sjson.SetBytes(out, "stream", true)
	}
	return out, err
}

// userToChat appends a user turn: its tool results first, as tool
// messages (a chat API wants them right after the assistant's tool
// calls), then its text and images as one user message.
func userToChat(dst []openai.ChatCompletionMessageParamUnion, blocks []anthropic.ContentBlockParamUnion) ([]openai.ChatCompletionMessageParamUnion, error) {
	var parts []openai.ChatCompletionContentPartUnionParam
	var texts []string
	images := false
	for _, b := range blocks {
		switch {
		case b.OfText != nil:
			parts = append(parts, openai.TextContentPart(b.OfText.Text))
			texts = append(texts, b.OfText.Text)
		case b.OfImage != nil:
			url, err := imageURL(b.OfImage.Source)
			if err != nil {
				return nil, err
			}
			parts = append(parts, openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: url}))
			images = true
		case b.OfToolResult != nil:
			text, err := toolResultText(b.OfToolResult)
			if err != nil {
				return nil, err
			}
			dst = append(dst, openai.ToolMessage(text, b.OfToolResult.ToolUseID))
		case b.OfThinking != nil, b.OfRedactedThinking != nil:
		default:
			return nil, &Untranslatable{What: "a " + blockType(b) + " block"}
		}
	}
	switch {
	case images:
		dst = append(dst, openai.UserMessage(parts))
	case len(texts) > 0:
		// Text alone goes as a string: every chat model server takes
		// that, not all take parts.
		dst = append(dst, openai.UserMessage(strings.Join(texts, "\n")))
	}
	return dst, nil
}

// assistantToChat appends an assistant turn: its text, and its tool uses
// as tool calls whose arguments are their inputs' JSON.
func assistantToChat(dst []openai.ChatCompletionMessageParamUnion, blocks []anthropic.ContentBlockParamUnion) ([]openai.ChatCompletionMessageParamUnion, error) {
	var a openai.ChatCompletionAssistantMessageParam
	var texts []string
	for _, b := range blocks {
		switch {
		case b.OfText != nil:
			texts = append(texts, b.OfText.Text)
		case b.OfToolUse != nil:
			args, err := json.Marshal(b.OfToolUse.Input)
			if err != nil {
				return nil, fmt.Errorf("the input of tool_use %s: %w", b.OfToolUse.ID, err)
			}
			if string(args) == "null" {
				args = []byte("{}")
			}
			a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
				OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{ID: b.OfToolUse.ID,
					Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: b.OfToolUse.Name, Arguments: string(args)}}})
		case b.OfThinking != nil, b.OfRedactedThinking != nil:
		default:
			return nil, &Untranslatable{What: "a " + blockType(b) + " block"}
		}
	}
	if len(texts) > 0 {
		a.Content.OfString = param.NewOpt(strings.Join(texts, "\n"))
	}
	if len(texts) == 0 && len(a.ToolCalls) == 0 {
		return dst, nil // a turn of thinking only
	}
	return append(dst, openai.ChatCompletionMessageParamUnion{OfAssistant: &a}), nil
}

func imageURL(src anthropic.ImageBlockParamSourceUnion) (string, error) {
	switch {
	case src.OfBase64 != nil:
		return "data:" + string(src.OfBase64.MediaType) + ";base64," + src.OfBase64.Data, nil
	case src.OfURL != nil:
		return src.OfURL.URL, nil
	}
	return "", &Untranslatable{What: "an image given by file id"}
}

// toolResultText is a tool result's content as the text of a tool
// message (a chat tool message carries text only), marked when the tool
// failed.
func toolResultText(r *anthropic.ToolResultBlockParam) (string, error) {
	var texts []string
	for _, c := range r.Content {
		if c.OfText == nil {
			return "", &Untranslatable{What: "a tool_result with content other than text (an image or a document)"}
		}
		texts = append(texts, c.OfText.Text)
	}
	text := strings.Join(texts, "\n")
	if r.IsError.Valid() && r.IsError.Value {
		text = "Error: " + text
	}
	return text, nil
}

// blockType names a content block's type, for a refusal.
func blockType(b anthropic.ContentBlockParamUnion) string {
	if t := b.GetType(); t != nil && *t != "" {
		return *t
	}
	return "content"
}

// toolsToChat gives the chat request the caller's tools as functions,
// their input schemas as the functions' parameters (read from the body as
// written, so that nothing of a schema is lost). A tool the model's
// provider runs itself (web search, code execution) or an
// Anthropic-defined one (bash_20250124, text_editor_…) has no schema to
// give a chat model, and is refused.
func toolsToChat(q *openai.ChatCompletionNewParams, body []byte, tools []anthropic.ToolUnionParam) error {
	raw := gjson.GetBytes(body, "tools").Array()
	for i, t := range tools {
		if t.OfTool == nil || i >= len(raw) {
			name := "a server or Anthropic-defined tool"
			if i < len(raw) {
				name = fmt.Sprintf("the tool %s (type %s)", raw[i].Get("name").Str, raw[i].Get("type").Str)
			}
			return &Untranslatable{What: name}
		}
		var params shared.FunctionParameters
		if s := raw[i].Get("input_schema"); s.IsObject() {
			if err := json.Unmarshal([]byte(s.Raw), &params); err != nil {
				return fmt.Errorf("tools[%d].input_schema: %w", i, err)
			}
		}
		fn := shared.FunctionDefinitionParam{Name: t.OfTool.Name, Parameters: params}
		if t.OfTool.Description.Valid() {
			fn.Description = param.NewOpt(t.OfTool.Description.Value)
		}
		q.Tools = append(q.Tools, openai.ChatCompletionFunctionTool(fn))
	}
	return nil
}

// toolChoiceToChat maps tool_choice: auto to auto, any to required, a
// named tool to that function, none to none; disable_parallel_tool_use to
// parallel_tool_calls false.
func toolChoiceToChat(q *openai.ChatCompletionNewParams, tc anthropic.ToolChoiceUnionParam) {
	var noParallel bool
	switch {
	case tc.OfAuto != nil:
		q.ToolChoice.OfAuto = param.NewOpt("auto")
		noParallel = tc.OfAuto.DisableParallelToolUse.Value
	case tc.OfAny != nil:
		q.ToolChoice.OfAuto = param.NewOpt("required")
		noParallel = tc.OfAny.DisableParallelToolUse.Value
	case tc.OfTool != nil:
		q.ToolChoice = openai.ToolChoiceOptionFunctionToolChoice(openai.ChatCompletionNamedToolChoiceFunctionParam{Name: tc.OfTool.Name})
		noParallel = tc.OfTool.DisableParallelToolUse.Value
	case tc.OfNone != nil:
		q.ToolChoice.OfAuto = param.NewOpt("none")
	}
	if noParallel && len(q.Tools) > 0 {
		q.ParallelToolCalls = param.NewOpt(false)
	}
}

// StopReason maps a chat finish_reason to a Messages stop_reason: a
// content filter's stop is a refusal; an unknown or missing one ends the
// turn.
func StopReason(finish string) anthropic.StopReason {
	switch finish {
	case "length":
		return anthropic.StopReasonMaxTokens
	case "tool_calls", "function_call":
		return anthropic.StopReasonToolUse
	case "content_filter":
		return anthropic.StopReasonRefusal
	}
	return anthropic.StopReasonEndTurn
}

// messageOut is a Messages answer. The SDK's Message is a response type
// whose content union would write every variant's fields; the content
// here is the SDK's block params, which write a block as the API does.
type messageOut struct {
	ID           string                             `json:"id"`
	Type         string                             `json:"type"`
	Role         string                             `json:"role"`
	Model        string                             `json:"model"`
	Content      []anthropic.ContentBlockParamUnion `json:"content"`
	StopReason   anthropic.StopReason               `json:"stop_reason"`
	StopSequence *string                            `json:"stop_sequence"`
	Usage        usageOut                           `json:"usage"`
}

type usageOut struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
}

// ChatToMessages turns a whole chat completions answer (any status) into
// the Messages answer for a caller who asked for model: an error into
// Anthropic's error shape with the same status, a completion into a
// message. It returns what the upstream said the call used (counted
// false when it said nothing).
func ChatToMessages(status int, data []byte, model string) (body []byte, u wire.Usage, counted bool) {
	if status != http.StatusOK {
		msg := gjson.GetBytes(data, "error.message").Str
		if msg == "" {
			msg = gjson.GetBytes(data, "message").Str
		}
		if msg == "" {
			msg = strings.TrimSpace(string(data))
			if len(msg) > 500 {
				msg = msg[:500]
			}
		}
		return ErrorBody(status, "the model server answered HTTP "+strconv.Itoa(status)+": "+msg), u, false
	}
	var cc openai.ChatCompletion
	if err := json.Unmarshal(data, &cc); err != nil || len(cc.Choices) == 0 {
		return ErrorBody(http.StatusBadGateway, "the model server's answer is not a chat completion"), u, false
	}
	ch := cc.Choices[0]
	out := messageOut{ID: "msg_" + cc.ID, Type: "message", Role: "assistant", Model: model, StopReason: StopReason(ch.FinishReason),
		Content: []anthropic.ContentBlockParamUnion{}}
	if c := ch.Message.Content; c != "" {
		out.Content = append(out.Content, anthropic.NewTextBlock(c))
	}
	if ch.Message.Refusal != "" {
		out.Content = append(out.Content, anthropic.NewTextBlock(ch.Message.Refusal))
		out.StopReason = anthropic.StopReasonRefusal
	}
	for _, tc := range ch.Message.ToolCalls {
		args := strings.TrimSpace(tc.Function.Arguments)
		if args == "" {
			args = "{}"
		}
		if !gjson.Valid(args) {
			return ErrorBody(http.StatusBadGateway, "the model called the tool "+tc.Function.Name+" with arguments that are not JSON"), u, false
		}
		out.Content = append(out.Content, anthropic.ContentBlockParamUnion{OfToolUse: &anthropic.ToolUseBlockParam{
			ID: tc.ID, Name: tc.Function.Name, Input: json.RawMessage(args)}})
	}
	if cc.JSON.Usage.Valid() {
		u, counted = wire.Usage{Input: max(cc.Usage.PromptTokens, 0), Output: max(cc.Usage.CompletionTokens, 0)}, true
	}
	out.Usage = usageOut{InputTokens: u.Input, OutputTokens: u.Output}
	body, err := json.Marshal(out)
	if err != nil {
		return ErrorBody(http.StatusBadGateway, "could not write the model's answer: "+err.Error()), u, counted
	}
	return body, u, counted
}

// ErrorType is Anthropic's error type for a status.
func ErrorType(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case http.StatusServiceUnavailable, 529:
		return "overloaded_error"
	}
	if status >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}

// ErrorBody is an error in Anthropic's shape:
// {"type":"error","error":{"type":…,"message":…}}.
func ErrorBody(status int, message string) []byte {
	return AppendError(nil, status, message)
}

// AppendError appends ErrorBody's JSON to dst.
func AppendError(dst []byte, status int, message string) []byte {
	dst = append(dst, `{"type":"error","error":{"type":"`...)
	dst = append(dst, ErrorType(status)...)
	dst = append(dst, `","message":`...)
	dst = appendJSONString(dst, message)
	return append(dst, "}}"...)
}

// ErrorEvent is an error in a Messages stream: what a caller gets when a
// guardrail stops the stream, or the upstream cuts it off.
func ErrorEvent(status int, message string) []byte {
	dst := append([]byte(nil), "event: error\ndata: "...)
	dst = AppendError(dst, status, message)
	return append(dst, "\n\n"...)
}

// appendJSONText appends the JSON string v of a chunk: as it came when it
// is one (no copy through a decoder), else written anew from what gjson
// reads of it (the text a guardrail read). A chunk need not be valid JSON
// (an upstream's bad escape, two data lines joined inside a string), and
// its raw text would break the caller's event.
func appendJSONText(dst []byte, v gjson.Result) []byte {
	if gjson.Valid(v.Raw) {
		return append(dst, v.Raw...)
	}
	return appendJSONString(dst, v.Str)
}

func appendJSONString(dst []byte, s string) []byte {
	b, _ := json.Marshal(s) // a string always marshals
	return append(dst, b...)
}
