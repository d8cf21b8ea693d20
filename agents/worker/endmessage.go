package worker

import "strings"

// maxMessage bounds the message of a task's end, as the protocol does;
// maxLastLine the last line a failure's message quotes.
const (
	maxMessage  = 4096
	maxLastLine = 300
)

// quote redacts a message that quotes what the task printed (its end's
// message, a failure's last line): whole secrets, and the start or end of
// one where the quoted line began or ended inside it (redact.Quoted).
func (t *task) quote(s string) string {
	t.mu.Lock()
	r := t.redact
	t.mu.Unlock()
	if r == nil {
		return s
	}
	return r.r.Quoted(s)
}

// cut shortens s to at most n bytes of valid UTF-8 and an ellipsis.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
