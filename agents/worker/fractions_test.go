package worker

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/klique-ai/klique/agents/runner"
	"github.com/klique-ai/klique/internal/agentapi"
	"github.com/klique-ai/klique/internal/eventually"
)

// fakeRunner runs nothing: each job is "running" until the test ends it.
type fakeRunner struct {
	mu      sync.Mutex
	jobs    map[string]*runner.Job
	handles map[string]*fakeHandle
}

func newFakeRunner() *fakeRunner {
	return &fakeRunner{jobs: map[string]*runner.Job{}, handles: map[string]*fakeHandle{}}
}

func (r *fakeRunner) Name() string    { return "fake" }
func (r *fakeRunner) Fractions() bool { return true }

func (r *fakeRunner) Submit(_ context.Context, job *runner.Job) (runner.Handle, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	end := make(chan struct{})
	r.jobs[job.Task.TaskID] = job
	h := &fakeHandle{end: end}
	r.handles[job.Task.TaskID] = h
	return h, nil
}

func (r *fakeRunner) job(id string) *runner.Job {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.jobs[id]
}

func (r *fakeRunner) end(id string) {
	r.mu.Lock()
	h := r.handles[id]
	r.mu.Unlock()
	h.once.Do(func() { close(h.end) })
}

type fakeHandle struct {
	end  chan struct{}
	once sync.Once
}

func (h *fakeHandle) Poll(context.Context) (runner.Status, error) {
	select {
	case <-h.end:
		return runner.Status{Phase: runner.Ended}, nil
	default:
		return runner.Status{Phase: runner.Running}, nil
	}
}
func (h *fakeHandle) Stop(context.Context, time.Duration) error {
	h.once.Do(func() { close(h.end) })
	return nil
}
func (h *fakeHandle) Diagnostics(context.Context) runner.Diagnostics { return runner.Diagnostics{} }

func TestFractionsInTheLoop(t *testing.T) {
	t.Parallel()
	fr := newFakeRunner()
	b := setup(t, func(c *Config) { c.Runner = fr; c.PollInterval = 20 * time.Millisecond })
	quarter := func(id string) agentapi.Assignment {
		return agentapi.Assignment{TaskID: id, Name: id, MilliGPUsPerNode: 250, Nodes: 1, Command: []string{"true"}}
	}
	for _, id := range []string{"q1", "q2", "q3", "q4"} {
		b.srv.enqueue(quarter(id))
	}
	eventually.Within(t, 10*time.Second, "four quarters to start", func() bool {
		for _, id := range []string{"q1", "q2", "q3", "q4"} {
			if fr.job(id) == nil {
				return false
			}
		}
		return true
	})
	for _, id := range []string{"q1", "q2", "q3", "q4"} {
		j := fr.job(id)
		if len(j.GPUs) != 1 || j.GPUs[0].Index != 0 || j.MilliGPUs != 250 {
			t.Fatalf("%s got GPUs %+v share %d, want a quarter of GPU 0", id, j.GPUs, j.MilliGPUs)
		}
	}
	b.srv.enqueue(agentapi.Assignment{TaskID: "w1", Name: "w1", MilliGPUsPerNode: 1000, Nodes: 1, Command: []string{"true"}})
	eventually.Within(t, 10*time.Second, "the whole-GPU task to start", func() bool { return fr.job("w1") != nil })
	if j := fr.job("w1"); len(j.GPUs) != 1 || j.GPUs[0].Index != 1 || j.MilliGPUs != 1000 {
		t.Fatalf("w1 got %+v, want GPU 1 whole", j.GPUs)
	}
	// Full: the worker stops claiming until something ends. Rather than
	// watch for a while, read the order of the claims: the one that handed
	// out w1 stays the last until q2 ends, and every claim after it offers
	// the quarter q2 freed. A worker that claimed while full would have
	// sent one offering nothing in between, right after taking w1.
	full := b.srv.task("w1").claim
	if n := len(b.srv.claimRequests()); n != full+1 {
		t.Fatalf("the worker claimed %d times with no free capacity", n-(full+1))
	}
	for _, c := range b.srv.claimRequests() {
		if !c.Fractions {
			t.Fatalf("claim %+v does not offer fractions", c)
		}
	}
	fr.end("q2")
	b.srv.finished(t, "q2", 10*time.Second)
	eventually.Within(t, 10*time.Second, "a claim offering the freed quarter", func() bool {
		cs := b.srv.claimRequests()
		c := cs[len(cs)-1]
		return c.FreeGPUs == 0 && c.FreeMilliGPUs == 250
	})
	for i, c := range b.srv.claimRequests()[full+1:] {
		if c.FreeGPUs != 0 || c.FreeMilliGPUs != 250 {
			t.Fatalf("claim %d after w1's offers %d GPUs and %d thousandths, not the quarter q2 freed", i+1, c.FreeGPUs, c.FreeMilliGPUs)
		}
	}
}
