package translate

// The Responses door's translation (OpenAI's Responses API ↔ Chat
// Completions). Like the package's other translations it is pure: bytes
// in, bytes out, no I/O; the door's legs in gateway/responses.go call it.

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"
	openai "github.com/sashabaranov/go-openai"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/klique-ai/klique/gateway/wire"
)

// ResponsesChat is a Responses API request (POST /v1/responses) made
// ready for a Chat Completions upstream (vLLM, SGLang, llama.cpp, NIM),
// and what the answer's translation back needs of it.
//
// The request is read with gjson, not into openai-go's ResponseNewParams:
// the SDK's union decoding silently drops a whole input list when one
// item has no "type" (as most clients send messages), which would turn a
// conversation into nothing. The upstream body is go-openai's
// ChatCompletionRequest; the answer is built from openai-go's Responses
// types (output items, usage, events).
type ResponsesChat struct {
	chat openai.ChatCompletionRequest
	// temperature and topP are the caller's raw values: go-openai's
	// float32 fields drop a 0 (omitempty), which is a real setting.
	temperature, topP string
	// model is the name the caller asked for, which the answer carries.
	model string
	// namespaced maps a namespace's function, flattened into one chat
	// tool name, back to its namespace and name.
	namespaced map[string][2]string
	// echo is what the Response object repeats of the request.
	echo responsesEcho
}

// responsesEcho is what a Response object repeats of its request, as the
// caller sent it.
type responsesEcho struct {
	instructions, tools, toolChoice, text, metadata, maxOutputTokens json.RawMessage
	parallelToolCalls                                                bool
	temperature, topP                                                json.RawMessage
}

// responsesNSSep joins a namespace and a function's name into one chat tool name:
// chat tools have no namespaces, and "__" is a legal name character for
// every chat API.
const responsesNSSep = "__"

// responsesBuiltIns are the Responses API's tools that run on OpenAI's side (or
// need a server-side container, store or connector): a chat upstream has
// nothing to run them with.
var responsesBuiltIns = map[string]bool{
	"web_search": true, "web_search_preview": true, "web_search_2025_08_26": true, "web_search_preview_2025_03_11": true,
	"file_search": true, "code_interpreter": true, "computer_use": true, "computer_use_preview": true, "computer": true,
	"image_generation": true, "mcp": true, "local_shell": true, "shell": true, "apply_patch": true, "tool_search": true,
}

// ErrUntranslatable marks a request that a chat upstream cannot serve:
// the message says what to change.
var ErrUntranslatable = errors.New("cannot be translated to a chat completions upstream")

func refuseResponses(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrUntranslatable, fmt.Sprintf(format, a...))
}

// ResponsesToChat reads a Responses request for a chat upstream. What a
// chat upstream cannot do is refused (ErrUntranslatable, with a message
// saying what to change): a stored response or conversation to continue
// (the gateway stores no responses), a stored prompt, background mode,
// built-in tools, items that only a store can resolve. store is treated
// as false: the gateway keeps no responses, and the Response says
// "store": false.
func ResponsesToChat(body []byte) (*ResponsesChat, error) {
	root := gjson.ParseBytes(body)
	t := &ResponsesChat{model: root.Get("model").Str}
	if v := root.Get("previous_response_id"); v.Exists() && v.Type != gjson.Null {
		return nil, refuseResponses("previous_response_id: the gateway stores no responses; send the conversation's items in input instead")
	}
	if v := root.Get("conversation"); v.Exists() && v.Type != gjson.Null {
		return nil, refuseResponses("conversation: the gateway stores no conversations; send the conversation's items in input instead")
	}
	if v := root.Get("prompt"); v.Exists() && v.Type != gjson.Null {
		return nil, refuseResponses("prompt: stored prompt templates live on OpenAI's side; send the instructions and input instead")
	}
	if root.Get("background").Bool() {
		return nil, refuseResponses("background: true needs a stored response to poll; call without background")
	}
	c := &t.chat
	c.Stream = root.Get("stream").Bool()
	if c.Stream {
		c.StreamOptions = &openai.StreamOptions{IncludeUsage: true}
	}
	// max_tokens, not max_completion_tokens: every chat server takes it
	// (llama.cpp and older vLLM know no other).
	//lint:ignore SA1019 the self-hosted servers a translation serves take max_tokens
	c.MaxTokens = int(root.Get("max_output_tokens").Int())
	if v := root.Get("temperature"); v.Type == gjson.Number {
		t.temperature, t.echo.temperature = v.Raw, json.RawMessage(v.Raw)
	}
	if v := root.Get("top_p"); v.Type == gjson.Number {
		t.topP, t.echo.topP = v.Raw, json.RawMessage(v.Raw)
	}
	if v := root.Get("max_output_tokens"); v.Type == gjson.Number {
		t.echo.maxOutputTokens = json.RawMessage(v.Raw)
	}
	t.echo.parallelToolCalls = true
	if v := root.Get("parallel_tool_calls"); v.IsBool() {
		c.ParallelToolCalls = v.Bool()
		t.echo.parallelToolCalls = v.Bool()
	}
	c.User = root.Get("safety_identifier").Str
	if c.User == "" {
		c.User = root.Get("user").Str
	}
	if ins := root.Get("instructions"); ins.Type == gjson.String {
		t.echo.instructions = json.RawMessage(ins.Raw)
		if ins.Str != "" {
			c.Messages = append(c.Messages, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleSystem, Content: ins.Str})
		}
	} else if ins.IsArray() {
		return nil, refuseResponses("instructions must be a string for a chat upstream")
	}
	if err := t.tools(root.Get("tools")); err != nil {
		return nil, err
	}
	if err := t.toolChoice(root.Get("tool_choice")); err != nil {
		return nil, err
	}
	if err := t.format(root.Get("text")); err != nil {
		return nil, err
	}
	if md := root.Get("metadata"); md.IsObject() {
		t.echo.metadata = json.RawMessage(md.Raw)
	}
	input := root.Get("input")
	switch {
	case input.Type == gjson.String:
		c.Messages = append(c.Messages, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleUser, Content: input.Str})
	case input.IsArray():
		var err error
		input.ForEach(func(i, item gjson.Result) bool {
			err = t.item(int(i.Int()), item)
			return err == nil
		})
		if err != nil {
			return nil, err
		}
	}
	if len(c.Messages) == 0 {
		return nil, errors.New("input is required: a string, or an array of input items")
	}
	return t, nil
}

// tools maps function tools (and the functions of a namespace) to chat
// tools; a built-in tool is refused.
func (t *ResponsesChat) tools(tools gjson.Result) error {
	if !tools.Exists() || tools.Type == gjson.Null {
		return nil
	}
	t.echo.tools = json.RawMessage(tools.Raw)
	var err error
	tools.ForEach(func(i, tool gjson.Result) bool {
		switch typ := tool.Get("type").Str; {
		case typ == "function":
			t.chat.Tools = append(t.chat.Tools, responsesChatTool(tool.Get("name").Str, tool))
		case typ == "namespace":
			ns := tool.Get("name").Str
			tool.Get("tools").ForEach(func(j, fn gjson.Result) bool {
				if fn.Get("type").Str != "function" {
					err = refuseResponses("tools[%d].tools[%d] is a %q tool; only function tools can be translated", i.Int(), j.Int(), fn.Get("type").Str)
					return false
				}
				name := ns + responsesNSSep + fn.Get("name").Str
				if t.namespaced == nil {
					t.namespaced = map[string][2]string{}
				}
				t.namespaced[name] = [2]string{ns, fn.Get("name").Str}
				t.chat.Tools = append(t.chat.Tools, responsesChatTool(name, fn))
				return true
			})
		case responsesBuiltIns[typ]:
			err = refuseResponses("tools[%d] is the built-in tool %s, which runs on OpenAI's side: remove it, or route the alias to a provider with api: openai", i.Int(), typ)
		default:
			err = refuseResponses("tools[%d] is a %q tool; only function tools can be translated", i.Int(), typ)
		}
		return err == nil
	})
	return err
}

func responsesChatTool(name string, fn gjson.Result) openai.Tool {
	d := &openai.FunctionDefinition{Name: name, Description: fn.Get("description").Str, Strict: fn.Get("strict").Bool()}
	if p := fn.Get("parameters"); p.IsObject() {
		d.Parameters = json.RawMessage(p.Raw)
	} else {
		d.Parameters = json.RawMessage(`{"type":"object","properties":{}}`)
	}
	return openai.Tool{Type: openai.ToolTypeFunction, Function: d}
}

// toolChoice maps "auto"/"none"/"required" and a named function; the
// Responses-only choices (a built-in tool, allowed_tools) are refused.
func (t *ResponsesChat) toolChoice(v gjson.Result) error {
	switch {
	case !v.Exists() || v.Type == gjson.Null:
		return nil
	case v.Type == gjson.String:
		t.chat.ToolChoice = v.Str
	case v.Get("type").Str == "function":
		t.chat.ToolChoice = openai.ToolChoice{Type: openai.ToolTypeFunction, Function: openai.ToolFunction{Name: v.Get("name").Str}}
	default:
		return refuseResponses("tool_choice of type %q; use auto, none, required or a function", v.Get("type").Str)
	}
	t.echo.toolChoice = json.RawMessage(v.Raw)
	return nil
}

// format maps text.format to response_format.
func (t *ResponsesChat) format(text gjson.Result) error {
	if !text.IsObject() {
		return nil
	}
	t.echo.text = json.RawMessage(text.Raw)
	f := text.Get("format")
	switch f.Get("type").Str {
	case "", "text":
	case "json_object":
		t.chat.ResponseFormat = &openai.ChatCompletionResponseFormat{Type: openai.ChatCompletionResponseFormatTypeJSONObject}
	case "json_schema":
		t.chat.ResponseFormat = &openai.ChatCompletionResponseFormat{Type: openai.ChatCompletionResponseFormatTypeJSONSchema,
			JSONSchema: &openai.ChatCompletionResponseFormatJSONSchema{Name: f.Get("name").Str, Description: f.Get("description").Str,
				Schema: json.RawMessage(responsesNonEmpty(f.Get("schema").Raw, "{}")), Strict: f.Get("strict").Bool()}}
	default:
		return refuseResponses("text.format of type %q; use text, json_object or json_schema", f.Get("type").Str)
	}
	return nil
}

func responsesNonEmpty(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// item maps one input item to chat messages: a message to a message of
// its role (developer is a system message to a chat template), a
// function call to a tool call on the assistant message before it, a
// function call's output to a tool message. A reasoning item is the
// model's own notes, which a chat upstream takes no input for: it is
// left out (Codex sends them back on every turn). Items that name stored
// state or a built-in tool's call are refused.
func (t *ResponsesChat) item(i int, item gjson.Result) error {
	c := &t.chat
	typ := item.Get("type").Str
	switch {
	case typ == "message" || typ == "" && item.Get("role").Exists():
		role := item.Get("role").Str
		switch role {
		case "developer", "system":
			role = openai.ChatMessageRoleSystem
		case "user", "assistant":
		default:
			return refuseResponses("input[%d] has the role %q; use user, assistant, system or developer", i, role)
		}
		m := openai.ChatCompletionMessage{Role: role}
		if err := responsesContent(&m, item.Get("content"), i); err != nil {
			return err
		}
		c.Messages = append(c.Messages, m)
	case typ == "function_call":
		name := item.Get("name").Str
		if ns := item.Get("namespace").Str; ns != "" {
			name = ns + responsesNSSep + name
		}
		tc := openai.ToolCall{ID: item.Get("call_id").Str, Type: openai.ToolTypeFunction,
			Function: openai.FunctionCall{Name: name, Arguments: item.Get("arguments").Str}}
		// Calls made in one turn are one assistant message's tool calls,
		// as a chat template expects them.
		if n := len(c.Messages); n > 0 && c.Messages[n-1].Role == openai.ChatMessageRoleAssistant {
			c.Messages[n-1].ToolCalls = append(c.Messages[n-1].ToolCalls, tc)
		} else {
			c.Messages = append(c.Messages, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, ToolCalls: []openai.ToolCall{tc}})
		}
	case typ == "function_call_output":
		m := openai.ChatCompletionMessage{Role: openai.ChatMessageRoleTool, ToolCallID: item.Get("call_id").Str}
		if err := responsesContent(&m, item.Get("output"), i); err != nil {
			return err
		}
		c.Messages = append(c.Messages, m)
	case typ == "reasoning":
	case typ == "item_reference":
		return refuseResponses("input[%d] is an item_reference: the gateway stores no items; send the item itself", i)
	default:
		return refuseResponses("input[%d] is a %q item, which only OpenAI's own tools produce; only messages, function calls and their outputs can be translated", i, typ)
	}
	return nil
}

// content fills a chat message's content from a Responses content: a
// string, or parts. Text-only parts become one string (every chat
// template takes that); an image makes the content a list of parts.
func responsesContent(m *openai.ChatCompletionMessage, v gjson.Result, i int) error {
	if v.Type == gjson.String {
		m.Content = v.Str
		return nil
	}
	if !v.IsArray() {
		if !v.Exists() || v.Type == gjson.Null {
			return nil
		}
		return fmt.Errorf("input[%d].content must be a string or an array of content parts", i)
	}
	var parts []openai.ChatMessagePart
	var text strings.Builder
	images := false
	var err error
	v.ForEach(func(_, p gjson.Result) bool {
		switch typ := p.Get("type").Str; typ {
		case "input_text", "output_text", "text", "summary_text", "reasoning_text":
			parts = append(parts, openai.ChatMessagePart{Type: openai.ChatMessagePartTypeText, Text: p.Get("text").Str})
			text.WriteString(p.Get("text").Str)
		case "refusal":
			parts = append(parts, openai.ChatMessagePart{Type: openai.ChatMessagePartTypeText, Text: p.Get("refusal").Str})
			text.WriteString(p.Get("refusal").Str)
		case "input_image":
			url := p.Get("image_url").Str
			if url == "" {
				err = refuseResponses("input[%d] has an image by file_id: the gateway holds no files; send it as image_url (a URL or a data: URL)", i)
				return false
			}
			images = true
			parts = append(parts, openai.ChatMessagePart{Type: openai.ChatMessagePartTypeImageURL,
				ImageURL: &openai.ChatMessageImageURL{URL: url, Detail: openai.ImageURLDetail(p.Get("detail").Str)}})
		default:
			err = refuseResponses("input[%d] has a %q content part; only text and images (input_text, input_image) can be translated", i, typ)
			return false
		}
		return true
	})
	if err != nil {
		return err
	}
	if images {
		m.MultiContent = parts
	} else {
		m.Content = text.String()
	}
	return nil
}

// Request returns the chat body for the upstream model upstream.
func (t *ResponsesChat) Request(upstream string) ([]byte, error) {
	t.chat.Model = upstream
	body, err := json.Marshal(&t.chat)
	if err != nil {
		return nil, fmt.Errorf("encode the chat request: %w", err)
	}
	if t.temperature != "" {
		if body, err = sjson.SetRawBytes(body, "temperature", []byte(t.temperature)); err != nil {
			return nil, fmt.Errorf("encode the chat request: %w", err)
		}
	}
	if t.topP != "" {
		if body, err = sjson.SetRawBytes(body, "top_p", []byte(t.topP)); err != nil {
			return nil, fmt.Errorf("encode the chat request: %w", err)
		}
	}
	return body, nil
}

// Chat is the chat request as it goes upstream (for tests and the
// benchmark).
func (t *ResponsesChat) Chat() *openai.ChatCompletionRequest { return &t.chat }

// response is a Response object as the gateway writes it: openai-go's
// Response type is a decoding type whose every union marshals all of its
// variants' fields, so the envelope is written here, around the SDK's
// output item, usage and status types, and repeats what the caller sent.
type responseObject struct {
	ID                string                                  `json:"id"`
	Object            string                                  `json:"object"`
	CreatedAt         int64                                   `json:"created_at"`
	Status            responses.ResponseStatus                `json:"status"`
	Error             *responsesError                         `json:"error"`
	IncompleteDetails *responses.ResponseIncompleteDetails    `json:"incomplete_details"`
	Instructions      json.RawMessage                         `json:"instructions"`
	MaxOutputTokens   json.RawMessage                         `json:"max_output_tokens"`
	Model             string                                  `json:"model"`
	Output            []responses.ResponseInputItemUnionParam `json:"output"`
	ParallelToolCalls bool                                    `json:"parallel_tool_calls"`
	Store             bool                                    `json:"store"`
	Temperature       json.RawMessage                         `json:"temperature"`
	Text              json.RawMessage                         `json:"text,omitempty"`
	ToolChoice        json.RawMessage                         `json:"tool_choice"`
	Tools             json.RawMessage                         `json:"tools"`
	TopP              json.RawMessage                         `json:"top_p"`
	Metadata          json.RawMessage                         `json:"metadata"`
	Usage             *responses.ResponseUsage                `json:"usage"`
}

// responsesError is a failed Response's error (ResponseError without the
// fields only OpenAI's moderation fills).
type responsesError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (t *ResponsesChat) newResponse(id string, created int64) responseObject {
	e := &t.echo
	r := responseObject{ID: id, Object: "response", CreatedAt: created, Status: responses.ResponseStatusInProgress, Model: t.model,
		Output: []responses.ResponseInputItemUnionParam{}, Instructions: e.instructions, MaxOutputTokens: e.maxOutputTokens,
		ParallelToolCalls: e.parallelToolCalls, Temperature: e.temperature, Text: e.text, ToolChoice: e.toolChoice,
		Tools: e.tools, TopP: e.topP, Metadata: e.metadata}
	if r.ToolChoice == nil {
		r.ToolChoice = json.RawMessage(`"auto"`)
	}
	if r.Tools == nil {
		r.Tools = json.RawMessage(`[]`)
	}
	if r.Metadata == nil {
		r.Metadata = json.RawMessage(`{}`)
	}
	return r
}

// responsesStatus maps a chat finish reason to a Response's status: the answer
// ran out of tokens or was filtered is "incomplete", with the reason.
func responsesStatus(finish string) (responses.ResponseStatus, *responses.ResponseIncompleteDetails) {
	switch finish {
	case "length":
		return responses.ResponseStatusIncomplete, &responses.ResponseIncompleteDetails{Reason: "max_output_tokens"}
	case "content_filter":
		return responses.ResponseStatusIncomplete, &responses.ResponseIncompleteDetails{Reason: "content_filter"}
	}
	return responses.ResponseStatusCompleted, nil
}

func responsesUsage(u *openai.Usage) *responses.ResponseUsage {
	if u == nil {
		return nil
	}
	r := &responses.ResponseUsage{InputTokens: int64(max(u.PromptTokens, 0)), OutputTokens: int64(max(u.CompletionTokens, 0))}
	r.TotalTokens = r.InputTokens + r.OutputTokens
	if d := u.PromptTokensDetails; d != nil {
		r.InputTokensDetails.CachedTokens = int64(d.CachedTokens)
	}
	if d := u.CompletionTokensDetails; d != nil {
		r.OutputTokensDetails.ReasoningTokens = int64(d.ReasoningTokens)
	}
	return r
}

// newID returns an id with prefix, unique enough to tell a caller's
// responses and items apart (they are not stored, nor secret).
func responsesID(prefix string) string {
	var b [12]byte
	for i := 0; i < len(b); i += 8 {
		v := rand.Uint64()
		for j := 0; j < 8 && i+j < len(b); j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return prefix + hex.EncodeToString(b[:])
}

// function returns the output item of a function call, its name split
// back into namespace and name where it was a namespace's.
func (t *ResponsesChat) function(id, callID, name, args string, done bool) *responses.ResponseFunctionToolCallParam {
	fc := &responses.ResponseFunctionToolCallParam{ID: param.NewOpt(id), CallID: callID, Name: name, Arguments: args,
		Status: responses.ResponseFunctionToolCallStatusInProgress}
	if done {
		fc.Status = responses.ResponseFunctionToolCallStatusCompleted
	}
	if ns, ok := t.namespaced[name]; ok {
		fc.Namespace, fc.Name = param.NewOpt(ns[0]), ns[1]
	}
	return fc
}

func responsesMessage(id, text string, done bool) *responses.ResponseOutputMessageParam {
	m := &responses.ResponseOutputMessageParam{ID: id, Status: responses.ResponseOutputMessageStatusInProgress,
		Content: []responses.ResponseOutputMessageContentUnionParam{}}
	if done {
		m.Status = responses.ResponseOutputMessageStatusCompleted
		m.Content = append(m.Content, responses.ResponseOutputMessageContentUnionParam{OfOutputText: responsesOutputText(text)})
	}
	return m
}

func responsesOutputText(text string) *responses.ResponseOutputTextParam {
	return &responses.ResponseOutputTextParam{Text: text, Annotations: []responses.ResponseOutputTextAnnotationUnionParam{}}
}

// Answer translates a whole chat answer (any status) into the door's: a
// Response object for a 200, an error in OpenAI's shape otherwise (the
// Responses API's errors are OpenAI's: an upstream error already in that
// shape goes back as it is). It returns what the upstream said the call
// used (counted false when it said nothing).
func (t *ResponsesChat) Answer(status int, data []byte) (body []byte, u wire.Usage, counted bool) {
	if status != 200 {
		return ResponsesErrorBody(status, data), wire.Usage{}, false
	}
	// The answer is read with gjson: go-openai's message decoding reads
	// every message twice (content as a string, then as parts), and a
	// long answer's text is most of what a call costs here.
	root := gjson.ParseBytes(data)
	ch := root.Get("choices.0")
	if !root.IsObject() || !ch.IsObject() {
		return responsesErrorJSON("upstream_error", "the model's answer was not a chat completion", "server_error"), wire.Usage{}, false
	}
	created := root.Get("created").Int()
	if created == 0 {
		created = time.Now().Unix()
	}
	r := t.newResponse(responsesID("resp_"), created)
	msg := ch.Get("message")
	content, refusal, toolCalls := msg.Get("content").Str, msg.Get("refusal").Str, msg.Get("tool_calls")
	if content != "" || refusal != "" || !toolCalls.IsArray() || len(toolCalls.Array()) == 0 {
		m := responsesMessage(responsesID("msg_"), content, true)
		if refusal != "" {
			m.Content = append(m.Content, responses.ResponseOutputMessageContentUnionParam{OfRefusal: &responses.ResponseOutputRefusalParam{Refusal: refusal}})
		}
		r.Output = append(r.Output, responses.ResponseInputItemUnionParam{OfOutputMessage: m})
	}
	toolCalls.ForEach(func(_, tc gjson.Result) bool {
		args := tc.Get("function.arguments").Str
		r.Output = append(r.Output, responses.ResponseInputItemUnionParam{
			OfFunctionCall: t.function(responsesID("fc_"), tc.Get("id").Str, tc.Get("function.name").Str, args, true)})
		return true
	})
	r.Status, r.IncompleteDetails = responsesStatus(ch.Get("finish_reason").Str)
	if us := root.Get("usage"); us.IsObject() {
		var ou openai.Usage
		if json.Unmarshal([]byte(us.Raw), &ou) == nil {
			counted = true
			r.Usage = responsesUsage(&ou)
			u = wire.Usage{Input: r.Usage.InputTokens, Output: r.Usage.OutputTokens}
		}
	}
	body, err := json.Marshal(&r)
	if err != nil {
		return responsesErrorJSON("upstream_error", "the model's answer could not be translated: "+err.Error(), "server_error"), u, counted
	}
	return body, u, counted
}

// ResponsesErrorBody turns an upstream's error answer into OpenAI's error shape:
// one already in it goes back as it is; another (vLLM's older
// {"object":"error","message":…}, or plain text) is wrapped, its message
// kept.
func ResponsesErrorBody(status int, data []byte) []byte {
	if gjson.GetBytes(data, "error.message").Exists() {
		return data
	}
	msg := gjson.GetBytes(data, "message").Str
	if msg == "" {
		msg = strings.TrimSpace(string(data))
		if len(msg) > 1024 {
			msg = msg[:1024]
		}
	}
	if msg == "" {
		msg = "the model's server answered HTTP " + strconv.Itoa(status)
	}
	typ := "invalid_request_error"
	if status >= 500 {
		typ = "server_error"
	}
	return responsesErrorJSON("upstream_error", msg, typ)
}

func responsesErrorJSON(code, message, typ string) []byte {
	var b struct {
		Error struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Param   *string `json:"param"`
			Code    string  `json:"code"`
		} `json:"error"`
	}
	b.Error.Message, b.Error.Type, b.Error.Code = message, typ, code
	data, _ := json.Marshal(&b)
	return data
}
