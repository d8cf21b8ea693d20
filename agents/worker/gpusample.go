package worker

import (
	"context"
	"fmt"
	"time"

	"github.com/klique-ai/klique/internal/agentapi"
)

// sampleGPUs reports each running task's GPU utilization as the metric
// gpu.utilization (the mean over its GPUs; gpu.utilization.N per GPU when
// it has several).
func (w *Worker) sampleGPUs(ctx context.Context) {
	t := time.NewTicker(w.cfg.GPUSampleInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		util, err := w.cfg.SMI.Utilization(ctx)
		if err != nil {
			w.log.Debug("sample GPU utilization", "err", err)
			continue
		}
		now := time.Now()
		w.mu.Lock()
		tasks := make([]*task, 0, len(w.tasks))
		for _, t := range w.tasks {
			tasks = append(tasks, t)
		}
		w.mu.Unlock()
		for _, t := range tasks {
			if !t.isRunning() || len(t.gpus) == 0 {
				continue
			}
			var sum float64
			var n int
			var points []agentapi.MetricPoint
			for _, g := range t.gpus {
				if u, ok := util[g.Index]; ok {
					sum += u
					n++
					if len(t.gpus) > 1 {
						points = append(points, agentapi.MetricPoint{At: now, Name: fmt.Sprintf("gpu.utilization.%d", g.Index), Value: u})
					}
				}
			}
			if n > 0 {
				points = append(points, agentapi.MetricPoint{At: now, Name: "gpu.utilization", Value: sum / float64(n)})
				t.metrics.Add(points...)
			}
		}
	}
}
