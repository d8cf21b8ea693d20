package wire

import (
	"strings"

	"github.com/tidwall/gjson"
)

// What a guardrail reads of a request is every field of it that reaches a
// model as text, door by door: the field lists below are the one place
// that says which those are. Each door's decoder reads a request's text
// with its list (Call.Input: what the pattern guardrails and the
// model-based check read), and the gateway's tests plant a denied word in
// each field of each list and see the call refused.
//
// The lists are read fail-closed: a field they do not name is text (a
// string as it is, an object or array as JSON is read), so a field an API
// adds later is read until someone says it is not. What is not text is named
// (Skip): the model's name, roles and types, ids, settings, and binary
// payloads (base64 audio and files), which a pattern cannot read and a
// guard model should not be shown.

// Kind says how a field is read.
type Kind uint8

const (
	// Text is read as written: a string here is the model's to read; an
	// object or array here is read through the fields listed under it,
	// and wholly (every string and key) where nothing is listed.
	Text Kind = iota
	// Skip is not text: nothing here is read but the fields listed under
	// it.
	Skip
	// JSON is JSON the model is shown as written (a tool's parameter
	// schema, an earlier tool call's input): read as written, and, when
	// it escapes any of its text (\u0041 for A), its strings and keys
	// unescaped too, so that an escape hides nothing from a pattern.
	JSON
	// Encoded is a string that holds JSON (an earlier tool call's
	// arguments): read as JSON is.
	Encoded
	// Payload is a content block's data (Anthropic's source.data): base64
	// bytes when its block's type says base64 (not read), text otherwise.
	Payload
)

// Field is one place in a request: Path is object keys joined by dots,
// with # for every element of an array ("messages.#.content"). Like, when
// set, is another field's path whose value this one is read as: content
// blocks nest (a tool result's content is blocks like a message's).
type Field struct {
	Path string
	Kind Kind
	Like string
}

// chatFields are the chat completions door's.
var chatFields = []Field{
	{Path: "model", Kind: Skip},
	{Path: "messages.#.role", Kind: Skip},
	{Path: "messages.#.content"}, // a string, or content parts:
	{Path: "messages.#.content.#.type", Kind: Skip},
	{Path: "messages.#.content.#.text"},
	{Path: "messages.#.content.#.refusal"},
	{Path: "messages.#.content.#.image_url"}, // a URL or a data: URL, read as written (never decoded)
	{Path: "messages.#.content.#.image_url.url"},
	{Path: "messages.#.content.#.image_url.detail", Kind: Skip},
	{Path: "messages.#.content.#.input_audio", Kind: Skip}, // base64 audio and its format
	{Path: "messages.#.content.#.file", Kind: Skip},        // base64 file data, a file id…
	{Path: "messages.#.content.#.file.filename"},           // …and its name, which the model reads
	{Path: "messages.#.content.#.cache_control", Kind: Skip},
	{Path: "messages.#.name"},
	{Path: "messages.#.refusal"},
	{Path: "messages.#.reasoning_content"},
	{Path: "messages.#.tool_call_id", Kind: Skip},
	{Path: "messages.#.tool_calls.#.id", Kind: Skip},
	{Path: "messages.#.tool_calls.#.type", Kind: Skip},
	{Path: "messages.#.tool_calls.#.function.name"},
	{Path: "messages.#.tool_calls.#.function.arguments", Kind: Encoded},
	{Path: "messages.#.function_call.name"},
	{Path: "messages.#.function_call.arguments", Kind: Encoded},
	{Path: "messages.#.audio", Kind: Skip}, // the id of an earlier spoken answer
	{Path: "tools.#.type", Kind: Skip},
	{Path: "tools.#.function.name"},
	{Path: "tools.#.function.description"},
	{Path: "tools.#.function.parameters", Kind: JSON},
	{Path: "functions.#.name"},
	{Path: "functions.#.description"},
	{Path: "functions.#.parameters", Kind: JSON},
	{Path: "function_call", Kind: Skip}, // "auto", "none", or a function by name:
	{Path: "function_call.name"},
	{Path: "tool_choice", Kind: Skip},
	{Path: "tool_choice.function.name"},
	{Path: "response_format", Kind: Skip},
	{Path: "response_format.json_schema.name"},
	{Path: "response_format.json_schema.description"},
	{Path: "response_format.json_schema.schema", Kind: JSON},
	{Path: "prediction.type", Kind: Skip},
	{Path: "prediction.content"},
	{Path: "prediction.content.#.type", Kind: Skip},
	{Path: "prediction.content.#.text"},
	{Path: "stop"},
	// Settings, and what identifies the caller to the provider (which
	// the model never reads).
	{Path: "audio", Kind: Skip},
	{Path: "logit_bias", Kind: Skip},
	{Path: "metadata", Kind: Skip},
	{Path: "modalities", Kind: Skip},
	{Path: "prompt_cache_key", Kind: Skip},
	{Path: "reasoning_effort", Kind: Skip},
	{Path: "safety_identifier", Kind: Skip},
	{Path: "service_tier", Kind: Skip},
	{Path: "stream_options", Kind: Skip},
	{Path: "user", Kind: Skip},
	{Path: "verbosity", Kind: Skip},
}

// completionsFields are the completions door's.
var completionsFields = []Field{
	{Path: "model", Kind: Skip},
	{Path: "prompt"}, // a string, strings, or token ids:
	{Path: "prompt.#"},
	{Path: "prompt.#.#", Kind: Skip}, // token ids are no text a pattern can read
	{Path: "suffix"},
	{Path: "stop"},
	{Path: "logit_bias", Kind: Skip},
	{Path: "stream_options", Kind: Skip},
	{Path: "user", Kind: Skip},
}

// embeddingsFields are the embeddings door's.
var embeddingsFields = []Field{
	{Path: "model", Kind: Skip},
	{Path: "input"}, // a string, strings, or token ids:
	{Path: "input.#"},
	{Path: "input.#.#", Kind: Skip},
	{Path: "encoding_format", Kind: Skip},
	{Path: "user", Kind: Skip},
}

// responsesFields are the Responses door's.
var responsesFields = []Field{
	{Path: "model", Kind: Skip},
	{Path: "instructions", Like: "input"}, // a string, or input items
	{Path: "input"},                       // a string, or items:
	{Path: "input.#.type", Kind: Skip},
	{Path: "input.#.role", Kind: Skip},
	{Path: "input.#.id", Kind: Skip},
	{Path: "input.#.status", Kind: Skip},
	{Path: "input.#.call_id", Kind: Skip},
	{Path: "input.#.content"}, // a message's: a string, or content parts
	{Path: "input.#.content.#.type", Kind: Skip},
	{Path: "input.#.content.#.text"}, // input_text, output_text, and a reasoning item's text
	{Path: "input.#.content.#.refusal"},
	{Path: "input.#.content.#.image_url"}, // a URL or a data: URL, read as written
	{Path: "input.#.content.#.detail", Kind: Skip},
	{Path: "input.#.content.#.file_id", Kind: Skip},
	{Path: "input.#.content.#.file_data", Kind: Skip},
	{Path: "input.#.content.#.filename"},
	{Path: "input.#.content.#.file_url"},
	{Path: "input.#.content.#.logprobs", Kind: Skip},
	{Path: "input.#.name"},      // a function or custom tool call's
	{Path: "input.#.namespace"}, // a function call's (its name upstream is namespace__name)
	{Path: "input.#.arguments", Kind: Encoded},
	{Path: "input.#.input"},                           // a custom tool call's
	{Path: "input.#.output", Like: "input.#.content"}, // a tool call's output: a string, or content parts
	{Path: "input.#.summary.#.type", Kind: Skip},
	{Path: "input.#.summary.#.text"},
	{Path: "input.#.encrypted_content", Kind: Skip},
	{Path: "tools.#.type", Kind: Skip},
	{Path: "tools.#.name"},
	{Path: "tools.#.description"},
	{Path: "tools.#.parameters", Kind: JSON},
	{Path: "tools.#.headers", Kind: Skip}, // a remote MCP server's credentials
	{Path: "tools.#.authorization", Kind: Skip},
	{Path: "tool_choice", Kind: Skip},
	{Path: "tool_choice.name"},
	{Path: "text", Kind: Skip},
	{Path: "text.format.name"},
	{Path: "text.format.description"},
	{Path: "text.format.schema", Kind: JSON},
	{Path: "prompt", Kind: Skip}, // a stored prompt's id and version, and the text of its variables
	{Path: "prompt.variables"},
	{Path: "conversation", Kind: Skip},
	{Path: "include", Kind: Skip},
	{Path: "metadata", Kind: Skip},
	{Path: "previous_response_id", Kind: Skip},
	{Path: "prompt_cache_key", Kind: Skip},
	{Path: "reasoning", Kind: Skip},
	{Path: "safety_identifier", Kind: Skip},
	{Path: "service_tier", Kind: Skip},
	{Path: "stream_options", Kind: Skip},
	{Path: "truncation", Kind: Skip},
	{Path: "user", Kind: Skip},
}

// messagesFields are the Messages door's.
var messagesFields = []Field{
	{Path: "model", Kind: Skip},
	{Path: "system", Like: "messages.#.content"}, // a string, or text blocks
	{Path: "messages.#.role", Kind: Skip},
	{Path: "messages.#.content"}, // a string, or content blocks:
	{Path: "messages.#.content.#.type", Kind: Skip},
	{Path: "messages.#.content.#.id", Kind: Skip},
	{Path: "messages.#.content.#.tool_use_id", Kind: Skip},
	{Path: "messages.#.content.#.cache_control", Kind: Skip},
	{Path: "messages.#.content.#.signature", Kind: Skip},
	{Path: "messages.#.content.#.data", Kind: Skip}, // redacted thinking: encrypted
	{Path: "messages.#.content.#.text"},
	{Path: "messages.#.content.#.thinking"},
	{Path: "messages.#.content.#.name"}, // a tool call's
	{Path: "messages.#.content.#.input", Kind: JSON},
	{Path: "messages.#.content.#.content", Like: "messages.#.content"}, // a tool result's, a search result's
	{Path: "messages.#.content.#.source.type", Kind: Skip},
	{Path: "messages.#.content.#.source.media_type", Kind: Skip},
	{Path: "messages.#.content.#.source.file_id", Kind: Skip},
	{Path: "messages.#.content.#.source.data", Kind: Payload},
	{Path: "messages.#.content.#.source.url"},
	{Path: "messages.#.content.#.source.content", Like: "messages.#.content"},
	{Path: "messages.#.content.#.title"},   // a document's, a search result's
	{Path: "messages.#.content.#.context"}, // a document's
	{Path: "tools.#.type", Kind: Skip},
	{Path: "tools.#.cache_control", Kind: Skip},
	{Path: "tools.#.name"},
	{Path: "tools.#.description"},
	{Path: "tools.#.input_schema", Kind: JSON},
	{Path: "tool_choice", Kind: Skip},
	{Path: "tool_choice.name"},
	{Path: "stop_sequences"},
	{Path: "container", Kind: Skip},
	{Path: "context_management", Kind: Skip},
	{Path: "mcp_servers", Kind: Skip}, // where to reach them, with what credential…
	{Path: "mcp_servers.#.name"},      // …and the name the model is shown
	{Path: "metadata", Kind: Skip},
	{Path: "service_tier", Kind: Skip},
	{Path: "thinking", Kind: Skip},
}

// Fields returns the field list of the door that serves ep (a copy): what
// its decoder reads as text, and what it does not.
func Fields(ep Endpoint) []Field {
	return append([]Field(nil), fieldLists[ep]...)
}

var fieldLists = map[Endpoint][]Field{
	Chat: chatFields, Completions: completionsFields, Embeddings: embeddingsFields,
	Responses: responsesFields, Messages: messagesFields,
}

// readers are the lists compiled, by endpoint.
var readers = func() map[Endpoint]*node {
	m := make(map[Endpoint]*node, len(fieldLists))
	for ep, fields := range fieldLists {
		m[ep] = compile(fields)
	}
	return m
}()

// node is a place in a request's tree of fields: its kind, the fields
// listed under it by key, and (each) what every element of an array here
// is.
type node struct {
	kind Kind
	kids map[string]*node
	each *node
}

func (n *node) kid(seg string) *node {
	if seg == "#" {
		return n.each
	}
	return n.kids[seg]
}

// compile builds the tree of a field list. A place named only on the way
// to a field takes its parent's kind (tool_choice is skipped, but for its
// function's name).
func compile(fields []Field) *node {
	root := &node{kind: Text}
	at := func(path string) (parent *node, seg string, n *node) {
		n = root
		for _, s := range strings.Split(path, ".") {
			parent, seg = n, s
			if n = parent.kid(s); n == nil {
				n = &node{kind: parent.kind}
				if s == "#" {
					parent.each = n
				} else {
					if parent.kids == nil {
						parent.kids = map[string]*node{}
					}
					parent.kids[s] = n
				}
			}
		}
		return parent, seg, n
	}
	for _, f := range fields {
		if f.Like == "" {
			_, _, n := at(f.Path)
			n.kind = f.Kind
		}
	}
	for _, f := range fields {
		if f.Like != "" {
			parent, seg, _ := at(f.Path)
			_, _, like := at(f.Like)
			if seg == "#" {
				parent.each = like
			} else {
				parent.kids[seg] = like
			}
		}
	}
	return root
}

// TextOf appends to dst the text of a request to ep (a parsed body), in
// the order it is written: every field its door's list reads.
func TextOf(dst []string, ep Endpoint, root gjson.Result) []string {
	r := readers[ep]
	if r == nil {
		return dst
	}
	return r.read(dst, root)
}

// read appends the text of v, the value at n.
func (n *node) read(dst []string, v gjson.Result) []string {
	switch n.kind {
	case JSON:
		return readJSON(dst, v)
	case Encoded:
		if v.Type != gjson.String {
			return readJSON(dst, v)
		}
		return readWritten(appendText(dst, v.Str), v.Str)
	}
	switch {
	case v.Type == gjson.String:
		if n.kind != Skip {
			dst = appendText(dst, v.Str)
		}
	case v.IsArray():
		if n.each == nil && n.kind == Skip {
			return dst
		}
		v.ForEach(func(_, e gjson.Result) bool {
			dst = n.readKid(dst, n.each, e)
			return true
		})
	case v.IsObject():
		if n.kids == nil && n.kind == Skip {
			return dst
		}
		v.ForEach(func(k, e gjson.Result) bool {
			kid := n.kids[k.Str]
			if kid != nil && kid.kind == Payload && v.Get("type").Str == "base64" {
				return true
			}
			dst = n.readKid(dst, kid, e)
			return true
		})
	}
	return dst
}

// readKid reads v at kid, a place under n: one not listed is read wholly
// (fail-closed) under a place that is text, and not at all under one
// that is not.
func (n *node) readKid(dst []string, kid *node, v gjson.Result) []string {
	switch {
	case kid != nil:
		return kid.read(dst, v)
	case n.kind == Skip:
		return dst
	default:
		return readJSON(dst, v)
	}
}

// readJSON appends v read as JSON: a string as it is; an object or an
// array as written, and unescaped (readWritten). Numbers, booleans and
// null are no text.
func readJSON(dst []string, v gjson.Result) []string {
	switch {
	case v.Type == gjson.String:
		return appendText(dst, v.Str)
	case v.IsObject() || v.IsArray():
		return readWritten(appendText(dst, v.Raw), v.Raw)
	}
	return dst
}

// readWritten appends, when JSON written as raw escapes any of its text,
// every string and object key in it unescaped.
func readWritten(dst []string, raw string) []string {
	if strings.IndexByte(raw, '\\') < 0 || !gjson.Valid(raw) {
		return dst
	}
	return unescaped(dst, gjson.Parse(raw))
}

// unescaped appends every string and object key in v.
func unescaped(dst []string, v gjson.Result) []string {
	switch {
	case v.Type == gjson.String:
		dst = appendText(dst, v.Str)
	case v.IsArray() || v.IsObject():
		obj := v.IsObject()
		v.ForEach(func(k, e gjson.Result) bool {
			if obj {
				dst = appendText(dst, k.Str)
			}
			dst = unescaped(dst, e)
			return true
		})
	}
	return dst
}

func appendText(dst []string, s string) []string {
	if s == "" {
		return dst
	}
	return append(dst, s)
}
