package autoscaler_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/klique-ai/klique/agents/autoscaler"
	"github.com/klique-ai/klique/internal/agentapi"
)

// memProvider is a provider with nothing behind it: the benchmark measures
// the autoscaler's own work in a round.
type memProvider struct{ list []autoscaler.Instance }

func (m *memProvider) Start(_ context.Context, s autoscaler.InstanceSpec) (autoscaler.Instance, error) {
	return autoscaler.Instance{}, fmt.Errorf("%w: the benchmark starts nothing", autoscaler.ErrNoCapacity)
}
func (m *memProvider) Terminate(context.Context, []string) error { return nil }
func (m *memProvider) List(context.Context, map[string]string) ([]autoscaler.Instance, error) {
	return m.list, nil
}

// BenchmarkRound is one round of a large autoscaler: 1,000 instances with
// registered workers (half of them busy), 1,000 tasks waiting at its
// maximum. The round's own cost (no network) bounds how often it may run.
func BenchmarkRound(b *testing.B) {
	now := time.Date(2026, 11, 29, 14, 0, 0, 0, time.UTC)
	plane := &fakePlane{spec: agentapi.AutoscalerSpec{ID: "as1", Name: "burst", Pool: "cloud-burst", MaxInstances: 1000,
		InstanceTypes: []agentapi.InstanceType{{Name: "g5.48xlarge", GPUs: 8}}, IdleTimeoutSeconds: 600, SpinUpTimeoutSeconds: 900,
		Market: "spot", SpotFallback: true, SpotTimeoutSeconds: 120, SpotBlackoutSeconds: 1800}}
	prov := &memProvider{}
	for i := range 1000 {
		name := fmt.Sprintf("burst-%04d", i)
		prov.list = append(prov.list, autoscaler.Instance{ID: fmt.Sprintf("i-%04d", i), Name: name, Type: "g5.48xlarge",
			State: autoscaler.StateRunning, LaunchedAt: now})
		w := agentapi.PoolWorker{ID: name, Hostname: name, GPUs: 8, Online: true}
		if i%2 == 0 {
			w.RunningTasks, w.RunningMilliGPUs = 8, 8000
		}
		plane.workers = append(plane.workers, w)
		plane.placed = append(plane.placed, agentapi.PlacedTask{TaskID: fmt.Sprintf("t%04d", i), MilliGPUsPerNode: 8000, Nodes: 1, PlacedAt: now})
	}
	a := autoscaler.New(autoscaler.Config{Client: plane, Provider: prov, Now: func() time.Time { return now }})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		plane.reports = plane.reports[:0]
		if _, err := a.Step(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
