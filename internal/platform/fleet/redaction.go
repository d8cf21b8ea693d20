package fleet

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/klique-ai/klique/internal/agentapi"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/redact"
)

// Everything a task (through its worker) writes passes here before it is
// stored: log lines, metric names, output pointers and the message of its
// end (which becomes the task's reason and an audit entry). The worker
// redacts too, but a worker is not trusted to: the platform is the last
// place a secret can be stopped. See internal/redact for the forms of a
// secret that are matched.

// attemptRedaction is the redaction state of one attempt of a task: the
// redactor for its secrets and the last log line seen, to catch a secret
// cut over two lines that arrive in two batches.
type attemptRedaction struct {
	r *redact.Redactor
	// mu serializes the log batches of the attempt around tail.
	mu   sync.Mutex
	tail string
}

func redactionKey(taskID string, attempt int) string { return fmt.Sprintf("%s#%d", taskID, attempt) }

// redaction returns the redaction state of a task's current attempt,
// opening its secrets the first time.
func (s *Fleet) redaction(ctx context.Context, t *model.Task) (*attemptRedaction, error) {
	if len(t.Spec.Secrets) == 0 {
		return &attemptRedaction{}, nil
	}
	key := redactionKey(t.ID, t.Run.Attempt)
	if v, ok := s.redact.Load(key); ok {
		return v.(*attemptRedaction), nil
	}
	values, err := s.openSecrets(ctx, t)
	if err != nil {
		return nil, err
	}
	vs := make([]string, 0, len(values))
	for _, v := range values {
		vs = append(vs, v)
	}
	v, _ := s.redact.LoadOrStore(key, &attemptRedaction{r: redact.New(vs...)})
	return v.(*attemptRedaction), nil
}

// redactLines redacts a batch of log lines of the attempt, in place, as one
// stream with the batches before it.
func (a *attemptRedaction) redactLines(lines []model.LogLine) {
	if a.r.Empty() || len(lines) == 0 {
		return
	}
	text := make([]string, len(lines))
	for i, l := range lines {
		text[i] = l.Line
	}
	a.mu.Lock()
	a.tail = a.r.Lines(a.tail, text)
	a.mu.Unlock()
	for i := range lines {
		lines[i].Line = text[i]
	}
}

// forget drops the redaction state of an attempt that ended.
func (s *Fleet) forgetRedaction(taskID string, attempt int) {
	s.redact.Delete(redactionKey(taskID, attempt))
}

// redactFinish redacts what a worker reports at the end of an attempt: the
// message (it becomes the task's reason and an audit entry) and the output
// pointers. When the task's secrets cannot be read to redact them, the
// message and outputs are withheld rather than stored as they came.
func (s *Fleet) redactFinish(ctx context.Context, w *identity.Worker, taskID string, req *agentapi.FinishRequest) error {
	t, err := s.myTask(ctx, s.k.Store, w, taskID, req.Attempt, true)
	if err != nil {
		return s.k.Internal(ctx, err)
	}
	red, err := s.redaction(ctx, t)
	if err != nil {
		s.k.Log.WarnContext(ctx, "the secrets of a task could not be read to redact its end; its message and outputs are withheld",
			"task", taskID, "error", err)
		req.Outputs = nil
		if req.Message != "" {
			req.Message = "(withheld: the task's secrets could not be read to redact it)"
		}
		return nil
	}
	// Quoted, not String: the message may quote a last line that begins
	// or ends inside a secret (the log redacts it as one stream).
	req.Message = red.r.Quoted(req.Message)
	req.Outputs = red.r.Strings(slices.Clone(req.Outputs))
	return nil
}
