package wire

import (
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// outputFields are where each API's request says the most its answer may
// produce. Chat completions has two: max_completion_tokens (OpenAI's own,
// which its reasoning models require) and the older max_tokens, which
// every other chat server takes.
var outputFields = map[Endpoint][]string{
	Chat:        {"max_completion_tokens", "max_tokens"},
	Completions: {"max_tokens"},
	Messages:    {"max_tokens"},
	Responses:   {"max_output_tokens"},
}

// BoundOutput returns a request body for ep whose output bound is at most
// bound: each output field the caller set (to a whole number of 1 or
// more) above bound is lowered to it, and a body that sets none gets one,
// so that an upstream never produces more than the gateway reserved (a
// self-hosted server left to itself generates until its context ends).
// A chat body that sets none gets max_completion_tokens when completion
// is true (an upstream that speaks OpenAI's own API), else max_tokens. A
// bound of 0 (embeddings) leaves body as it is, and so does a body
// already within it: no copy.
func BoundOutput(body []byte, ep Endpoint, bound int64, completion bool) ([]byte, error) {
	fields := outputFields[ep]
	if bound <= 0 || len(fields) == 0 {
		return body, nil
	}
	set := false
	var err error
	for _, f := range fields {
		v := gjson.GetBytes(body, f)
		if !v.Exists() || v.Type == gjson.Null {
			continue
		}
		set = true
		if n := v.Int(); v.Type == gjson.Number && n >= 1 && n <= bound && float64(n) == v.Float() {
			continue // the caller's own, within the bound
		}
		if body, err = sjson.SetBytes(body, f, bound); err != nil {
			return nil, err
		}
	}
	if set {
		return body, nil
	}
	field := fields[len(fields)-1]
	if completion {
		field = fields[0]
	}
	return sjson.SetBytes(body, field, bound)
}
