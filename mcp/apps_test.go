package mcp_test

import (
	"strings"
	"testing"

	"github.com/klique-ai/klique/internal/model"
)

type appInstance struct {
	ID, Name, App, State, URL string
	Values                    map[string]any
	Idle                      struct {
		IdleMinutes, MaxLifetimeMinutes int
		StopReason                      string
	}
}

// TestAppTools launches, reads and stops an app instance through the MCP
// tools, and checks that each governance refusal reaches the agent as a
// tool error in the platform's words.
func TestAppTools(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, b *testBundle) {
		alice, vic, admin := b.client(t, "alice"), b.client(t, "vic"), b.client(t, "admin")
		apps := ok[struct {
			Apps []struct{ Name, Kind, Form string }
		}](t, alice, "list_apps", nil)
		if len(apps.Apps) != 8 || apps.Apps[0].Form == "" {
			t.Fatalf("list_apps: %+v", apps)
		}
		in := ok[appInstance](t, alice, "launch_app", map[string]any{"app": "llama-cpp", "computeResource": "1 GPU", "project": "fraud-models",
			"values": map[string]any{"model": "ggml-org/gemma-3-1b-it-GGUF", "gpu_layers": 20}, "maxLifetimeMinutes": 90})
		if in.State != "waiting" || in.App != "llama-cpp" || in.URL != "/apps/"+in.ID+"/" || in.Values["gpu_layers"] != float64(20) {
			t.Fatalf("launch_app: %+v", in)
		}
		b.pass(t)
		got := ok[appInstance](t, alice, "get_app_instance", map[string]any{"id": in.ID})
		if got.State != "placed" || got.Idle.MaxLifetimeMinutes != 90 {
			t.Fatalf("after a pass: %+v", got)
		}
		for _, tc := range []struct {
			name string
			args map[string]any
			want string
		}{
			{"a form value failing its schema", map[string]any{"app": "llama-cpp", "computeResource": "1 GPU", "project": "fraud-models",
				"values": map[string]any{"model": "m", "gpu_layers": -1}}, `field "gpu_layers"`},
			{"a compute resource not open to the caller", map[string]any{"app": "ssh", "computeResource": "multi-node training", "project": "vision-detect",
				"values": map[string]any{"authorized_key": "ssh-ed25519 AAAA"}}, "the compute resource 'multi-node training' is not open to group vision"},
		} {
			c := alice
			if strings.Contains(tc.name, "not open") {
				c = vic
			}
			if msg := refused(t, c, "launch_app", tc.args); !strings.Contains(msg, tc.want) {
				t.Fatalf("%s: %q, want %q", tc.name, msg, tc.want)
			}
		}
		for _, tool := range []string{"get_app_instance", "stop_app"} {
			if msg := refused(t, vic, tool, map[string]any{"id": in.ID}); !strings.Contains(msg, "no app instance") {
				t.Fatalf("%s by another group: %q", tool, msg)
			}
		}
		_, err := b.Svc.SetAppQuota(b.Admin, "", 1)
		if err != nil {
			t.Fatal(err)
		}
		msg := refused(t, alice, "launch_app", map[string]any{"app": "jupyterlab", "computeResource": "1 GPU", "project": "fraud-models"})
		if !strings.Contains(msg, "the company's quota of 1 running apps is reached; stop one of yours: "+in.Name) {
			t.Fatalf("company quota: %q", msg)
		}
		_, err = b.Svc.SetAppQuota(b.Admin, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		_, err = b.Svc.SetAppQuota(b.Admin, "ml-research", 1)
		if err != nil {
			t.Fatal(err)
		}
		msg = refused(t, alice, "launch_app", map[string]any{"app": "jupyterlab", "computeResource": "1 GPU", "project": "fraud-models"})
		if !strings.Contains(msg, "group ml-research's quota of 1 running apps is reached") {
			t.Fatalf("group quota: %q", msg)
		}
		_, err = b.Svc.SetAppLocked(b.Admin, "jupyterlab", true)
		if err != nil {
			t.Fatal(err)
		}
		if msg := refused(t, vic, "launch_app", map[string]any{"app": "jupyterlab", "computeResource": "1 GPU", "project": "vision-detect"}); !strings.Contains(msg, "app 'jupyterlab' is locked by an admin") {
			t.Fatalf("lock: %q", msg)
		}
		_, err = b.Svc.SetAppLaunches(b.Admin, false)
		if err != nil {
			t.Fatal(err)
		}
		if msg := refused(t, vic, "launch_app", map[string]any{"app": "code-server", "computeResource": "1 GPU", "project": "vision-detect"}); !strings.Contains(msg, "switched off for the whole company") {
			t.Fatalf("switch: %q", msg)
		}
		stopped := ok[appInstance](t, admin, "stop_app", map[string]any{"id": in.ID})
		if stopped.State != "stopped" {
			t.Fatalf("stop_app: %+v", stopped)
		}
		task, err := b.Svc.Task(b.Admin, in.ID)
		if err != nil || task.Status != model.TaskAborted {
			t.Fatalf("the instance's task: %+v, %v", task, err)
		}
	})
}
