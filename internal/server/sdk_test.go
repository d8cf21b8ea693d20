package server_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	pysdk "github.com/klique-ai/klique/sdk/python"
)

// TestThePythonSDKIsServedToAnyoneAsAWheel: a worker's pip, which holds no
// key, gets the SDK's wheel from the control plane, and a page listing it;
// another version's name is refused with the one served.
func TestThePythonSDKIsServedToAnyoneAsAWheel(t *testing.T) {
	s := startServer(t)
	want, err := pysdk.Wheel()
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string) (*http.Response, []byte) {
		t.Helper()
		resp, err := s.http.Get(s.url + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, b
	}
	resp, body := get("/sdk/python/" + pysdk.WheelName())
	if resp.StatusCode != http.StatusOK || !bytes.Equal(body, want) || resp.Header.Get("Content-Type") != "application/zip" {
		t.Fatalf("GET the wheel: %d %s, %d bytes, same as built: %v", resp.StatusCode, resp.Header.Get("Content-Type"), len(body), bytes.Equal(body, want))
	}
	sum := sha256.Sum256(want)
	resp, body = get("/sdk/python/")
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `href="`+pysdk.WheelName()+`#sha256=`+hex.EncodeToString(sum[:])+`"`) {
		t.Fatalf("GET the index: %d %s", resp.StatusCode, body)
	}
	resp, body = get("/sdk/python/klique-0.0.0-py3-none-any.whl")
	var e struct {
		Error struct{ Code, Message string }
	}
	_ = json.Unmarshal(body, &e)
	if resp.StatusCode != http.StatusNotFound || e.Error.Code != "NOT_FOUND" ||
		!strings.Contains(e.Error.Message, "serves the Python SDK version "+pysdk.Version()+", as /sdk/python/"+pysdk.WheelName()) {
		t.Fatalf("GET another version: %d %s", resp.StatusCode, body)
	}
}
