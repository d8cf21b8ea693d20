package mcp_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/klique-ai/klique/internal/platform"
)

// TestTheToolsDoWhatTheySay drives every tool's happy path, as alice over
// the newest protocol and as lena over the one Claude Code speaks today.
func TestTheToolsDoWhatTheySay(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, b *testBundle) {
		alice := b.client(t, "alice")
		lena := b.client(t, "lena", "2025-06-18")

		var first, second task
		t.Run("list_compute_resources shows the caller, their group's policy and compute resources, and their projects", func(t *testing.T) {
			v := ok[computeView](t, alice, "list_compute_resources", nil)
			if v.User != "alice" || v.Role != "member" || v.Tenant != "default" || len(v.Groups) != 1 {
				t.Fatalf("%+v", v)
			}
			g := v.Groups[0]
			if g.Group != "ml-research" || g.ReservationGPUs != 16 || g.LimitGPUs != 48 || len(g.ComputeResources) != 6 {
				t.Fatalf("group %+v", g)
			}
			var names []string
			for _, cr := range g.ComputeResources {
				names = append(names, cr.Name+"="+cr.Size)
			}
			if !contains(names, "1 GPU=1") || !contains(names, "multi-node training=2x8") {
				t.Fatalf("compute resources %v", names)
			}
			var projects []string
			for _, p := range v.Projects {
				projects = append(projects, p.Name)
			}
			slices.Sort(projects)
			if !slices.Equal(projects, []string{"fraud-models", "shared-eval"}) {
				t.Fatalf("projects %v", projects)
			}
			admin := ok[computeView](t, b.client(t, "admin"), "list_compute_resources", map[string]any{"group": "vision"})
			if len(admin.Groups) != 1 || admin.Groups[0].Group != "vision" {
				t.Fatalf("admin, group vision: %+v", admin.Groups)
			}
		})

		t.Run("enqueue_task queues a task and says where it waits", func(t *testing.T) {
			first = ok[task](t, alice, "enqueue_task", map[string]any{"name": "train", "project": "fraud-models", "computeResource": "1 GPU",
				"command": []string{"python", "train.py"}, "parameters": map[string]string{"lr": "0.1", "epochs": "3"}})
			if first.ID == "" || first.Status != "queued" || first.Position != 1 || first.Owner != "alice" || first.Group != "ml-research" ||
				first.ComputeResource != "1 GPU" || first.Project != "fraud-models" || first.Size != "1" || first.Parameters["lr"] != "0.1" {
				t.Fatalf("%+v", first)
			}
			repo := ok[task](t, alice, "enqueue_task", map[string]any{"name": "from-git", "project": "shared-eval", "computeResource": "half GPU",
				"repository": "https://git.example.com/ml/eval.git", "commit": "abc123", "entryPoint": "eval.py"})
			if repo.Repository != "https://git.example.com/ml/eval.git" || repo.EntryPoint != "eval.py" || repo.Size != "0.5" {
				t.Fatalf("%+v", repo)
			}
			ok[task](t, alice, "abort_task", map[string]any{"id": repo.ID})
		})

		t.Run("get_task reads it back, and after a pass, where it was placed", func(t *testing.T) {
			got := ok[task](t, alice, "get_task", map[string]any{"id": first.ID})
			if got.ID != first.ID || got.Status != "queued" || got.Reason == "" || got.Position != 1 {
				t.Fatalf("%+v", got)
			}
			b.pass(t)
			got = ok[task](t, lena, "get_task", map[string]any{"id": first.ID})
			if got.Status != "placed" || got.Pool != "onprem-k8s" || got.Position != 0 || got.PlacedAt == "" {
				t.Fatalf("%+v", got)
			}
		})

		w := b.worker(t)
		t.Run("a run's logs and metrics are read back", func(t *testing.T) {
			var lines []string
			for i := 1; i <= 150; i++ {
				lines = append(lines, "epoch line "+string(rune('0'+i%10)))
			}
			lines[149] = "done"
			w.run(t, lines, map[string]float64{"loss": 0.5, "accuracy": 0.4}, "completed")
			got := ok[task](t, alice, "get_task", map[string]any{"id": first.ID})
			if got.Status != "completed" || got.Worker != "gpu-host-1" || got.Attempt != 1 || got.ExitCode == nil ||
				len(got.Outputs) != 1 || got.FinishedAt == "" {
				t.Fatalf("%+v", got)
			}
			tail := ok[logsView](t, alice, "get_task_logs", map[string]any{"id": first.ID})
			if len(tail.Lines) != 100 || tail.Lines[99].Line != "done" || tail.Task.Name != "train" || tail.Status != "completed" {
				t.Fatalf("default tail: %d lines, last %+v", len(tail.Lines), tail.Lines[len(tail.Lines)-1])
			}
			last5 := ok[logsView](t, alice, "get_task_logs", map[string]any{"id": first.ID, "tail": 5})
			if len(last5.Lines) != 5 || last5.Lines[4].Line != "done" {
				t.Fatalf("tail 5: %+v", last5.Lines)
			}
			page := ok[logsView](t, alice, "get_task_logs", map[string]any{"id": first.ID, "limit": 60})
			if len(page.Lines) != 60 || page.LastSeq != page.Lines[59].Seq {
				t.Fatalf("first page: %d lines, lastSeq %d", len(page.Lines), page.LastSeq)
			}
			next := ok[logsView](t, alice, "get_task_logs", map[string]any{"id": first.ID, "after": page.LastSeq, "limit": 1000})
			if len(page.Lines)+len(next.Lines) < 150 || next.Lines[0].Seq <= page.LastSeq || next.Lines[len(next.Lines)-1].Line != "done" {
				t.Fatalf("second page: %d lines from %d", len(next.Lines), next.Lines[0].Seq)
			}
			latest := ok[metricsView](t, alice, "get_task_metrics", map[string]any{"id": first.ID})
			byName := map[string]float64{}
			for _, m := range latest.Metrics {
				byName[m.Name] = m.Value
			}
			if len(latest.Metrics) != 2 || byName["loss"] != 1.0 || byName["accuracy"] != 0.8 {
				t.Fatalf("last metrics %+v", latest.Metrics)
			}
			series := ok[metricsView](t, alice, "get_task_metrics", map[string]any{"id": first.ID, "name": "loss"})
			if len(series.Metrics) != 2 || series.Metrics[0].Step != 1 || series.Metrics[1].Value != 1.0 || series.LastSeq != series.Metrics[1].Seq {
				t.Fatalf("loss series %+v", series)
			}
			more := ok[metricsView](t, alice, "get_task_metrics", map[string]any{"id": first.ID, "name": "loss", "after": series.LastSeq})
			if len(more.Metrics) != 0 || more.LastSeq != series.LastSeq {
				t.Fatalf("after the last point: %+v", more)
			}
		})

		t.Run("clone_task reruns it with changed parameters", func(t *testing.T) {
			second = ok[task](t, alice, "clone_task", map[string]any{"id": first.ID, "parameterOverrides": map[string]string{"lr": "0.01"}, "name": "train-lr-0.01"})
			if second.ID == first.ID || second.Name != "train-lr-0.01" || second.Status != "queued" || second.Parameters["lr"] != "0.01" ||
				second.Parameters["epochs"] != "3" || second.ClonedFrom == nil || second.ClonedFrom.ID != first.ID || second.ClonedFrom.Name != "train" ||
				!slices.Equal(second.Command, []string{"python", "train.py"}) {
				t.Fatalf("%+v", second)
			}
			b.pass(t)
			w.run(t, []string{"second run"}, map[string]float64{"loss": 0.25}, "")
		})

		t.Run("compare_tasks puts parameters and final metrics side by side", func(t *testing.T) {
			cmp := ok[comparison](t, alice, "compare_tasks", map[string]any{"ids": []string{first.ID, second.ID}})
			if len(cmp.Tasks) != 2 || cmp.Tasks[0].Name != "train" || cmp.Tasks[1].Name != "train-lr-0.01" || cmp.Tasks[1].Status != "running" {
				t.Fatalf("tasks %+v", cmp.Tasks)
			}
			params := map[string]string{}
			for _, p := range cmp.Parameters {
				params[p.Name] = strings.Join(p.Values, "|") + map[bool]string{true: " differs", false: ""}[p.Differs]
			}
			if params["lr"] != "0.1|0.01 differs" || params["epochs"] != "3|3" {
				t.Fatalf("parameters %v", params)
			}
			metrics := map[string]string{}
			for _, m := range cmp.Metrics {
				var vs []string
				for _, v := range m.Values {
					if v == nil {
						vs = append(vs, "-")
					} else {
						b, _ := json.Marshal(*v)
						vs = append(vs, string(b))
					}
				}
				metrics[m.Name] = strings.Join(vs, "|")
			}
			if metrics["loss"] != "1|0.5" || metrics["accuracy"] != "0.8|-" {
				t.Fatalf("metrics %v", metrics)
			}
		})

		t.Run("list_tasks lists newest first, with filters and pages", func(t *testing.T) {
			all := ok[taskList](t, alice, "list_tasks", nil)
			if len(all.Tasks) != 3 || all.Tasks[0].ID != second.ID || all.NextCursor != "" {
				t.Fatalf("%+v", all)
			}
			running := ok[taskList](t, alice, "list_tasks", map[string]any{"status": []string{"running"}, "mine": true})
			if len(running.Tasks) != 1 || running.Tasks[0].ID != second.ID || running.Tasks[0].Pool != "onprem-k8s" {
				t.Fatalf("running %+v", running)
			}
			p1 := ok[taskList](t, lena, "list_tasks", map[string]any{"limit": 1, "computeResource": "1 GPU"})
			if len(p1.Tasks) != 1 || p1.Tasks[0].ID != second.ID || p1.NextCursor == "" {
				t.Fatalf("page 1 %+v", p1)
			}
			p2 := ok[taskList](t, lena, "list_tasks", map[string]any{"limit": 1, "computeResource": "1 GPU", "cursor": p1.NextCursor})
			if len(p2.Tasks) != 1 || p2.Tasks[0].ID != first.ID || p2.NextCursor != "" {
				t.Fatalf("page 2 %+v", p2)
			}
			if mine := ok[taskList](t, lena, "list_tasks", map[string]any{"mine": true}); len(mine.Tasks) != 0 {
				t.Fatalf("lena's own: %+v", mine)
			}
			if other := ok[taskList](t, b.client(t, "vic"), "list_tasks", nil); len(other.Tasks) != 0 {
				t.Fatalf("vic sees ml-research's tasks: %+v", other)
			}
		})

		t.Run("abort_task stops a running task, by its owner's lead", func(t *testing.T) {
			got := ok[task](t, lena, "abort_task", map[string]any{"id": second.ID, "reason": "superseded"})
			if got.Status != "aborted" || !strings.Contains(got.Reason, "aborted by lena: superseded") {
				t.Fatalf("%+v", got)
			}
			msg := refused(t, alice, "abort_task", map[string]any{"id": second.ID})
			if !strings.Contains(msg, "task 'train-lr-0.01' has already ended (aborted)") {
				t.Fatalf("abort again: %s", msg)
			}
		})

		t.Run("get_usage reads GPU-hours and tokens", func(t *testing.T) {
			u := ok[usageView](t, alice, "get_usage", map[string]any{"mine": true, "by": []string{"project"}})
			if u.From == "" || u.To == "" {
				t.Fatalf("%+v", u)
			}
			if len(u.Rows) != 1 || u.Rows[0].Keys["project"] != "fraud-models" {
				t.Fatalf("alice's usage by project: %+v", u.Rows)
			}
			g := ok[usageView](t, alice, "get_usage", map[string]any{"from": "2020-01-01", "to": "2100-01-01T00:00:00Z", "project": "fraud-models"})
			if len(g.Rows) != 1 || g.From != "2020-01-01T00:00:00Z" {
				t.Fatalf("fraud-models' usage: %+v", g)
			}
			if none := ok[usageView](t, alice, "get_usage", map[string]any{"from": "2020-01-01", "to": "2020-02-01"}); len(none.Rows) > 1 || (len(none.Rows) == 1 && none.Rows[0].GPUHours != 0) {
				t.Fatalf("usage in 2020: %+v", none)
			}
		})

		t.Run("list_model_aliases and call_model use the gateway with the caller's credential", func(t *testing.T) {
			as := ok[aliases](t, alice, "list_model_aliases", map[string]any{"project": "fraud-models"})
			var names []string
			for _, a := range as.Aliases {
				names = append(names, a.Name)
			}
			if !slices.Equal(names, []string{"chat", "embed"}) || as.Aliases[0].Description == "" {
				t.Fatalf("aliases %+v", as)
			}
			got := ok[answer](t, alice, "call_model", map[string]any{"alias": "chat", "project": "fraud-models", "prompt": "hi", "system": "be brief",
				"maxTokens": 50, "temperature": 0.2})
			if got.Content != "hello there" || got.Model != "llama" || got.InputTokens != 9 || got.OutputTokens != 2 || got.Alias != "chat" {
				t.Fatalf("%+v", got)
			}
			sent := b.models.last()
			msgs, _ := sent.body["messages"].([]any)
			if sent.credential != b.keys["alice"] || sent.project != "fraud-models" || sent.body["model"] != "chat" || len(msgs) != 2 ||
				sent.body["max_tokens"] != 50.0 || sent.body["temperature"] != 0.2 || sent.body["stream"] != false {
				t.Fatalf("sent %+v", sent)
			}
			ok[answer](t, lena, "call_model", map[string]any{"alias": "chat", "project": "shared-eval",
				"messages": []map[string]string{{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}}})
			b.models.refuse(http.StatusTooManyRequests, `{"error":{"message":"this call would go past the monthly token budget of project fraud-models","type":"insufficient_quota","code":"insufficient_quota"}}`)
			defer b.models.refuse(0, "")
			if msg := refused(t, alice, "call_model", map[string]any{"alias": "chat", "project": "fraud-models", "prompt": "hi"}); msg != "this call would go past the monthly token budget of project fraud-models" {
				t.Fatalf("refusal %q", msg)
			}
		})

		t.Run("every call is in the audit trail with channel mcp and the acting user", func(t *testing.T) {
			var enqueued, reads, refusals int
			for _, e := range b.AuditLog(t) {
				switch {
				case e.Action == "task.enqueued" && e.ActorName == "alice":
					enqueued++
					if e.Channel != "mcp" {
						t.Errorf("task.enqueued on channel %s", e.Channel)
					}
				case e.Action == "task.aborted" && e.ActorName == "lena" && e.Channel != "mcp":
					t.Errorf("task.aborted on channel %s", e.Channel)
				case e.Action == platform.ToolCallAction:
					if e.Channel != "mcp" || e.ObjectKind != platform.ToolCallKind || e.ActorID == "" {
						t.Errorf("tool call entry %+v", e)
					}
					if strings.HasPrefix(e.Detail, "refused: ") {
						refusals++
					} else {
						reads++
					}
				}
			}
			if enqueued != 3 || reads < 20 || refusals < 2 {
				t.Fatalf("%d enqueued, %d reads, %d refusals in the audit trail", enqueued, reads, refusals)
			}
		})
	})
}
