package mcp_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/klique-ai/klique/internal/platform"
	"github.com/klique-ai/klique/mcp"
)

// allTools and readTools are the tools of the server, and those a viewer
// is offered.
var (
	allTools = []string{"abort_task", "call_model", "clone_task", "compare_tasks", "create_schedule", "enqueue_task", "get_app_instance", "get_pipeline_run", "get_study", "get_task", "get_task_logs",
		"get_task_metrics", "get_usage", "launch_app", "list_apps", "list_compute_resources", "list_departments", "list_model_aliases", "list_schedules", "list_tasks", "move_queued_task", "run_pipeline", "set_project_priorities",
		"start_study", "stop_app"}
	readTools = []string{"compare_tasks", "get_app_instance", "get_pipeline_run", "get_study", "get_task", "get_task_logs", "get_task_metrics", "get_usage",
		"list_apps", "list_compute_resources", "list_departments", "list_model_aliases", "list_schedules", "list_tasks"}
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
		s := mcp.New(mcp.Options{Platforms: mcp.ServicePlatforms(b.Svc), Auth: b.Auth})
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
		if tool.Name == "list_tasks" && !strings.Contains(string(raw), `"enum":["queued","placed","running","completed","failed","aborted","local"]`) {
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
