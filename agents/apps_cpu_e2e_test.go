package agents_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/klique-ai/klique/agents/worker"
	"github.com/klique-ai/klique/internal/eventually"
)

// TestAnAppInstancesCPUUseIsReported runs, on a real control plane and
// process-mode worker, a session app whose process group spins a CPU
// beside its web server, and one that only serves: the busy one's
// runtime reads its CPU use near one core, the idle one's near none, both
// from the worker's cpu.utilization samples, which the idle limits read.
func TestAnAppInstancesCPUUseIsReported(t *testing.T) {
	t.Parallel()
	spin := filepath.Join(t.TempDir(), "spin.sh")
	if err := os.WriteFile(spin, []byte("python3 -m http.server \"$1\" --bind 127.0.0.1 &\nwhile :; do :; done\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	doc := estate + fmt.Sprintf(`apps:
  catalogue:
    - name: busy
      kind: session
      port: 8000
      run: {process: "sh %s {port}"}
    - name: idle
      kind: session
      port: 8000
      run: {process: "python3 -m http.server {port} --bind 127.0.0.1"}
`, spin)
	e := startControlPlane(t, doc)
	_, logs := e.startWorkerTuned(t, "gpu-host-cpu", "0,1", func(c *worker.Config) {
		c.AppProbeInterval = 100 * time.Millisecond
		c.GPUSampleInterval = 300 * time.Millisecond
	})
	launch := func(app string) string {
		d := gql(t, e.url, e.alice, `mutation($in: LaunchAppInput!) { launchApp(input: $in) { id } }`, map[string]any{"in": map[string]any{
			"app": app, "computeResource": "1 GPU", "project": "fraud-models"}})
		return str(d, "launchApp", "id")
	}
	cpu := func(id string) (float64, bool) {
		d := gql(t, e.url, e.alice, `query($id: ID!) { appInstance(id: $id) { state runtime { cpuUtilization } } }`, map[string]any{"id": id})
		v, ok := get(d, "appInstance", "runtime", "cpuUtilization").(float64)
		return v, ok
	}
	busy, idle := launch("busy"), launch("idle")
	var b, i float64
	var okB, okI bool
	if !eventually.Poll(40*time.Second, func() bool {
		b, okB = cpu(busy)
		i, okI = cpu(idle)
		return okB && okI && b >= 25 && i < 10
	}) {
		t.Logf("the busy instance: %v", gql(t, e.url, e.alice, instanceQuery, map[string]any{"id": busy}))
		t.Fatalf("cpu.utilization: busy %v (%t), idle %v (%t): want the busy instance near 100 %% and the idle one near 0\nworker log:\n%s", b, okB, i, okI, logs)
	}
	t.Logf("cpu.utilization: busy %.1f %%, idle %.1f %%", b, i)
}
