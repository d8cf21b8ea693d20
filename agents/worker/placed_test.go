package worker

import (
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/eventually"
)

// With Placed, the environment's scheduler places the work: the worker
// counts slots, takes a task on several nodes, and names no host GPUs.
func TestPlacedCountsSlotsAndTakesSeveralNodes(t *testing.T) {
	b := setup(t, func(c *Config) { c.Placed, c.Kind, c.HeartbeatInterval = true, "slurm", 100*time.Millisecond })
	a := shTask("multi", `echo "gpus=[$KLIQUE_GPUS]"; sleep 0.5`)
	a.Nodes = 2
	b.srv.enqueue(a)
	eventually.Within(t, 10*time.Second, "the task to hold both slots", func() bool { idle, _ := b.w.Allocator().Free(); return idle == 0 })
	f := b.srv.finished(t, "multi", 20*time.Second)
	ft := b.srv.task("multi")
	if f.State != "completed" {
		t.Fatalf("a task on 2 nodes: %+v\n%s", f, ft.logText())
	}
	log := ft.logText()
	if !strings.Contains(log, "the slurm scheduler places its GPUs") || !strings.Contains(log, "gpus=[]") {
		t.Fatalf("log:\n%s", log)
	}
	beats := 0
	for _, hb := range b.srv.heartbeats() {
		for _, th := range hb.Tasks {
			beats++
			if len(th.GPUs) > 0 {
				t.Fatalf("a heartbeat names host GPUs %v for a placed task", th.GPUs)
			}
		}
	}
	if beats == 0 {
		t.Fatal("no heartbeat carried the task")
	}
	eventually.Within(t, 10*time.Second, "the slots to be free again", func() bool { idle, _ := b.w.Allocator().Free(); return idle == 2 })
}
