package gateway_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// sseDoors are the calls FuzzUpstreamStream makes for each stream: the
// chat door (passed through) and the Messages and Responses doors
// (translated from the chat stream), all to alias chat, which sends
// vic's calls to meta/llama.
var sseDoors = []struct {
	path, body string
	translated bool
}{
	{"chat/completions", `{"model":"chat","stream":true,"messages":[{"role":"user","content":"hi"}]}`, false},
	{"messages", `{"model":"chat","stream":true,"max_tokens":20,"messages":[{"role":"user","content":"hi"}]}`, true},
	{"responses", `{"model":"chat","stream":true,"input":"hi"}`, true},
}

// FuzzUpstreamStream has an upstream answer a streamed call with the
// fuzzed bytes, as they are, and reads what each door sends the caller.
// However the upstream breaks its stream (lines cut, events without a
// blank line, data that is not JSON, a usage that lies), the gateway
// answers 200 with a stream it ends cleanly (no panic, no connection
// reset), and the translated doors send only events of valid JSON.
//
// Seeds live in testdata/fuzz/FuzzUpstreamStream; run it with
//
//	go test -run '^$' -fuzz '^FuzzUpstreamStream$' -fuzztime 30s ./gateway
func FuzzUpstreamStream(f *testing.F) {
	f.Add([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}]}\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1}}\n\ndata: [DONE]\n\n"))
	f.Add([]byte("event: x\r\ndata: {\"choices\":[{\"delta\":{\"content\":\"a\r\ndata: b\"}}]}\r\n\r\n: comment\n\ndata:[DONE]"))
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"name\":\"f\",\"arguments\":\"{\"}}]}}]}\n\ndata: {\"error\":{\"message\":\"boom\"}}\n\n"))
	e := newEnvTB(f, standard)
	// A stream that never ends fails the target rather than hang it.
	client := &http.Client{Timeout: 10 * time.Second}
	f.Fuzz(func(t *testing.T, stream []byte) {
		if len(stream) == 0 {
			return // the harness's upstream then streams its own reply
		}
		e.up.set("meta/llama", behaviour{rawStream: string(stream)})
		for _, d := range sseDoors {
			req, err := http.NewRequest(http.MethodPost, e.srv.URL+"/v1/"+d.path, strings.NewReader(d.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+e.keys["vic"])
			req.Header.Set("X-Klique-Project", "detect")
			resp, err := client.Do(req)
			if err != nil {
				t.Fatalf("%s: %v", d.path, err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatalf("%s: the stream broke: %v\nupstream: %q", d.path, err, stream)
			}
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%s: %d %s\nupstream: %q", d.path, resp.StatusCode, body, stream)
			}
			if !d.translated {
				continue
			}
			for _, line := range bytes.Split(body, []byte("\n")) {
				if data, ok := bytes.CutPrefix(line, []byte("data: ")); ok && !json.Valid(data) {
					t.Fatalf("%s: an event's data is not JSON: %q\nall: %q\nupstream: %q", d.path, data, body, stream)
				}
			}
		}
	})
}
