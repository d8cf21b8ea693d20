package server_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// A WebSocket refused at connection_init closes with a reason that says
// what was wrong and what to send instead, on both subscription protocols:
// browsers show the close event's reason, not the connection_error before
// it, and gqlgen's own reason is a bare "terminated".
func TestSubscriptionRefusalCloseReasonSaysWhatToChange(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	for _, proto := range []string{protoTransportWS, protoLegacyWS} {
		for name, c := range map[string]struct {
			payload map[string]any
			want    string
		}{
			"an unknown key":  {bearerInit("kq_not-a-real-key-0123456789abcdef"), "unknown credential"},
			"a bad token":     {map[string]any{"token": "eyJhbGciOiJFUzI1NiJ9.e30.bad"}, "token"},
			"no credential":   {nil, "connection_init"},
			"an empty Bearer": {map[string]any{"Authorization": "Bearer "}, "connection_init"},
		} {
			t.Run(proto+" with "+name, func(t *testing.T) {
				_, err := dialWS(ctxFor(t, 10*time.Second), ts.url, c.payload, wsDialOptions{proto: proto})
				var ce websocket.CloseError
				if !errors.As(err, &ce) {
					t.Fatalf("connection ended with %v, want a close frame", err)
				}
				if ce.Code != 4401 {
					t.Errorf("close code %d, want 4401", ce.Code)
				}
				if !strings.HasPrefix(ce.Reason, "unauthenticated: ") || !strings.Contains(ce.Reason, c.want) ||
					!strings.Contains(ce.Reason, "Authorization") || !strings.Contains(ce.Reason, "connection_init") {
					t.Errorf("close reason %q: want \"unauthenticated: \" with why (%q) and what to send in connection_init", ce.Reason, c.want)
				}
				if len(ce.Reason) > 123 {
					t.Errorf("close reason is %d bytes, more than a close frame holds (123)", len(ce.Reason))
				}
			})
		}
	}
}
