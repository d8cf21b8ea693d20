package gateway

import (
	"net/http"

	"github.com/klique-ai/klique/gateway/wire"
)

// door is an API shape calls come in by: how a request in that shape is
// decoded into the common call the stages work on, and how a refusal is
// written back in it. OpenAI's chat completions, completions and
// embeddings share one door (openAI); other shapes (Anthropic's Messages,
// OpenAI's Responses) are to be doors of their own in front of the same
// stages, not copies of them.
type door interface {
	// decode reads a request body into x.req (what the stages read of the
	// call) and x.body (the body to send upstream, in OpenAI's shape, as
	// every upstream takes it). x.ep is the operation called. The error is
	// for the caller, as it is.
	decode(x *exchange, body []byte) error
	// writeError answers with an error in the door's shape, after the
	// headers in extra. code and param are OpenAI's (see writeError), which
	// another door maps to its own.
	writeError(w http.ResponseWriter, extra http.Header, status int, code, message, param string)
}

// openAI is the door of OpenAI's API: the request goes upstream as it came
// (the model patched in by the proxy), and errors are OpenAI's.
type openAI struct{}

func (openAI) decode(x *exchange, body []byte) error {
	req, err := wire.Parse(x.ep, body)
	x.req, x.body = req, body
	return err
}

func (openAI) writeError(w http.ResponseWriter, extra http.Header, status int, code, message, param string) {
	writeError(w, extra, status, code, message, param)
}
