package gateway_test

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/klique-ai/klique/gateway/wire"
)

// outputField is a field a model generates, in one upstream API: what the
// model server answers with text in it, whole and streamed.
type outputField struct {
	name   string
	whole  func(text string) answer
	stream func(text string) answer
}

func chatField(fields string) outputField {
	return outputField{
		whole:  func(text string) answer { return answer{body: chatWhole(strings.ReplaceAll(fields, "@@", text))} },
		stream: func(text string) answer { return answer{events: chatEvents(strings.ReplaceAll(fields, "@@", text))} },
	}
}

func responsesField(item string, events ...string) outputField {
	return outputField{
		whole: func(text string) answer { return answer{body: responsesWhole(strings.ReplaceAll(item, "@@", text))} },
		stream: func(text string) answer {
			evs := make([]string, len(events))
			for i, ev := range events {
				evs[i] = strings.ReplaceAll(ev, "@@", text)
			}
			return answer{events: responsesEvents(strings.ReplaceAll(item, "@@", text), evs...)}
		},
	}
}

func messagesField(block, startBlock, delta string) outputField {
	return outputField{
		whole: func(text string) answer { return answer{body: messagesWhole(strings.ReplaceAll(block, "@@", text))} },
		stream: func(text string) answer {
			return answer{events: messagesEvents(strings.ReplaceAll(startBlock, "@@", text), strings.ReplaceAll(delta, "@@", text))}
		},
	}
}

func named(name string, f outputField) outputField { f.name = name; return f }

// outputFields are the fields each upstream API generates text in (by the
// path it is called at).
var outputFields = map[string][]outputField{
	"/v1/chat/completions": {
		named("content", chatField(`"content":"@@"`)),
		named("reasoning_content", chatField(`"content":"ok","reasoning_content":"@@"`)),
		named("reasoning", chatField(`"content":"ok","reasoning":"@@"`)),
		named("refusal", chatField(`"content":null,"refusal":"@@"`)),
		named("a tool call's name", chatField(`"content":null,"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"fn_@@","arguments":"{}"}}]`)),
		named("a tool call's arguments", chatField(`"content":null,"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"fn","arguments":"{\"q\":\"@@\"}"}}]`)),
		named("a function call's name", chatField(`"content":null,"function_call":{"name":"fn_@@","arguments":"{}"}`)),
		named("a function call's arguments", chatField(`"content":null,"function_call":{"name":"fn","arguments":"{\"q\":\"@@\"}"}`)),
	},
	"/v1/completions": {{
		name: "text",
		whole: func(text string) answer {
			return answer{body: `{"id":"c","object":"text_completion","model":"m","choices":[{"index":0,"text":"` + text + `","finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8}}`}
		},
		stream: func(text string) answer {
			return answer{events: []string{sse("", `{"id":"c","object":"text_completion","choices":[{"index":0,"text":"`+text+`","finish_reason":null}]}`),
				sse("", `{"id":"c","object":"text_completion","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8}}`), "data: [DONE]\n\n"}}
		},
	}},
	"/v1/responses": {
		named("output_text", responsesField(`{"type":"message","id":"msg_1","role":"assistant","status":"completed","content":[{"type":"output_text","text":"@@","annotations":[]}]}`,
			`{"type":"response.output_text.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":"@@"}`)),
		named("refusal", responsesField(`{"type":"message","id":"msg_1","role":"assistant","status":"completed","content":[{"type":"refusal","refusal":"@@"}]}`,
			`{"type":"response.refusal.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":"@@"}`)),
		named("a function call's name", responsesField(`{"type":"function_call","id":"fc_1","call_id":"c1","name":"fn_@@","arguments":"{}","status":"completed"}`,
			`{"type":"response.output_item.added","output_index":0,"item":{"type":"function_call","id":"fc_1","call_id":"c1","name":"fn_@@","arguments":"","status":"in_progress"}}`)),
		named("a function call's arguments", responsesField(`{"type":"function_call","id":"fc_1","call_id":"c1","name":"fn","arguments":"{\"q\":\"@@\"}","status":"completed"}`,
			`{"type":"response.function_call_arguments.delta","item_id":"fc_1","output_index":0,"delta":"{\"q\":\"@@\"}"}`)),
		named("a custom tool call's input", responsesField(`{"type":"custom_tool_call","id":"ct_1","call_id":"c1","name":"patch","input":"@@"}`,
			`{"type":"response.custom_tool_call_input.delta","item_id":"ct_1","output_index":0,"delta":"@@"}`)),
		named("a reasoning summary", responsesField(`{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"@@"}]}`,
			`{"type":"response.reasoning_summary_text.delta","item_id":"rs_1","output_index":0,"summary_index":0,"delta":"@@"}`)),
		named("reasoning text", responsesField(`{"type":"reasoning","id":"rs_1","summary":[],"content":[{"type":"reasoning_text","text":"@@"}]}`,
			`{"type":"response.reasoning_text.delta","item_id":"rs_1","output_index":0,"content_index":0,"delta":"@@"}`)),
	},
	"/v1/messages": {
		named("text", messagesField(`{"type":"text","text":"@@"}`, `{"type":"text","text":""}`, `{"type":"text_delta","text":"@@"}`)),
		named("thinking", messagesField(`{"type":"thinking","thinking":"@@","signature":"s"}`, `{"type":"thinking","thinking":""}`, `{"type":"thinking_delta","thinking":"@@"}`)),
		named("a tool call's name", messagesField(`{"type":"tool_use","id":"t1","name":"fn_@@","input":{}}`, `{"type":"tool_use","id":"t1","name":"fn_@@","input":{}}`,
			`{"type":"input_json_delta","partial_json":"{}"}`)),
		named("a tool call's input", messagesField(`{"type":"tool_use","id":"t1","name":"fn","input":{"q":"@@"}}`, `{"type":"tool_use","id":"t1","name":"fn","input":{}}`,
			`{"type":"input_json_delta","partial_json":"{\"q\":\"@@\"}"}`)),
	},
}

// outputWays are the ways a door's call reaches an upstream API: the
// door, the leg, the upstream's path, and the request (@model, @stream).
var outputWays = []struct {
	door     wire.Endpoint
	leg, api string
	request  string
}{
	{wire.Chat, legChat, "/v1/chat/completions", `{"model":"@model","messages":[{"role":"user","content":"hi"}],"stream":@stream}`},
	{wire.Completions, legChat, "/v1/completions", `{"model":"@model","prompt":"hi","stream":@stream}`},
	{wire.Responses, legChat, "/v1/chat/completions", `{"model":"@model","input":"hi","stream":@stream}`},
	{wire.Responses, legOpenAI, "/v1/responses", `{"model":"@model","input":"hi","stream":@stream}`},
	{wire.Messages, legChat, "/v1/chat/completions", `{"model":"@model","max_tokens":50,"messages":[{"role":"user","content":"hi"}],"stream":@stream}`},
	{wire.Messages, legAnthropic, "/v1/messages", `{"model":"@model","max_tokens":50,"messages":[{"role":"user","content":"hi"}],"stream":@stream}`},
}

// The output checks read every field a model generates, on every door and
// every way to an upstream, whole and streamed: an answer with the denied
// text in any of them is refused (a whole one) or cut with the door's
// error event (a stream), and the caller gets none of the text, not even
// in the event that says the stream failed; the same answer without it
// passes. A whole answer is shown to the model-based check the same way.
func TestOutputChecksReadEveryGeneratedField(t *testing.T) {
	m := newTextMock(t)
	e := newEnv(t, textWorld(m))
	for _, way := range outputWays {
		for _, f := range outputFields[way.api] {
			for _, stream := range []bool{false, true} {
				for _, guardrail := range []string{"pat", "mod"} {
					if guardrail == "mod" && stream {
						continue // streams are checked by the patterns as they arrive
					}
					name := string(way.door) + " " + way.leg + " " + f.name
					if stream {
						name += " streamed"
					}
					name += " " + guardrail
					body := strings.NewReplacer("@model", aliasFor(guardrail, way.leg), "@stream", map[bool]string{true: "true", false: "false"}[stream]).Replace(way.request)
					for _, text := range []string{secret, harmless} {
						gen := f.whole
						if stream {
							gen = f.stream
						}
						m.setScript(func(path, model string, _ gjson.Result) answer {
							if path != way.api {
								return answer{}
							}
							return gen(text)
						})
						r := e.post("alice", "fraud", doorPaths[way.door], body)
						translated := way.leg == legChat && way.door != wire.Chat && way.door != wire.Completions
						switch {
						case text == secret && !stream:
							if !refusedByGuardrail(way.door, r) || strings.Contains(r.body, secret) {
								t.Errorf("%s: with the text: %d %s", name, r.status, r.body)
							}
						case text == secret:
							if r.status != 200 || !strings.Contains(r.body, "blocked by the guardrail") || strings.Contains(r.body, secret) ||
								strings.Contains(r.body, "[DONE]") || strings.Contains(r.body, "response.completed") || strings.Contains(r.body, "message_stop") {
								t.Errorf("%s: with the text: %d %s", name, r.status, r.body)
							}
							if way.door == wire.Responses && !strings.Contains(r.body, "event: response.failed") {
								t.Errorf("%s: the stream did not end with response.failed: %s", name, r.body)
							}
						default:
							// The control: answered, and the text reaches the caller
							// where the door shows the field (a translation drops
							// what its door has no place for, such as reasoning).
							if r.status != 200 || strings.Contains(r.body, "blocked") || !translated && !strings.Contains(r.body, harmless) {
								t.Errorf("%s: without the text: %d %s", name, r.status, r.body)
							}
						}
					}
				}
			}
		}
	}
}
