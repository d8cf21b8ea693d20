package mcp_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type pipelineRun struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	State string `json:"state"`
	Steps []struct {
		Name            string   `json:"name"`
		State           string   `json:"state"`
		ComputeResource string   `json:"computeResource"`
		TaskID          string   `json:"taskId"`
		DependsOn       []string `json:"dependsOn"`
	} `json:"steps"`
}

// TestPipelineTools runs the example pipeline with run_pipeline, reads it
// with get_pipeline_run once the controller has enqueued its first step,
// and checks a refusal and another group's member.
func TestPipelineTools(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, b *testBundle) {
		alice := b.client(t, "alice")
		def, err := os.ReadFile(filepath.Join("..", "examples", "pipelines", "pipeline.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		run := ok[pipelineRun](t, alice, "run_pipeline", map[string]any{"definition": string(def), "params": map[string]any{"lr": "0.05"}})
		if run.State != "pending" || len(run.Steps) != 3 || run.Steps[1].ComputeResource != "1 A100" || run.Steps[2].DependsOn[0] != "train" {
			t.Fatalf("run %+v", run)
		}
		if err := b.Svc.AdvancePipelines(context.Background()); err != nil {
			t.Fatal(err)
		}
		got := ok[pipelineRun](t, alice, "get_pipeline_run", map[string]any{"id": run.ID})
		if got.State != "running" || got.Steps[0].State != "queued" || got.Steps[0].TaskID == "" || got.Steps[1].State != "pending" {
			t.Fatalf("after a controller pass %+v", got)
		}
		task := ok[task](t, alice, "get_task", map[string]any{"id": got.Steps[0].TaskID})
		if task.Name != "fraud-train/prepare" {
			t.Fatalf("prepare's task %+v", task)
		}
		if msg := refused(t, b.client(t, "vic"), "get_pipeline_run", map[string]any{"id": run.ID}); !strings.Contains(msg, "no pipeline run") {
			t.Fatalf("another group's member: %s", msg)
		}
		cycle := "name: c\nproject: fraud-models\nsteps:\n  - {name: a, computeResource: 1 GPU, dependsOn: [b], command: [x]}\n  - {name: b, computeResource: 1 GPU, dependsOn: [a], command: [x]}\n"
		if msg := refused(t, alice, "run_pipeline", map[string]any{"definition": cycle}); !strings.Contains(msg, "cycle: a → b → a") {
			t.Fatalf("a cycle: %s", msg)
		}
	})
}
