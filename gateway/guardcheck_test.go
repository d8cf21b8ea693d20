package gateway

import (
	"strings"
	"testing"
)

// The guard model is shown every text of the call, each on a line, but a
// base64 data: URL's payload: its media type and size stand for it.
func TestTheGuardModelIsShownTextNotPayloads(t *testing.T) {
	image := "data:image/png;base64," + strings.Repeat("iVBO", 1000)
	got := guardPrompt([]string{"what is this?", image, "data:text/plain,TOPSECRET-1", "data: not a URL"})
	want := "what is this?\ndata:image/png;base64,[4000 bytes of base64]\ndata:text/plain,TOPSECRET-1\ndata: not a URL"
	if got != want {
		t.Fatalf("shown %q, want %q", got, want)
	}
}
