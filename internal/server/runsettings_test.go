package server_test

import (
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/klique-ai/klique/internal/agentapi"
)

// TestComputeResourceRunSettings follows the image, environment and mounts
// IT sets on a compute resource from the GraphQL API to what a worker
// claims: the task's own image and variables win, and only tasks of that
// compute resource get them.
func TestComputeResourceRunSettings(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	f := newFixture(t, ts)
	worker := f.ids["worker gpu-host-7"]
	claim := func(t *testing.T, want string) *agentapi.Assignment {
		t.Helper()
		var out agentapi.ClaimResponse
		code := agentCall(t, ts, f.workerSecret, http.MethodPost, agentapi.PathClaim,
			agentapi.ClaimRequest{WorkerID: worker, FreeGPUs: 1, WaitSeconds: 1}, &out)
		if code != http.StatusOK || out.Task == nil || out.Task.TaskID != want {
			t.Fatalf("claim: %d %+v, want task %s", code, out.Task, want)
		}
		return out.Task
	}
	enqueue := func(t *testing.T, cred, project, name string, extra map[string]any) string {
		t.Helper()
		in := map[string]any{"name": name, "project": project, "computeResource": "1 GPU", "command": []any{"python", "train.py"}}
		for k, v := range extra {
			in[k] = v
		}
		d := ts.mustGQL(t, cred, `mutation($in: EnqueueTaskInput!) { enqueueTask(input: $in) { id } }`, map[string]any{"in": in})
		return str(d, "enqueueTask", "id")
	}
	mounts := []string{"/data/hf-cache:/data/hf-cache", "/datasets:/datasets:ro"}
	const fields = `name image env mounts`

	t.Run("an admin sets the image, variables and mounts of ml-research's 1 GPU", func(t *testing.T) {
		d := ts.mustGQL(t, f.admin, `mutation($id: ID!, $in: ComputeResourceInput!) {
			updateComputeResource(id: $id, input: $in) { computeResource { `+fields+` } changes { text } } }`,
			map[string]any{"id": f.id(t, "cr ml-research/1 GPU"), "in": map[string]any{
				"image":  "pytorch/pytorch:2.3.1-cuda12.1-cudnn8-runtime",
				"env":    map[string]any{"HF_HOME": "/data/hf-cache", "NCCL_DEBUG": "WARN"},
				"mounts": mounts,
			}})
		cr := path(d, "updateComputeResource", "computeResource")
		if str(cr, "image") != "pytorch/pytorch:2.3.1-cuda12.1-cudnn8-runtime" || str(cr, "env", "HF_HOME") != "/data/hf-cache" ||
			fmt.Sprint(path(cr, "mounts")) != fmt.Sprint(mounts) {
			t.Fatalf("compute resource after the update: %v", cr)
		}
		if text := str(d, "updateComputeResource", "changes", 0, "text"); !strings.Contains(text, "(image, env, mounts)") {
			t.Fatalf("change %q", text)
		}
	})

	t.Run("a member of the group sees them; a compute resource without them shows none", func(t *testing.T) {
		d := ts.mustGQL(t, f.alice, `{ computeResources { edges { node { `+fields+` } } } }`, nil)
		seen := 0
		for _, n := range nodes(d, "computeResources") {
			switch n["name"] {
			case "1 GPU":
				seen++
				if str(n, "env", "NCCL_DEBUG") != "WARN" || len(path(n, "mounts").([]any)) != 2 {
					t.Fatalf("alice's view of 1 GPU: %v", n)
				}
			case "half GPU":
				if n["image"] != nil || len(path(n, "env").(map[string]any)) != 0 || len(path(n, "mounts").([]any)) != 0 {
					t.Fatalf("a compute resource without settings: %v, want null, {} and []", n)
				}
			}
		}
		if seen != 1 {
			t.Fatalf("alice sees %d '1 GPU' compute resources: %v", seen, d)
		}
	})

	t.Run("a credential in the environment is refused with a pointer to the vault", func(t *testing.T) {
		res := ts.gql(t, gqlRequest{Credential: f.admin, Query: `mutation($id: ID!) {
			updateComputeResource(id: $id, input: {env: {HF_TOKEN: "hf_abcdefghijklmnopqrstuvwxyz0123456789"}}) { computeResource { id } } }`,
			Vars: map[string]any{"id": f.id(t, "cr ml-research/1 GPU")}})
		if res.code() != "BAD_USER_INPUT" || !strings.Contains(res.message(), "HF_TOKEN looks like a credential") ||
			!strings.Contains(res.message(), "klique secret set HF_TOKEN --group ml-research") || strings.Contains(res.Raw, "hf_abcdefghij") {
			t.Fatalf("answer %s", res.Raw)
		}
	})

	t.Run("a task queued before the change gets the settings the compute resource has when it is claimed", func(t *testing.T) {
		a := claim(t, f.ids["task"])
		wantEnv := map[string]string{"HF_HOME": "/data/hf-cache", "NCCL_DEBUG": "WARN"}
		if a.Image != "pytorch/pytorch:2.3.1-cuda12.1-cudnn8-runtime" || !reflect.DeepEqual(a.Env, wantEnv) || !reflect.DeepEqual(a.Mounts, mounts) ||
			a.Parameters["lr"] != "0.1" {
			t.Fatalf("assignment %+v", a)
		}
	})

	t.Run("the task's own image and variables win over the compute resource's", func(t *testing.T) {
		id := enqueue(t, f.alice, "fraud-models", "own-settings", map[string]any{"image": "python:3.12", "env": map[string]any{"NCCL_DEBUG": "INFO", "SEED": "7"}})
		place(t, ts)
		a := claim(t, id)
		wantEnv := map[string]string{"HF_HOME": "/data/hf-cache", "NCCL_DEBUG": "INFO", "SEED": "7"}
		if a.Image != "python:3.12" || !reflect.DeepEqual(a.Env, wantEnv) || !reflect.DeepEqual(a.Mounts, mounts) {
			t.Fatalf("assignment %+v", a)
		}
		d := ts.mustGQL(t, f.alice, `query($id: ID!) { task(id: $id) { spec { image env } } }`, map[string]any{"id": id})
		if env := path(d, "task", "spec", "env").(map[string]any); len(env) != 2 || env["HF_HOME"] != nil {
			t.Fatalf("the merge reached the task's own spec: %v", d)
		}
	})

	t.Run("another group's compute resource on the same profile gets none of them", func(t *testing.T) {
		id := enqueue(t, f.victor, "vision-detect", "vision-task", nil)
		place(t, ts)
		a := claim(t, id)
		if a.Image != "" || len(a.Env) != 0 || len(a.Mounts) != 0 {
			t.Fatalf("vision's task got ml-research's settings: %+v", a)
		}
	})

	t.Run("empty values clear them", func(t *testing.T) {
		d := ts.mustGQL(t, f.admin, `mutation($id: ID!) {
			updateComputeResource(id: $id, input: {image: "", env: {}, mounts: []}) { computeResource { `+fields+` } } }`,
			map[string]any{"id": f.id(t, "cr ml-research/1 GPU")})
		cr := path(d, "updateComputeResource", "computeResource")
		if path(cr, "image") != nil || len(path(cr, "env").(map[string]any)) != 0 || len(path(cr, "mounts").([]any)) != 0 {
			t.Fatalf("compute resource after clearing: %v", cr)
		}
	})
}
