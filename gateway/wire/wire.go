// Package wire reads and patches the few fields of OpenAI-compatible
// request and response bodies the gateway needs, without decoding the rest:
// a body is passed through as the caller wrote it, with only the model
// name swapped (and, for streams, usage asked for).
package wire

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// Endpoint is one of the API's operations the gateway serves.
type Endpoint string

const (
	Chat        Endpoint = "chat/completions"
	Completions Endpoint = "completions"
	Embeddings  Endpoint = "embeddings"
	// Messages is Anthropic's Messages API, and Responses OpenAI's
	// Responses API: doors of their own (their requests are read by their
	// doors, not by Parse).
	Messages  Endpoint = "messages"
	Responses Endpoint = "responses"
)

// MaxOutputTokens is the most max_tokens may ask for: far above what any
// model produces, and low enough that an estimate built on it (times n,
// plus the prompt) cannot overflow and turn a reservation negative.
const MaxOutputTokens = 1 << 24

// CheckMaxTokens is the rule for how many tokens a call may ask a model to
// produce, for every channel that makes calls (the gateway's doors, and
// MCP's call_model, which names it field): none (0, the model's own
// limit) up to MaxOutputTokens. The sampling settings beyond it
// (temperature, top_p) go to the model's server as given: their ranges
// differ by model, and the server says what it accepts.
func CheckMaxTokens(field string, n int64) error {
	if n < 0 {
		return fmt.Errorf("%s must not be negative", field)
	}
	if n > MaxOutputTokens {
		return fmt.Errorf("%s must be at most %d", field, MaxOutputTokens)
	}
	return nil
}

// perMessage is the token overhead counted for each chat message (role and
// the template's markers).
const perMessage = 8

// Call is what the gateway reads of a request.
type Call struct {
	Model  string
	Stream bool
	// IncludeUsage is the caller's own stream_options.include_usage.
	IncludeUsage bool
	// MaxTokens is max_completion_tokens or max_tokens, 0 when unset.
	MaxTokens int64
	// Choices is n (default 1), or a completion's best_of when more: the
	// output bound is per choice.
	Choices int64
	// Input is the text of every field of the request that reaches the
	// model (TextOf, by the door's field list): what the guardrails read.
	Input []string
	// InputTokens bounds the prompt's tokens from above: a token is at
	// least one byte of text, plus a fixed overhead per message, plus its
	// audio and the files it carries (see media.go).
	InputTokens int64
	// Images are the request's images, and UnsizedFiles counts the files
	// it names without carrying them: what they cost depends on the model
	// (MediaTokens), so they are not in InputTokens.
	Images       []Image
	UnsizedFiles int64
}

// parseRoot reads a request body as every door must before anything of it
// is used: valid JSON, valid UTF-8 (a provider refuses anything else, and
// a guardrail must read the text the model is sent), no key twice in one
// object (checkKeys), and an object.
func parseRoot(body []byte) (gjson.Result, error) {
	if !gjson.ValidBytes(body) {
		return gjson.Result{}, errors.New("the request body is not valid JSON")
	}
	if err := checkUTF8(body); err != nil {
		return gjson.Result{}, err
	}
	if err := checkKeys(body); err != nil {
		return gjson.Result{}, err
	}
	root := gjson.ParseBytes(body)
	if !root.IsObject() {
		return gjson.Result{}, errors.New("the request body must be a JSON object")
	}
	return root, nil
}

// checkUTF8 refuses a body that is not valid UTF-8: raw bytes that are
// not, or a \u escape of half a surrogate pair (which decoders replace,
// or keep, as they choose). body is valid JSON: every backslash in it
// starts an escape inside a string.
func checkUTF8(body []byte) error {
	if !utf8.Valid(body) {
		at := 0
		for at < len(body) {
			r, n := utf8.DecodeRune(body[at:])
			if r == utf8.RuneError && n <= 1 {
				break
			}
			at += n
		}
		return fmt.Errorf("the request body is not valid UTF-8 (at byte %d): send text as UTF-8", at)
	}
	for i := bytes.IndexByte(body, '\\'); i >= 0 && i+1 < len(body); {
		if body[i+1] != 'u' {
			i = nextEscape(body, i+2)
			continue
		}
		r := hex4(body[i+2:])
		switch {
		case r >= 0xD800 && r < 0xDC00:
			if i+12 > len(body) || body[i+6] != '\\' || body[i+7] != 'u' {
				return fmt.Errorf("the request body has a lone surrogate \\u%04x (at byte %d): it is not valid UTF-8 text", r, i)
			}
			if lo := hex4(body[i+8:]); lo < 0xDC00 || lo > 0xDFFF {
				return fmt.Errorf("the request body has a lone surrogate \\u%04x (at byte %d): it is not valid UTF-8 text", r, i)
			}
			i = nextEscape(body, i+12)
		case r >= 0xDC00 && r <= 0xDFFF:
			return fmt.Errorf("the request body has a lone surrogate \\u%04x (at byte %d): it is not valid UTF-8 text", r, i)
		default:
			i = nextEscape(body, i+6)
		}
	}
	return nil
}

// nextEscape is the index of the next backslash in body from i, or -1.
func nextEscape(body []byte, i int) int {
	if i >= len(body) {
		return -1
	}
	if j := bytes.IndexByte(body[i:], '\\'); j >= 0 {
		return i + j
	}
	return -1
}

// hex4 reads the four hex digits of a \u escape (valid JSON has them).
func hex4(b []byte) int {
	if len(b) < 4 {
		return -1
	}
	n, err := strconv.ParseUint(string(b[:4]), 16, 32)
	if err != nil {
		return -1
	}
	return int(n)
}

// streamOf reads "stream": true, false, null or absent. Anything else
// ("yes", 1) is refused, as providers refuse it, rather than read as
// false.
func streamOf(root gjson.Result) (bool, error) {
	switch s := root.Get("stream"); s.Type {
	case gjson.True:
		return true, nil
	case gjson.False, gjson.Null:
		return false, nil
	default:
		return false, fmt.Errorf("stream must be true or false, not %s", truncate(s.Raw, 40))
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// Parse reads a request body for endpoint. The error says what is wrong
// with the body, for the caller.
func Parse(ep Endpoint, body []byte) (Call, error) {
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
	c.IncludeUsage = root.Get("stream_options.include_usage").Bool()
	c.MaxTokens = root.Get("max_completion_tokens").Int()
	if c.MaxTokens == 0 {
		c.MaxTokens = root.Get("max_tokens").Int()
	}
	if err := CheckMaxTokens("max_tokens", c.MaxTokens); err != nil {
		return Call{}, err
	}
	c.Choices = 1
	if n := root.Get("n"); n.Exists() {
		if n.Int() < 1 || n.Int() > 128 {
			return Call{}, errors.New("n must be between 1 and 128")
		}
		c.Choices = n.Int()
	}
	switch ep {
	case Chat:
		msgs := root.Get("messages")
		if !msgs.IsArray() || len(msgs.Array()) == 0 {
			return Call{}, errors.New("messages is required: a non-empty array")
		}
		msgs.ForEach(func(_, msg gjson.Result) bool {
			c.InputTokens += perMessage
			content := msg.Get("content")
			switch {
			case content.Type == gjson.String:
				c.add(content.Str)
			case content.IsArray():
				content.ForEach(func(_, part gjson.Result) bool {
					if t := part.Get("text"); t.Type == gjson.String {
						c.add(t.Str)
					} else {
						c.addChatPart(part) // an image, audio, a file
					}
					return true
				})
			}
			// Tool calls and their arguments are prompt too.
			if tc := msg.Get("tool_calls"); tc.Exists() {
				c.InputTokens += int64(len(tc.Raw))
			}
			return true
		})
		if tools := root.Get("tools"); tools.Exists() {
			c.InputTokens += int64(len(tools.Raw))
		}
	case Completions:
		if err := c.addInput(root.Get("prompt"), "prompt"); err != nil {
			return Call{}, err
		}
		// best_of candidates are generated, and billed, each: the bound
		// counts them as it counts n (the caller gets n of them).
		if b := root.Get("best_of"); b.Exists() && b.Type != gjson.Null {
			if b.Int() < 1 || b.Int() > 128 {
				return Call{}, errors.New("best_of must be between 1 and 128")
			}
			c.Choices = max(c.Choices, b.Int())
		}
	case Embeddings:
		if err := c.addInput(root.Get("input"), "input"); err != nil {
			return Call{}, err
		}
		c.Stream, c.MaxTokens = false, 0
	default:
		return Call{}, fmt.Errorf("unknown endpoint %q", ep)
	}
	c.Input = TextOf(nil, ep, root)
	return c, nil
}

// add counts a text towards the prompt's bound.
func (c *Call) add(text string) {
	c.InputTokens += int64(len(text))
}

// addInput reads a prompt or an embeddings input: a string, an array of
// strings, an array of token ids, or an array of arrays of token ids.
func (c *Call) addInput(v gjson.Result, name string) error {
	switch {
	case v.Type == gjson.String:
		c.add(v.Str)
	case v.IsArray() && len(v.Array()) > 0:
		var bad bool
		v.ForEach(func(_, e gjson.Result) bool {
			switch {
			case e.Type == gjson.String:
				c.add(e.Str)
			case e.Type == gjson.Number:
				c.InputTokens++
			case e.IsArray():
				c.InputTokens += int64(len(e.Array()))
			default:
				bad = true
			}
			return !bad
		})
		if bad {
			return fmt.Errorf("%s must be a string, an array of strings or an array of token ids", name)
		}
	default:
		return fmt.Errorf("%s is required: a string or a non-empty array", name)
	}
	return nil
}

// SetModel returns body with its model replaced.
func SetModel(body []byte, model string) ([]byte, error) {
	return sjson.SetBytes(body, "model", model)
}

// AskUsage returns a streaming body with stream_options.include_usage set,
// so that the upstream's last chunk says what the call used.
func AskUsage(body []byte) ([]byte, error) {
	return sjson.SetBytes(body, "stream_options.include_usage", true)
}

// Usage is what an upstream says a call used.
type Usage struct {
	Input  int64
	Output int64
}

// UsageOf reads the usage of a response body or of a stream chunk. A
// negative count (an upstream's mistake) reads as 0: usage never gives
// back what other calls used.
func UsageOf(body []byte) (Usage, bool) {
	u := gjson.Get(view(body), "usage")
	if !u.IsObject() {
		return Usage{}, false
	}
	return Usage{Input: max(u.Get("prompt_tokens").Int(), 0), Output: max(u.Get("completion_tokens").Int(), 0)}, true
}

// CountOutput counts the output of a response body that says no usage, as
// the gateway counts a prompt: a token per byte of its OutputText. It
// counts high (a token is several bytes), so that a model server that
// reports no usage is never charged less than it produced.
func CountOutput(body []byte) int64 { return int64(len(OutputText(body))) }

// OutputText returns the generated text of a response body or of a stream
// chunk: every choice's message or delta content, reasoning and refusal,
// completion text, and the names and arguments of its tool and function
// calls (what a guardrail reads, and what is counted when an upstream says
// no usage).
func OutputText(body []byte) string { return string(AppendOutputText(nil, body)) }

// AppendOutputText appends the generated text of body (see OutputText) to
// dst: a stream's relay reads every event's into one buffer it reuses.
// Each choice is read in one pass over its fields (a Get per field would
// scan it again for each).
func AppendOutputText(dst, body []byte) []byte {
	gjson.Get(view(body), "choices").ForEach(func(_, ch gjson.Result) bool {
		ch.ForEach(func(k, v gjson.Result) bool {
			switch k.Str {
			case "message", "delta":
				dst = appendMessageText(dst, v)
			case "text":
				if v.Type == gjson.String {
					dst = append(dst, v.Str...)
				}
			}
			return true
		})
		return true
	})
	return dst
}

// appendMessageText appends what a model generated in a message (or a
// stream's delta): its content, its reasoning (reasoning_content, as vLLM
// and DeepSeek name it, or reasoning), its refusal, and the name and
// arguments of each tool call and of a legacy function call.
func appendMessageText(dst []byte, msg gjson.Result) []byte {
	msg.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "content", "reasoning_content", "reasoning", "refusal":
			if v.Type == gjson.String {
				dst = append(dst, v.Str...)
			}
		case "tool_calls":
			v.ForEach(func(_, tc gjson.Result) bool {
				dst = appendCallText(dst, tc.Get("function"))
				return true
			})
		case "function_call":
			dst = appendCallText(dst, v)
		}
		return true
	})
	return dst
}

func appendCallText(dst []byte, fn gjson.Result) []byte {
	fn.ForEach(func(k, v gjson.Result) bool {
		if (k.Str == "name" || k.Str == "arguments") && v.Type == gjson.String {
			dst = append(dst, v.Str...)
		}
		return true
	})
	return dst
}

// view is body as a string without a copy, for reads whose results are
// numbers or are copied before body can change (OutputText writes what it
// finds to a builder): a stream's every event is read so, and GetBytes's
// copy of each would be most of what the relay allocates.
func view(body []byte) string { return unsafe.String(unsafe.SliceData(body), len(body)) }
