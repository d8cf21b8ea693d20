package worker

import (
	"context"
	"fmt"
	"time"

	"github.com/klique-ai/klique/agents/runner"
)

// recoverLeftovers has the runner stop what an earlier run of the worker
// left running (its records in the state directory), before the worker
// claims anything. Work that could not be stopped keeps its GPUs: they are
// held in the allocator under a key of their own, so the worker never
// hands them to a task while that work may still use them. It returns
// those keys. An error means the state directory cannot be read at all,
// and the worker must not start: it cannot tell what still runs.
//
// The attempts are not reported to the control plane: to it the earlier
// run is a lost worker, and it requeues each attempt once its lease runs
// out, counting a retry (a task that kills its worker must not run
// forever). Reporting them preempted would requeue them sooner but without
// that count.
func (w *Worker) recoverLeftovers(ctx context.Context) (map[string][]int, error) {
	rc, ok := w.cfg.Runner.(runner.Recoverer)
	if !ok || w.cfg.State == nil {
		return nil, nil
	}
	left, err := rc.Recover(ctx, w.cfg.Grace)
	if err != nil {
		return nil, fmt.Errorf("%w: fix the directory's permissions, or give the worker another --state-dir (then stop by hand what an earlier run left)", err)
	}
	held := map[string][]int{}
	for _, l := range left {
		switch {
		case l.TaskID == "":
			w.log.Error("a record in the state directory could not be read; what it recorded, if anything, was not stopped",
				"file", l.What, "err", l.Err)
		case l.Running:
			key := leftoverKey(l)
			w.alloc.Hold(key, l.GPUs)
			held[key] = l.GPUs
			w.log.Error("could not stop the work of an earlier run of this worker; its GPUs stay out of use until it is gone",
				"task", l.TaskID, "attempt", l.Attempt, "what", l.What, "gpus", l.GPUs, "retry", w.cfg.RecoverInterval, "err", l.Err)
		case l.WasRunning:
			w.log.Warn("stopped what an earlier run of this worker left running; the control plane requeues the attempt when its lease runs out",
				"task", l.TaskID, "attempt", l.Attempt, "what", l.What, "gpus", l.GPUs)
		default:
			w.log.Info("an earlier run of this worker left a record whose work had ended", "task", l.TaskID, "attempt", l.Attempt, "what", l.What)
		}
		if l.TaskID != "" && !l.Running && l.Err != nil {
			w.log.Warn("leftover record", "task", l.TaskID, "err", l.Err)
		}
	}
	return held, nil
}

// retryLeftovers tries again, every RecoverInterval, to stop the work the
// worker could not stop at start, and gives back the GPUs of what is gone.
func (w *Worker) retryLeftovers(ctx context.Context, held map[string][]int) {
	rc := w.cfg.Runner.(runner.Recoverer)
	t := time.NewTicker(w.cfg.RecoverInterval)
	defer t.Stop()
	for len(held) > 0 {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		left, err := rc.Recover(ctx, w.cfg.Grace)
		if err != nil {
			w.log.Warn("read the state directory", "err", err)
			continue
		}
		still := map[string]bool{}
		for _, l := range left {
			if l.Running {
				still[leftoverKey(l)] = true
			}
		}
		for key, gpus := range held {
			if !still[key] {
				w.alloc.Release(key)
				delete(held, key)
				w.log.Info("the work of an earlier run is gone; its GPUs are in use again", "gpus", gpus)
				w.signalFreed()
			}
		}
	}
}

func leftoverKey(l runner.Leftover) string { return "leftover " + taskKey(l.TaskID, l.Attempt) }
