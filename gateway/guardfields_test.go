package gateway_test

import (
	"strings"
	"testing"

	"github.com/klique-ai/klique/gateway/wire"
)

// inputExample is a request to a door with one field holding @@, where a
// test plants a text; its model is @model.
type inputExample struct {
	// field is the path of the field in the door's list (wire.Fields);
	// "*" is a field no list names, read because the lists fail closed.
	field string
	body  string
	// legs are the ways to an upstream the call can take and be answered
	// (nil: every way the door has): a translation refuses some requests
	// (a document, a stored prompt), which are then read only on their way
	// through.
	legs []string
	// patternsOnly: the model-based check is not shown this text (the
	// payload of a data: URL, shown as its media type and size).
	patternsOnly bool
	// escaped plants the denied text with its first letter escaped
	// (\u0054 for T), inside a JSON string held in a JSON string.
	escaped bool
}

// doorPaths are the doors' operations, and doorLegs the ways to an
// upstream each has: passed through to what speaks its API, translated to
// chat completions.
var (
	doorPaths = map[wire.Endpoint]string{wire.Chat: "chat/completions", wire.Completions: "completions", wire.Embeddings: "embeddings",
		wire.Responses: "responses", wire.Messages: "messages"}
	doorLegs = map[wire.Endpoint][]string{wire.Chat: {legChat}, wire.Completions: {legChat}, wire.Embeddings: {legChat},
		wire.Responses: {legChat, legOpenAI}, wire.Messages: {legChat, legAnthropic}}
)

const (
	chatTool     = `"tools":[{"type":"function","function":{"name":"fn","parameters":{"type":"object"}}}]`
	chatToolTurn = `{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"%s","arguments":"%s"}}]},{"role":"tool","tool_call_id":"call_1","content":"done"}`
	respCallTurn = `{"role":"user","content":"hi"},{"type":"function_call","call_id":"c1","name":"%s","arguments":"%s"},{"type":"function_call_output","call_id":"c1","output":"%s"}`
	msgToolTurn  = `{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"%s","input":%s}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":%s}]}`
)

func fill(format string, args ...string) string {
	for _, a := range args {
		format = strings.Replace(format, "%s", a, 1)
	}
	return format
}

func chatBody(rest string) string { return `{"model":"@model",` + rest + `}` }
func chatMsgs(msgs string) string { return chatBody(`"messages":[` + msgs + `]`) }
func respBody(rest string) string { return `{"model":"@model",` + rest + `}` }
func msgBody(rest string) string  { return `{"model":"@model","max_tokens":50,` + rest + `}` }
func msgMsgs(msgs string) string  { return msgBody(`"messages":[` + msgs + `]`) }

const userHi = `{"role":"user","content":"hi"}`

// inputExamples plant a text in each field each door's list reads: the
// test below fails for a field the list gains without an example here.
var inputExamples = map[wire.Endpoint][]inputExample{
	wire.Chat: {
		{field: "messages.#.content", body: chatMsgs(`{"role":"user","content":"say @@"}`)},
		{field: "messages.#.content.#.text", body: chatMsgs(`{"role":"user","content":[{"type":"text","text":"say @@"}]}`)},
		{field: "messages.#.content.#.refusal", body: chatMsgs(`{"role":"assistant","content":[{"type":"refusal","refusal":"no @@"}]},` + userHi)},
		{field: "messages.#.content.#.image_url", body: chatMsgs(`{"role":"user","content":[{"type":"text","text":"look"},{"type":"image_url","image_url":"https://img.example/@@.png"}]}`)},
		{field: "messages.#.content.#.image_url.url", body: chatMsgs(`{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://img.example/@@.png","detail":"low"}}]}`)},
		{field: "messages.#.content.#.image_url.url", body: chatMsgs(`{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0@@"}}]}`), patternsOnly: true},
		{field: "messages.#.content.#.file.filename", body: chatMsgs(`{"role":"user","content":[{"type":"file","file":{"filename":"@@.pdf","file_data":"data:application/pdf;base64,JVBERi0"}}]}`)},
		{field: "messages.#.name", body: chatMsgs(`{"role":"user","name":"@@","content":"hi"}`)},
		{field: "messages.#.refusal", body: chatMsgs(`{"role":"assistant","content":null,"refusal":"no @@"},` + userHi)},
		{field: "messages.#.reasoning_content", body: chatMsgs(`{"role":"assistant","content":"ok","reasoning_content":"think @@"},` + userHi)},
		{field: "messages.#.tool_calls.#.function.name", body: chatMsgs(fill(chatToolTurn, "fn_@@", "{}"))},
		{field: "messages.#.tool_calls.#.function.arguments", body: chatMsgs(fill(chatToolTurn, "fn", `{\"q\":\"@@\"}`))},
		{field: "messages.#.tool_calls.#.function.arguments", body: chatMsgs(fill(chatToolTurn, "fn", `{\"q\":\"@@\"}`)), escaped: true},
		{field: "messages.#.function_call.name", body: chatMsgs(userHi + `,{"role":"assistant","content":null,"function_call":{"name":"fn_@@","arguments":"{}"}},{"role":"function","name":"fn","content":"done"}`)},
		{field: "messages.#.function_call.arguments", body: chatMsgs(userHi + `,{"role":"assistant","content":null,"function_call":{"name":"fn","arguments":"{\"q\":\"@@\"}"}},{"role":"function","name":"fn","content":"done"}`)},
		{field: "tools.#.function.name", body: chatBody(`"messages":[` + userHi + `],"tools":[{"type":"function","function":{"name":"fn_@@","parameters":{"type":"object"}}}]`)},
		{field: "tools.#.function.description", body: chatBody(`"messages":[` + userHi + `],"tools":[{"type":"function","function":{"name":"fn","description":"finds @@","parameters":{"type":"object"}}}]`)},
		{field: "tools.#.function.parameters", body: chatBody(`"messages":[` + userHi + `],"tools":[{"type":"function","function":{"name":"fn","parameters":{"type":"object","properties":{"q":{"type":"string","description":"a @@"}}}}}]`)},
		{field: "tools.#.function.parameters", body: chatBody(`"messages":[` + userHi + `],"tools":[{"type":"function","function":{"name":"fn","parameters":{"type":"object","properties":{"q":{"type":"string","enum":["a","@@"],"default":"a"}}}}}]`)},
		{field: "tools.#.function.parameters", body: chatBody(`"messages":[` + userHi + `],"tools":[{"type":"function","function":{"name":"fn","parameters":{"type":"object","title":"t","properties":{"@@":{"type":"string"}}}}}]`)},
		{field: "functions.#.name", body: chatBody(`"messages":[` + userHi + `],"functions":[{"name":"fn_@@","parameters":{"type":"object"}}]`)},
		{field: "functions.#.description", body: chatBody(`"messages":[` + userHi + `],"functions":[{"name":"fn","description":"finds @@"}]`)},
		{field: "functions.#.parameters", body: chatBody(`"messages":[` + userHi + `],"functions":[{"name":"fn","parameters":{"type":"object","properties":{"q":{"type":"string","default":"@@"}}}}]`)},
		{field: "function_call.name", body: chatBody(`"messages":[` + userHi + `],"functions":[{"name":"fn"}],"function_call":{"name":"fn_@@"}`)},
		{field: "tool_choice.function.name", body: chatBody(`"messages":[` + userHi + `],` + chatTool + `,"tool_choice":{"type":"function","function":{"name":"fn_@@"}}`)},
		{field: "response_format.json_schema.name", body: chatBody(`"messages":[` + userHi + `],"response_format":{"type":"json_schema","json_schema":{"name":"s_@@","schema":{"type":"object"}}}`)},
		{field: "response_format.json_schema.description", body: chatBody(`"messages":[` + userHi + `],"response_format":{"type":"json_schema","json_schema":{"name":"s","description":"a @@","schema":{"type":"object"}}}`)},
		{field: "response_format.json_schema.schema", body: chatBody(`"messages":[` + userHi + `],"response_format":{"type":"json_schema","json_schema":{"name":"s","schema":{"type":"object","properties":{"a":{"description":"@@"}}}}}`)},
		{field: "prediction.content", body: chatBody(`"messages":[` + userHi + `],"prediction":{"type":"content","content":"@@"}`)},
		{field: "prediction.content.#.text", body: chatBody(`"messages":[` + userHi + `],"prediction":{"type":"content","content":[{"type":"text","text":"@@"}]}`)},
		{field: "stop", body: chatBody(`"messages":[` + userHi + `],"stop":"@@"`)},
		{field: "stop", body: chatBody(`"messages":[` + userHi + `],"stop":["x","@@"]`)},
		{field: "*", body: chatBody(`"messages":[` + userHi + `],"x_future_field":{"note":"@@"}`)},
	},
	wire.Completions: {
		{field: "prompt", body: `{"model":"@model","prompt":"say @@"}`},
		{field: "prompt.#", body: `{"model":"@model","prompt":["a","say @@"]}`},
		{field: "suffix", body: `{"model":"@model","prompt":"a","suffix":"@@"}`},
		{field: "stop", body: `{"model":"@model","prompt":"a","stop":["@@"]}`},
	},
	wire.Embeddings: {
		{field: "input", body: `{"model":"@model","input":"say @@"}`},
		{field: "input.#", body: `{"model":"@model","input":["a","say @@"]}`},
	},
	wire.Responses: {
		{field: "instructions", body: respBody(`"instructions":"be @@","input":"hi"`)},
		{field: "instructions", body: respBody(`"instructions":[{"role":"developer","content":"be @@"}],"input":"hi"`), legs: []string{legOpenAI}},
		{field: "input", body: respBody(`"input":"say @@"`)},
		{field: "input.#.content", body: respBody(`"input":[{"role":"user","content":"say @@"}]`)},
		{field: "input.#.content.#.text", body: respBody(`"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"say @@"}]}]`)},
		{field: "input.#.content.#.refusal", body: respBody(`"input":[{"type":"message","role":"assistant","content":[{"type":"refusal","refusal":"no @@"}]},` + userHi + `]`)},
		{field: "input.#.content.#.image_url", body: respBody(`"input":[{"role":"user","content":[{"type":"input_text","text":"look"},{"type":"input_image","image_url":"https://img.example/@@.png","detail":"auto"}]}]`)},
		{field: "input.#.content.#.filename", body: respBody(`"input":[{"role":"user","content":[{"type":"input_file","filename":"@@.pdf","file_data":"data:application/pdf;base64,JVBERi0"}]}]`), legs: []string{legOpenAI}},
		{field: "input.#.content.#.file_url", body: respBody(`"input":[{"role":"user","content":[{"type":"input_file","file_url":"https://files.example/@@.pdf"}]}]`), legs: []string{legOpenAI}},
		{field: "input.#.name", body: respBody(`"input":[` + fill(respCallTurn, "fn_@@", "{}", "done") + `]`)},
		{field: "input.#.namespace", body: respBody(`"input":[{"role":"user","content":"hi"},{"type":"function_call","call_id":"c1","namespace":"ns_@@","name":"fn","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":"done"}]`)},
		{field: "input.#.arguments", body: respBody(`"input":[` + fill(respCallTurn, "fn", `{\"q\":\"@@\"}`, "done") + `]`)},
		{field: "input.#.arguments", body: respBody(`"input":[` + fill(respCallTurn, "fn", `{\"q\":\"@@\"}`, "done") + `]`), escaped: true},
		{field: "input.#.input", body: respBody(`"input":[{"role":"user","content":"hi"},{"type":"custom_tool_call","call_id":"c1","name":"patch","input":"@@"},{"type":"custom_tool_call_output","call_id":"c1","output":"done"}]`), legs: []string{legOpenAI}},
		{field: "input.#.output", body: respBody(`"input":[` + fill(respCallTurn, "fn", "{}", "found @@") + `]`)},
		{field: "input.#.summary.#.text", body: respBody(`"input":[{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"think @@"}]},` + userHi + `]`)},
		{field: "tools.#.name", body: respBody(`"input":"hi","tools":[{"type":"function","name":"fn_@@","parameters":{"type":"object"}}]`)},
		{field: "tools.#.description", body: respBody(`"input":"hi","tools":[{"type":"function","name":"fn","description":"finds @@","parameters":{"type":"object"}}]`)},
		{field: "tools.#.parameters", body: respBody(`"input":"hi","tools":[{"type":"function","name":"fn","parameters":{"type":"object","properties":{"q":{"type":"string","description":"a @@"}}}}]`)},
		{field: "tool_choice.name", body: respBody(`"input":"hi","tools":[{"type":"function","name":"fn","parameters":{"type":"object"}}],"tool_choice":{"type":"function","name":"fn_@@"}`)},
		{field: "text.format.name", body: respBody(`"input":"hi","text":{"format":{"type":"json_schema","name":"s_@@","schema":{"type":"object"}}}`)},
		{field: "text.format.description", body: respBody(`"input":"hi","text":{"format":{"type":"json_schema","name":"s","description":"a @@","schema":{"type":"object"}}}`)},
		{field: "text.format.schema", body: respBody(`"input":"hi","text":{"format":{"type":"json_schema","name":"s","schema":{"type":"object","properties":{"a":{"description":"@@"}}}}}`)},
		{field: "prompt.variables", body: respBody(`"prompt":{"id":"pmpt_1","variables":{"city":"@@"}}`), legs: []string{legOpenAI}},
		{field: "*", body: respBody(`"input":"hi","x_future_field":["@@"]`)},
	},
	wire.Messages: {
		{field: "system", body: msgBody(`"system":"be @@","messages":[` + userHi + `]`)},
		{field: "system", body: msgBody(`"system":[{"type":"text","text":"be @@"}],"messages":[` + userHi + `]`)},
		{field: "messages.#.content", body: msgMsgs(`{"role":"user","content":"say @@"}`)},
		{field: "messages.#.content.#.text", body: msgMsgs(`{"role":"user","content":[{"type":"text","text":"say @@"}]}`)},
		{field: "messages.#.content.#.thinking", body: msgMsgs(userHi + `,{"role":"assistant","content":[{"type":"thinking","thinking":"think @@","signature":"sig"},{"type":"text","text":"ok"}]},` + userHi)},
		{field: "messages.#.content.#.name", body: msgMsgs(fill(msgToolTurn, "fn_@@", "{}", `"done"`))},
		{field: "messages.#.content.#.input", body: msgMsgs(fill(msgToolTurn, "fn", `{"q":"@@"}`, `"done"`))},
		{field: "messages.#.content.#.input", body: msgMsgs(fill(msgToolTurn, "fn", `{"@@":1}`, `"done"`))},
		{field: "messages.#.content.#.content", body: msgMsgs(fill(msgToolTurn, "fn", "{}", `"found @@"`))},
		{field: "messages.#.content.#.content", body: msgMsgs(fill(msgToolTurn, "fn", "{}", `[{"type":"text","text":"found @@"}]`))},
		{field: "messages.#.content.#.source.url", body: msgMsgs(`{"role":"user","content":[{"type":"image","source":{"type":"url","url":"https://img.example/@@.png"}},{"type":"text","text":"look"}]}`)},
		{field: "messages.#.content.#.source.data", body: msgMsgs(`{"role":"user","content":[{"type":"document","source":{"type":"text","media_type":"text/plain","data":"notes @@"}},{"type":"text","text":"read"}]}`), legs: []string{legAnthropic}},
		{field: "messages.#.content.#.source.content", body: msgMsgs(`{"role":"user","content":[{"type":"document","source":{"type":"content","content":[{"type":"text","text":"notes @@"}]}},{"type":"text","text":"read"}]}`), legs: []string{legAnthropic}},
		{field: "messages.#.content.#.title", body: msgMsgs(`{"role":"user","content":[{"type":"document","source":{"type":"text","media_type":"text/plain","data":"x"},"title":"@@"},{"type":"text","text":"read"}]}`), legs: []string{legAnthropic}},
		{field: "messages.#.content.#.context", body: msgMsgs(`{"role":"user","content":[{"type":"document","source":{"type":"text","media_type":"text/plain","data":"x"},"context":"@@"},{"type":"text","text":"read"}]}`), legs: []string{legAnthropic}},
		{field: "tools.#.name", body: msgBody(`"messages":[` + userHi + `],"tools":[{"name":"fn_@@","input_schema":{"type":"object"}}]`)},
		{field: "tools.#.description", body: msgBody(`"messages":[` + userHi + `],"tools":[{"name":"fn","description":"finds @@","input_schema":{"type":"object"}}]`)},
		{field: "tools.#.input_schema", body: msgBody(`"messages":[` + userHi + `],"tools":[{"name":"fn","input_schema":{"type":"object","properties":{"q":{"type":"string","description":"a @@"}}}}]`)},
		{field: "tool_choice.name", body: msgBody(`"messages":[` + userHi + `],"tools":[{"name":"fn","input_schema":{"type":"object"}}],"tool_choice":{"type":"tool","name":"fn_@@"}`)},
		{field: "stop_sequences", body: msgBody(`"messages":[` + userHi + `],"stop_sequences":["@@"]`)},
		{field: "mcp_servers.#.name", body: msgBody(`"messages":[` + userHi + `],"mcp_servers":[{"type":"url","url":"https://mcp.example/sse","name":"@@"}]`), legs: []string{legAnthropic}},
		{field: "*", body: msgBody(`"messages":[` + userHi + `],"x_future_field":{"@@":true}`)},
	},
}

// Every field a door's list reads has an example above, and every example
// names a field of the list: a field added to a list is tested, and a test
// cannot name a field the list forgot.
func TestEveryFieldAGuardrailReadsHasAnExample(t *testing.T) {
	for ep, examples := range inputExamples {
		listed := map[string]bool{}
		for _, f := range wire.Fields(ep) {
			if f.Kind != wire.Skip {
				listed[f.Path] = true
			}
		}
		covered := map[string]bool{}
		for _, ex := range examples {
			if ex.field != "*" && !listed[ex.field] {
				t.Errorf("%s: the example for %s names no field the list reads", ep, ex.field)
			}
			covered[ex.field] = true
		}
		for path := range listed {
			if !covered[path] {
				t.Errorf("%s: the field %s has no example: add one to inputExamples", ep, path)
			}
		}
	}
	if len(inputExamples) != len(doorPaths) {
		t.Errorf("examples for %d doors, want %d", len(inputExamples), len(doorPaths))
	}
}

// The pattern guardrails and the model-based check read every field of a
// request that reaches a model as text, on every door and every way to an
// upstream: the denied text planted in any field is refused before
// anything reaches the model server (the guard model is shown it), and
// the same request with a harmless text in its place is answered.
func TestGuardrailsReadEveryFieldOfEveryDoor(t *testing.T) {
	m := newTextMock(t)
	e := newEnv(t, textWorld(m))
	for ep, examples := range inputExamples {
		for _, ex := range examples {
			legs := ex.legs
			if legs == nil {
				legs = doorLegs[ep]
			}
			for _, leg := range legs {
				for _, guardrail := range []string{"pat", "mod"} {
					if guardrail == "mod" && ex.patternsOnly {
						continue
					}
					name := string(ep) + " " + ex.field + " " + leg + " " + guardrail
					body := strings.ReplaceAll(ex.body, "@model", aliasFor(guardrail, leg))
					planted := secret
					if ex.escaped {
						planted = `\\u0054` + secret[1:]
					}
					m.reset()
					r := e.post("alice", "fraud", doorPaths[ep], strings.ReplaceAll(body, "@@", planted))
					calls, checks := m.reached()
					if !refusedByGuardrail(ep, r) || len(calls) != 0 {
						t.Errorf("%s: with the text: %d %s; the model server got %v", name, r.status, r.body, calls)
					}
					if guardrail == "mod" && (len(checks) != 1 || !strings.Contains(checks[0].Body, secret)) {
						t.Errorf("%s: the guard model was shown %v", name, checks)
					}
					m.reset()
					r = e.post("alice", "fraud", doorPaths[ep], strings.ReplaceAll(body, "@@", harmless))
					if calls, _ := m.reached(); r.status != 200 || len(calls) != 1 {
						t.Errorf("%s: without the text: %d %s; the model server got %v", name, r.status, r.body, calls)
					}
				}
			}
		}
	}
}

// refusedByGuardrail says whether r is a door's refusal by a guardrail.
func refusedByGuardrail(ep wire.Endpoint, r response) bool {
	if r.status != 400 {
		return false
	}
	if ep == wire.Messages {
		return r.json("type").Str == "error" && r.json("error.type").Str == "invalid_request_error" &&
			strings.Contains(r.json("error.message").Str, "blocked by the")
	}
	return r.json("error.code").Str == "guardrail_blocked"
}
