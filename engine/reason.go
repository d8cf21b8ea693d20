package engine

import (
	"fmt"
	"strings"

	"github.com/klique-ai/klique/internal/model"
)

// WaitingReason says why a queued task at position pos waits, given its
// queue's state (nil before the engine's first pass over it). The task view and
// the queueChanged subscription share it.
func WaitingReason(t *model.Task, pos int, qs *model.QueueState) string {
	var why string
	switch {
	case qs == nil:
		why = "waiting for the engine's next pass"
		if pos > 1 {
			why = fmt.Sprintf("position %d: waiting behind the tasks ahead of it in its compute resource", pos)
		}
	case pos == 1 && qs.TaskID == t.ID:
		why = qs.Reason
	case pos == 1:
		why = "at the head of its compute resource, waiting for the engine's next pass"
	default:
		why = fmt.Sprintf("position %d: waiting behind the head of its compute resource, which waits because %s", pos, qs.Reason)
	}
	if rest, ok := strings.CutPrefix(t.Reason, PreemptedPrefix); ok {
		why = "requeued at the front of its compute resource after it was preempted (" + rest + "); " + why
	}
	return why
}
