package worker

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/klique-ai/klique/agents/runner/process"
	"github.com/klique-ai/klique/agents/runner/state"
	"github.com/klique-ai/klique/internal/eventually"
)

// TestARestartedWorkerStopsLeftoversAndKeepsTheGPUsOfWhatItCannotStop
// gives a worker a state directory as a killed run left it: a process
// group still running on GPU 1, and a container on GPU 0 that a process
// mode worker cannot remove. Before its first claim the worker has stopped
// the process group; while the container's record stands, it offers only
// the one GPU, and once the container is gone it offers both.
func TestARestartedWorkerStopsLeftoversAndKeepsTheGPUsOfWhatItCannotStop(t *testing.T) {
	t.Parallel()
	srv := newFakeServer(t)
	st := state.New(filepath.Join(t.TempDir(), "state"))

	orphan := exec.Command("sh", "-c", "sleep 60 & wait")
	orphan.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := orphan.Start(); err != nil {
		t.Fatal(err)
	}
	reaped := make(chan struct{})
	go func() { _ = orphan.Wait(); close(reaped) }()
	t.Cleanup(func() { _ = syscall.Kill(-orphan.Process.Pid, syscall.SIGKILL); <-reaped })
	began, boot, err := state.Process(orphan.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	orphanRec := &state.Record{TaskID: "t-orphan", Attempt: 1, GPUs: []int{1}, Runner: "process", PID: orphan.Process.Pid, StartTime: began, BootID: boot}
	container := &state.Record{TaskID: "t-boxed", Attempt: 4, GPUs: []int{0}, Runner: "docker", Container: "klique-t-boxed-4"}
	for _, r := range []*state.Record{orphanRec, container} {
		if err := st.Write(r); err != nil {
			t.Fatal(err)
		}
	}

	b := start(t, srv, func(c *Config) {
		c.State = st
		c.Runner = process.New(process.Options{State: st})
		c.RecoverInterval = 200 * time.Millisecond
	})
	eventually.Within(t, 10*time.Second, "the first claim", func() bool { return len(srv.claimRequests()) > 0 })
	select {
	case <-reaped:
	default:
		t.Fatal("the worker claimed before it stopped the process group its earlier run left")
	}
	if alive := orphanRec.GroupAlive(); alive {
		t.Fatal("the leftover process group still runs")
	}
	for _, c := range srv.claimRequests() {
		if c.FreeGPUs != 1 {
			t.Fatalf("a claim offered %d GPUs while the leftover container may hold GPU 0", c.FreeGPUs)
		}
	}
	if idle, _ := b.w.Allocator().Free(); idle != 1 {
		t.Fatalf("%d GPUs idle, want 1", idle)
	}
	// A second worker on the same state directory is refused.
	cfg := b.w.cfg
	cfg.Log = nil
	w2, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := w2.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "another worker") {
		t.Fatalf("a second worker on the same state directory: %v", err)
	}

	// The container is removed by hand (its record with it): the GPU
	// comes back.
	if err := st.Remove(container.TaskID, container.Attempt); err != nil {
		t.Fatal(err)
	}
	eventually.Within(t, 10*time.Second, "a claim with both GPUs", func() bool {
		cs := srv.claimRequests()
		return cs[len(cs)-1].FreeGPUs == 2
	})
	if es, _ := st.List(); len(es) != 0 {
		t.Fatalf("records left: %+v", es)
	}
}
