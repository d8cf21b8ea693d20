package worker

import (
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/agentapi"
)

// A task that prints its secret cut over two lines, or ends its last line
// with the start of it, or prints it where the failure's message cuts its
// last line (maxLastLine bytes): the message of its end (the task's reason
// and audit entry) holds no part of the secret of minOpenEnd (6) bytes or
// more, though its log shows the lines as redacted (issue 39 defect 10).
func TestAFailureReasonNeverCarriesAnyPartOfASecret(t *testing.T) {
	t.Parallel()
	const secret = "bob-secret-1234567890"
	pad := strings.Repeat("x", maxLastLine-10)
	cases := map[string]string{
		// The secret's last 11 bytes begin the last line.
		"at the start of a line": `printf 'TOKEN=%s\n%s tail\n' "${S%???????????}" "${S#??????????}"; exit 3`,
		// The last line ends with the secret's start.
		"at the end of a line": `printf 'token is %s\n' "${S%????????}" >&2; exit 3`,
		// The secret straddles the cut of the last line.
		"cut at the reason's length limit": `printf '%s%s and more\n' "` + pad + `" "$S"; exit 3`,
	}
	b := setup(t)
	b.srv.mu.Lock()
	b.srv.secrets["S"] = secret
	b.srv.mu.Unlock()
	ids := map[string]string{}
	n := 0
	for name, script := range cases {
		n++
		id := "reason-" + string(rune('a'+n))
		ids[name] = id
		a := shTask(id, script)
		a.Secrets = []string{"S"}
		b.srv.enqueue(a)
	}
	for name, id := range ids {
		f := b.srv.finished(t, id, 20*time.Second)
		if f.State != agentapi.StateFailed || !strings.Contains(f.Message, "exited with code 3") {
			t.Fatalf("%s: finish = %+v, want failed with exit code 3", name, f)
		}
		for k := 6; k <= len(secret); k++ {
			for _, part := range []string{secret[:k], secret[len(secret)-k:]} {
				if strings.Contains(f.Message, part) {
					t.Errorf("%s: the failure's message holds %q of the secret: %s", name, part, f.Message)
				}
			}
		}
		if !strings.Contains(f.Message, Redacted) {
			t.Errorf("%s: the failure's message shows no %s where the secret was: %s", name, Redacted, f.Message)
		}
	}
}
