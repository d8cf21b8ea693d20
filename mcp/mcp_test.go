package mcp_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/klique-ai/klique/engine/loop"
	"github.com/klique-ai/klique/internal/platform"
	"github.com/klique-ai/klique/mcp"
)

// What the tools answer, as a client decodes it.
type task struct {
	ID, Name, Status, Reason       string
	Position                       int
	ComputeResource, Group         string
	Project, Owner, Size, Pool     string
	Worker                         string
	Attempt                        int
	ExitCode                       *int
	Command                        []string
	Parameters                     map[string]string
	Outputs                        []string
	ClonedFrom                     *struct{ ID, Name string }
	CreatedAt, PlacedAt            string
	StartedAt, FinishedAt          string
	Repository, Commit, EntryPoint string
}

type taskList struct {
	Tasks      []task
	NextCursor string
}

type computeView struct {
	User, Role, Tenant string
	Groups             []struct {
		Group                      string
		ReservationGPUs, LimitGPUs int
		HeldGPUs                   float64
		WaitingTasks               int
		Budget                     *struct {
			Period           string
			Hours, LeftHours float64
			UsedUp           bool
			ResetsAt         string
		}
		ComputeResources []struct {
			Name, Size string
			TimeWeight float64
			Queued     int
			HeadWaits  string
		}
	}
	Projects []struct{ Name, Group string }
}

type logsView struct {
	Task   struct{ ID, Name string }
	Status string
	Lines  []struct {
		Seq          int64
		Stream, Line string
	}
	LastSeq   int64
	Truncated bool
}

type metricsView struct {
	Task    struct{ ID, Name string }
	Metrics []struct {
		Name  string
		Value float64
		Step  int64
		Seq   int64
	}
	LastSeq int64
}

type comparison struct {
	Tasks      []struct{ ID, Name, Status string }
	Parameters []struct {
		Name    string
		Values  []string
		Differs bool
	}
	Metrics []struct {
		Name    string
		Values  []*float64
		Differs bool
	}
}

type usageView struct {
	From, To string
	Rows     []struct {
		Keys               map[string]string
		GPUHours           float64
		Calls, InputTokens int64
	}
}

type aliases struct {
	Aliases []struct{ Name, Description string }
}

type answer struct {
	Alias, Project, Model, Content string
	InputTokens, OutputTokens      int64
}

// allTools and readTools are the tools of the server, and those a viewer
// is offered.
var (
	allTools = []string{"abort_task", "call_model", "clone_task", "compare_tasks", "enqueue_task", "get_task", "get_task_logs",
		"get_task_metrics", "get_usage", "list_compute_resources", "list_model_aliases", "list_tasks"}
	readTools = []string{"compare_tasks", "get_task", "get_task_logs", "get_task_metrics", "get_usage",
		"list_compute_resources", "list_model_aliases", "list_tasks"}
)

func TestToolsAreListedByRole(t *testing.T) {
	t.Parallel()
	b := sqliteBundle(t)
	for user, want := range map[string][]string{"admin": allTools, "alice": allTools, "lena": allTools, "vic": allTools, "val": readTools} {
		t.Run(user+" is offered the tools of their role", func(t *testing.T) {
			got := toolNames(t, b.client(t, user))
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Fatalf("tools %v, want %v", got, want)
			}
		})
	}
	t.Run("a viewer cannot call a tool it is not offered", func(t *testing.T) {
		c := b.client(t, "val")
		for _, tool := range []string{"enqueue_task", "abort_task", "clone_task", "call_model"} {
			req := mcpgo.CallToolRequest{}
			req.Params.Name = tool
			req.Params.Arguments = map[string]any{"name": "x", "computeResource": "1 GPU", "project": "fraud-models", "command": []string{"true"},
				"id": "x", "alias": "chat", "prompt": "hi"}
			if res, err := c.CallTool(context.Background(), req); err == nil {
				t.Errorf("%s: a viewer called it: %s", tool, text(res))
			}
		}
		tasks := ok[taskList](t, b.client(t, "admin"), "list_tasks", nil)
		if len(tasks.Tasks) != 0 {
			t.Fatalf("a viewer's call made tasks: %+v", tasks.Tasks)
		}
		if len(b.models.calls) != 0 {
			t.Fatalf("a viewer's call reached the gateway: %+v", b.models.calls)
		}
	})
	t.Run("without a model caller there is no call_model", func(t *testing.T) {
		s := mcp.New(mcp.Options{Service: b.Svc, Auth: b.Auth})
		if contains(s.Tools(), "call_model") || !contains(s.Tools(), "list_model_aliases") {
			t.Fatalf("tools %v", s.Tools())
		}
	})
}

func TestEveryToolDeclaresItsSchemas(t *testing.T) {
	t.Parallel()
	b := sqliteBundle(t)
	res, err := b.client(t, "admin").ListTools(context.Background(), mcpgo.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Tools) != len(allTools) {
		t.Fatalf("%d tools, want %d", len(res.Tools), len(allTools))
	}
	for _, tool := range res.Tools {
		t.Run(tool.Name, func(t *testing.T) {
			if len(tool.Description) < 40 {
				t.Errorf("description %q says too little", tool.Description)
			}
			raw, _ := json.Marshal(tool)
			var decl struct {
				InputSchema map[string]any `json:"inputSchema"`
			}
			if err := json.Unmarshal(raw, &decl); err != nil {
				t.Fatal(err)
			}
			in := decl.InputSchema
			if in["type"] != "object" || in["additionalProperties"] != false {
				t.Errorf("input schema %v: want an object that takes no unknown arguments", in)
			}
			props, _ := in["properties"].(map[string]any)
			for name, p := range props {
				if d, _ := p.(map[string]any)["description"].(string); d == "" && !slices.Contains([]string{"name", "reason", "workingDir", "commit"}, name) {
					t.Errorf("argument %s has no description", name)
				}
			}
			if tool.OutputSchema.Type != "object" || len(tool.OutputSchema.Properties) == 0 {
				t.Errorf("output schema %+v: want an object with properties", tool.OutputSchema)
			}
			ro := tool.Annotations.ReadOnlyHint
			if ro == nil || *ro != slices.Contains(readTools, tool.Name) {
				t.Errorf("read-only hint %v", ro)
			}
		})
	}
	// The enums of filters are declared.
	for _, tool := range res.Tools {
		raw, _ := json.Marshal(tool)
		if tool.Name == "list_tasks" && !strings.Contains(string(raw), `"enum":["queued","placed","running","completed","failed","aborted"]`) {
			t.Errorf("list_tasks does not declare the statuses: %s", raw)
		}
	}
}

func TestAuthentication(t *testing.T) {
	t.Parallel()
	b := sqliteBundle(t)
	post := func(authorization string) (*http.Response, string) {
		req, _ := http.NewRequest(http.MethodPost, b.url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if authorization != "" {
			req.Header.Set("Authorization", authorization)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp, string(body)
	}
	for _, tc := range []struct{ name, header, challenge, says string }{
		{"without a credential", "", `Bearer resource_metadata="` + metadataURL + `"`, "Authorization: Bearer"},
		{"with an unknown key", "Bearer kq_nosuchkey0123456789abcdefghijklmnopqrstuv", `Bearer error="invalid_token", resource_metadata="` + metadataURL + `"`, ""},
		{"with a token that is not a JWT of ours", "Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.", `Bearer error="invalid_token", resource_metadata="` + metadataURL + `"`, ""},
		{"with another scheme", "Basic YWxpY2U6c2VjcmV0", `Bearer resource_metadata="` + metadataURL + `"`, ""},
	} {
		t.Run("a request "+tc.name+" gets 401 naming the resource metadata", func(t *testing.T) {
			resp, body := post(tc.header)
			if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != tc.challenge {
				t.Fatalf("%d %q %s", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), body)
			}
			if !strings.Contains(body, `"code":"UNAUTHENTICATED"`) || !strings.Contains(body, tc.says) {
				t.Fatalf("body %s", body)
			}
		})
	}
	t.Run("an access token works as well as an API key", func(t *testing.T) {
		tok, _, err := b.Svc.IssueToken(b.SignIn(t, b.keys["alice"]))
		if err != nil {
			t.Fatal(err)
		}
		c := connect(t, b.url, tok)
		if got := ok[computeView](t, c, "list_compute_resources", nil); got.User != "alice" {
			t.Fatalf("acting as %q", got.User)
		}
	})
	t.Run("a revoked key is refused at once", func(t *testing.T) {
		k, secret, err := b.Svc.CreateAPIKey(b.Admin, platform.APIKeyInput{Name: "short-lived", User: "vic"})
		if err != nil {
			t.Fatal(err)
		}
		connect(t, b.url, secret)
		if _, err := b.Svc.RevokeAPIKey(b.Admin, k.ID); err != nil {
			t.Fatal(err)
		}
		if resp, body := post("Bearer " + secret); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
	})
	t.Run("GET opens no stream", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodGet, b.url, nil)
		req.Header.Set("Authorization", "Bearer "+b.keys["alice"])
		req.Header.Set("Accept", "text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Fatalf("GET: %d", resp.StatusCode)
		}
	})
}

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

// TestRefusalsSayWhy checks that a refusal of the platform reaches the
// agent as a tool error in the platform's words.
func TestRefusalsSayWhy(t *testing.T) {
	t.Parallel()
	b := sqliteBundle(t)
	alice, vic := b.client(t, "alice"), b.client(t, "vic")
	mine := ok[task](t, alice, "enqueue_task", map[string]any{"name": "train", "project": "fraud-models", "computeResource": "1 GPU", "command": []string{"true"}})
	for _, tc := range []struct {
		name string
		c    *client.Client
		tool string
		args map[string]any
		want string
	}{
		{"a compute resource not open to the caller's group", vic, "enqueue_task",
			map[string]any{"name": "t", "project": "vision-detect", "computeResource": "multi-node training", "command": []string{"true"}},
			"the compute resource 'multi-node training' is not open to group vision"},
		{"a compute resource that does not exist", vic, "enqueue_task",
			map[string]any{"name": "t", "project": "vision-detect", "computeResource": "2 GPUs", "command": []string{"true"}},
			"no compute resource '2 GPUs' is open to you; list yours with list_compute_resources"},
		{"a project of another group", vic, "enqueue_task",
			map[string]any{"name": "t", "project": "fraud-models", "computeResource": "1 GPU", "command": []string{"true"}},
			"project 'fraud-models' belongs to group ml-research, which you are not in"},
		{"a credential in a parameter", alice, "enqueue_task",
			map[string]any{"name": "t", "project": "fraud-models", "computeResource": "1 GPU", "command": []string{"true"}, "parameters": map[string]string{"api_key": "sk-live-0123456789abcdef"}},
			"looks like a credential"},
		{"a task of another group", vic, "get_task", map[string]any{"id": mine.ID}, "no task '" + mine.ID + "'"},
		{"its logs", vic, "get_task_logs", map[string]any{"id": mine.ID}, "no task"},
		{"its metrics", vic, "get_task_metrics", map[string]any{"id": mine.ID}, "no task"},
		{"aborting it", vic, "abort_task", map[string]any{"id": mine.ID}, "no task"},
		{"cloning it", vic, "clone_task", map[string]any{"id": mine.ID}, "no task"},
		{"comparing it", vic, "compare_tasks", map[string]any{"ids": []string{mine.ID, mine.ID + "x"}}, "no task"},
		{"a group one is not in", vic, "list_compute_resources", map[string]any{"group": "ml-research"}, "ml-research"},
		{"usage of another group's project", vic, "get_usage", map[string]any{"project": "fraud-models"}, "no project"},
		{"model aliases of another group's project", vic, "list_model_aliases", map[string]any{"project": "fraud-models"}, "no project 'fraud-models' you may use"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg := refused(t, tc.c, tc.tool, tc.args)
			if !strings.Contains(msg, tc.want) {
				t.Fatalf("%q, want it to say %q", msg, tc.want)
			}
		})
	}
}

// TestBadArgumentsAreToolErrors sends every tool arguments it cannot use:
// each comes back as a tool error naming the argument, never as a protocol
// failure, and nothing changes.
func TestBadArgumentsAreToolErrors(t *testing.T) {
	t.Parallel()
	b := sqliteBundle(t)
	alice := b.client(t, "alice")
	mine := ok[task](t, alice, "enqueue_task", map[string]any{"name": "train", "project": "fraud-models", "computeResource": "1 GPU", "command": []string{"true"}})
	for _, tc := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"list_compute_resources", map[string]any{"groups": "x"}, "unknown argument 'groups'; this tool takes group"},
		{"list_compute_resources", map[string]any{"group": 7}, "argument 'group' must be a string, not a number"},
		{"enqueue_task", map[string]any{}, "argument 'name' is missing"},
		{"enqueue_task", map[string]any{"name": "t", "project": "fraud-models", "command": []string{"true"}}, "argument 'computeResource' is missing"},
		{"enqueue_task", map[string]any{"name": "t", "project": "fraud-models", "computeResource": "1 GPU"}, "say what to run"},
		{"enqueue_task", map[string]any{"name": "t", "computeResource": "1 GPU", "command": "python train.py"}, "argument 'command' must be a list of strings, not a string"},
		{"enqueue_task", map[string]any{"name": "t", "computeResource": "1 GPU", "command": []string{"true"}, "parameters": map[string]any{"lr": 0.1}}, "argument 'parameters' must be an object whose values are strings; one of its values is a number"},
		{"enqueue_task", map[string]any{"name": "t", "computeResource": "1 GPU", "command": []string{"true"}}, "say which project the task belongs to"},
		{"enqueue_task", map[string]any{"name": " t", "project": "fraud-models", "computeResource": "1 GPU", "command": []string{"true"}}, "name starts or ends with a space"},
		{"enqueue_task", map[string]any{"name": "t", "project": "fraud-models", "computeResource": "1 GPU", "command": []string{"true"}, "cpu": 4}, "unknown argument 'cpu'"},
		{"get_task", map[string]any{}, "argument 'id' is missing"},
		{"get_task", map[string]any{"id": []string{"a"}}, "argument 'id' must be a string, not an array"},
		{"get_task", map[string]any{"id": "no-such-task"}, "no task 'no-such-task'"},
		{"list_tasks", map[string]any{"status": []string{"waiting"}}, `status "waiting" is not known: use queued, placed, running, completed, failed, aborted`},
		{"list_tasks", map[string]any{"status": "queued"}, "argument 'status' must be a list of strings"},
		{"list_tasks", map[string]any{"limit": 1000}, "argument 'limit' must be 1 to 100"},
		{"list_tasks", map[string]any{"limit": 1.5}, "argument 'limit' must be a whole number"},
		{"list_tasks", map[string]any{"cursor": "abc"}, "argument 'cursor' is not a cursor this tool gave"},
		{"list_tasks", map[string]any{"mine": "yes"}, "argument 'mine' must be true or false, not a string"},
		{"list_tasks", map[string]any{"project": "nope"}, "no project"},
		{"get_task_logs", map[string]any{"id": mine.ID, "tail": 10, "after": 3}, "give tail (the last lines), or after and limit"},
		{"get_task_logs", map[string]any{"id": mine.ID, "tail": 6000}, "argument 'tail' must be 1 to 5000"},
		{"get_task_logs", map[string]any{"tail": 6}, "argument 'id' is missing"},
		{"get_task_metrics", map[string]any{"id": mine.ID, "after": 5}, "give its name too"},
		{"get_task_metrics", map[string]any{"id": mine.ID, "name": "loss", "limit": -1}, "argument 'limit' must be 1 to 10000"},
		{"abort_task", map[string]any{"reason": "x"}, "argument 'id' is missing"},
		{"abort_task", map[string]any{"id": mine.ID, "reason": strings.Repeat("x", 501)}, "the reason is longer than 500 characters"},
		{"clone_task", map[string]any{"id": mine.ID, "group": "ml-research"}, "give computeResource too"},
		{"clone_task", map[string]any{"id": mine.ID, "parameterOverrides": []string{"lr=0.1"}}, "argument 'parameterOverrides' must be an object whose values are strings, not an array"},
		{"call_model", map[string]any{"alias": "chat", "project": "fraud-models", "messages": []map[string]any{{"role": "user", "content": 5}}}, "argument 'messages.content' must be a string, not a number"},
		{"enqueue_task", map[string]any{"name": "t", "computeResource": "1 GPU", "command": []any{"python", 3}}, "argument 'command' must be a list of strings; one of its values is a number"},
		{"compare_tasks", map[string]any{"ids": []string{mine.ID}}, "argument 'ids' must list two to ten task ids"},
		{"compare_tasks", map[string]any{"ids": []string{mine.ID, mine.ID}}, "is listed twice"},
		{"get_usage", map[string]any{"from": "last week"}, "argument 'from' must be an RFC 3339 time (2026-11-01T00:00:00Z) or a date (2026-11-01), not \"last week\""},
		{"get_usage", map[string]any{"from": "2026-02-01", "to": "2026-01-01"}, "the range must end after it starts"},
		{"get_usage", map[string]any{"by": []string{"planet"}}, `usage cannot be grouped by "planet"`},
		{"get_usage", map[string]any{"by": []string{"pool", "pool"}}, `usage is grouped by "pool" twice`},
		{"list_model_aliases", map[string]any{"project": 3}, "argument 'project' must be a string"},
		{"call_model", map[string]any{"project": "fraud-models", "prompt": "hi"}, "argument 'alias' is missing"},
		{"call_model", map[string]any{"alias": "chat", "prompt": "hi"}, "argument 'project' is missing"},
		{"call_model", map[string]any{"alias": "chat", "project": "fraud-models"}, "say what to ask"},
		{"call_model", map[string]any{"alias": "chat", "project": "fraud-models", "prompt": "hi", "messages": []map[string]string{{"role": "user", "content": "hi"}}}, "give prompt or messages, not both"},
		{"call_model", map[string]any{"alias": "chat", "project": "fraud-models", "messages": []map[string]string{{"role": "robot", "content": "hi"}}}, `message 1 has role "robot"`},
		{"call_model", map[string]any{"alias": "chat", "project": "fraud-models", "prompt": "hi", "maxTokens": -5}, "argument 'maxTokens' must not be negative"},
	} {
		t.Run(tc.tool+" "+tc.want, func(t *testing.T) {
			msg := refused(t, alice, tc.tool, tc.args)
			if !strings.Contains(msg, tc.want) {
				t.Fatalf("%q, want it to say %q", msg, tc.want)
			}
		})
	}
	t.Run("nothing was enqueued and no model was called", func(t *testing.T) {
		if l := ok[taskList](t, alice, "list_tasks", nil); len(l.Tasks) != 1 {
			t.Fatalf("%d tasks", len(l.Tasks))
		}
		if len(b.models.calls) != 0 {
			t.Fatalf("model calls %+v", b.models.calls)
		}
	})
	t.Run("bad arguments are recorded in the audit trail too", func(t *testing.T) {
		n := 0
		for _, e := range b.AuditLog(t) {
			if e.Action == platform.ToolCallAction && strings.HasPrefix(e.Detail, "bad arguments: ") && e.ActorName == "alice" && e.Channel == "mcp" {
				n++
			}
		}
		if n < 30 {
			t.Fatalf("%d bad-argument calls recorded", n)
		}
	})
}

// TestAnExhaustedTimeBudgetIsExplained uses up group vision's time budget
// (a monthly budget of 1 h, and a task of the group held for 2 h by the
// engine's clock): the next task waits, and get_task and
// list_compute_resources say why and when the budget resets, in words an
// agent can relay.
func TestAnExhaustedTimeBudgetIsExplained(t *testing.T) {
	t.Parallel()
	b := sqliteBundle(t)
	doc, err := os.ReadFile(filepath.Join("..", "examples", "estate.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	small := strings.Replace(string(doc), "hours: 2000\n      period: week", "hours: 1\n      period: month", 1)
	if small == string(doc) {
		t.Fatal("the example estate no longer gives vision a weekly budget of 2000 h")
	}
	if _, err := b.Svc.ApplyEstate(b.Admin, []byte(small), false); err != nil {
		t.Fatalf("apply: %v", err)
	}
	// Both passes in the past, the second two hours after the first, so
	// that the policy view (read at the real time) counts the two hours.
	// In the first hours of a month they cannot both be in this month and
	// the past: they are then in the future, and only the engine's own
	// account is checked.
	now := time.Now().UTC()
	start := now.Add(-150 * time.Minute)
	inPast := start.Month() == now.Month()
	if !inPast {
		start = now.Add(time.Minute)
	}
	passAt := func(at time.Time) {
		t.Helper()
		eng := &loop.Loop{State: b.Store, Planner: b.Svc, Holder: "test", Now: func() time.Time { return at }}
		if _, err := eng.PassAll(context.Background()); err != nil {
			t.Fatalf("engine pass: %v", err)
		}
	}
	vic := b.client(t, "vic")
	first := ok[task](t, vic, "enqueue_task", map[string]any{"name": "long", "project": "vision-detect", "computeResource": "1 GPU", "command": []any{"true"}})
	passAt(start)
	if got := ok[task](t, vic, "get_task", map[string]any{"id": first.ID}); got.Status != "placed" {
		t.Fatalf("vic's first task is %s after a pass, want placed", got.Status)
	}
	second := ok[task](t, vic, "enqueue_task", map[string]any{"name": "next", "project": "vision-detect", "computeResource": "1 GPU", "command": []any{"true"}})
	passAt(start.Add(2 * time.Hour))

	got := ok[task](t, vic, "get_task", map[string]any{"id": second.ID})
	if got.Status != "queued" || !strings.Contains(got.Reason, "group vision has used its monthly time budget of 1 h; it resets ") {
		t.Fatalf("vic's second task: %s, %q; want it queued because vision's monthly budget is used", got.Status, got.Reason)
	}
	view := ok[computeView](t, vic, "list_compute_resources", nil)
	if len(view.Groups) != 1 || view.Groups[0].Budget == nil {
		t.Fatalf("vic's policy view has no budget: %+v", view.Groups)
	}
	if budget := view.Groups[0].Budget; inPast && (!budget.UsedUp || budget.LeftHours != 0 || budget.Period != "month") {
		t.Errorf("vic's policy view does not show the monthly budget used up: %+v", *budget)
	}
	for _, cr := range view.Groups[0].ComputeResources {
		if cr.Name == "1 GPU" && !strings.Contains(cr.HeadWaits, "has used its monthly time budget") {
			t.Errorf("compute resource 1 GPU does not say why its first task waits: %q", cr.HeadWaits)
		}
	}
}
