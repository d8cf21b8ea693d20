package platform_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/klique-ai/klique/engine/loop"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
	"github.com/klique-ai/klique/internal/platform/platformtest"
)

// echoApp is a small session app an admin adds to the catalogue.
func echoApp() model.App {
	return model.App{Name: "echo", Description: "an HTTP server", Kind: model.AppSession,
		Run:  model.AppRun{Process: "python3 -m http.server {port} --directory {dir}"},
		Port: 8000, HealthPath: "/",
		Form: `{"type":"object","properties":{"dir":{"type":"string","default":"/tmp"}}}`}
}

func launch(ctx context.Context, b *testBundle, app, cr string, values map[string]any) (*model.AppInstance, error) {
	return b.Svc.LaunchApp(ctx, platform.LaunchInput{App: app, ComputeResource: cr, Project: "fraud-models", Values: values})
}

func TestAppCatalogue(t *testing.T) {
	forEachStore(t, func(t *testing.T, b *testBundle) {
		b.ApplyExample(t)
		ps := b.people(t)
		all, err := b.Svc.Apps(ps.rita)
		platformtest.Must(t, err)
		var names []string
		for _, a := range all {
			names = append(names, a.Name)
		}
		for _, want := range []string{"vllm", "sglang", "nim", "llama-cpp", "jupyterlab", "code-server", "claude-code", "ssh"} {
			if !slices.Contains(names, want) {
				t.Fatalf("the catalogue %v lacks the built-in %s", names, want)
			}
		}

		_, err = b.Svc.PutApp(ps.rita, echoApp())
		platformtest.WantError(t, err, platform.CodeForbidden, "only a tenant admin")
		bad := echoApp()
		bad.Run.Process = "serve {port} {nope}"
		before := b.snapshot(t)
		_, err = b.Svc.PutApp(b.Admin, bad)
		platformtest.WantError(t, err, platform.CodeInvalid, "refers to {nope}", "add it to the form")
		bad = echoApp()
		bad.Form = `{"type":"object","properties":{"dir":{"type":12}}}`
		_, err = b.Svc.PutApp(b.Admin, bad)
		platformtest.WantError(t, err, platform.CodeInvalid, "not a valid JSON Schema")
		b.unchanged(t, before)

		res, err := b.Svc.PutApp(b.Admin, echoApp())
		platformtest.Must(t, err)
		if len(res.Changes) != 1 || res.Changes[0].Kind != "app" || res.Changes[0].Action != "create" {
			t.Fatalf("put app made changes %+v", res.Changes)
		}
		a, err := b.Svc.App(ps.rita, "echo")
		platformtest.Must(t, err)
		if a.Run.Process != echoApp().Run.Process || a.BuiltIn {
			t.Fatalf("echo read back as %+v", a)
		}

		// A lock on a built-in is an override of it, which a delete reverts.
		_, err = b.Svc.SetAppLocked(b.Admin, "vllm", true)
		platformtest.Must(t, err)
		v, err := b.Svc.App(ps.rita, "vllm")
		platformtest.Must(t, err)
		if !v.Locked || !v.BuiltIn {
			t.Fatalf("locked vllm reads %+v", v)
		}
		_, err = b.Svc.DeleteApp(b.Admin, "sglang")
		platformtest.WantError(t, err, platform.CodeInvalid, "is built in and cannot be deleted; lock it instead")

		// The estate's apps: section round-trips.
		doc, err := b.Svc.ExportEstate(b.Admin)
		platformtest.Must(t, err)
		if !strings.Contains(string(doc), "apps:") || !strings.Contains(string(doc), "name: echo") {
			t.Fatalf("the export has no apps section:\n%s", doc)
		}
		again, err := b.Svc.ApplyEstate(b.Admin, doc, false)
		platformtest.Must(t, err)
		if len(again.Changes) != 0 {
			t.Fatalf("applying the export made changes: %v", again.Changes)
		}

		_, err = b.Svc.DeleteApp(b.Admin, "vllm")
		platformtest.Must(t, err)
		v, err = b.Svc.App(ps.rita, "vllm")
		platformtest.Must(t, err)
		if v.Locked {
			t.Fatal("deleting the override left vllm locked")
		}
		_, err = b.Svc.DeleteApp(b.Admin, "echo")
		platformtest.Must(t, err)
		_, err = b.Svc.App(ps.rita, "echo")
		platformtest.WantError(t, err, platform.CodeNotFound, "no app 'echo'")
	})
}

func TestLaunchApp(t *testing.T) {
	forEachStore(t, func(t *testing.T, b *testBundle) {
		b.ApplyExample(t)
		ps := b.people(t)
		_, err := b.Svc.SetSecret(b.Admin, "tenant", "", "HF_TOKEN", "hf_secret_value")
		platformtest.Must(t, err)

		in, err := b.Svc.LaunchApp(ps.rita, platform.LaunchInput{App: "vllm", ComputeResource: "8 GPUs", Project: "fraud-models",
			Values: map[string]any{"model": "meta-llama/Llama-3.1-8B-Instruct", "hf_token_secret": "HF_TOKEN", "context_length": 4096}})
		platformtest.Must(t, err)
		task := in.Task
		cmd := strings.Join(task.Spec.Command, " ")
		if task.Spec.Kind != model.TaskKindApplication || task.Spec.App == nil || task.Spec.App.App != "vllm" ||
			cmd != "vllm serve meta-llama/Llama-3.1-8B-Instruct --host 0.0.0.0 --port {port} --tensor-parallel-size 8 --max-model-len 4096 --cpu-offload-gb 0" {
			t.Fatalf("instance task %+v, command %q", task, cmd)
		}
		if !slices.Equal(task.Spec.Secrets, []string{"HF_TOKEN"}) || !strings.Contains(task.Spec.App.Run.Pod, `--tensor-parallel-size, "8"`) {
			t.Fatalf("spec %+v", task.Spec)
		}
		raw, _ := json.Marshal(task.Spec)
		if strings.Contains(string(raw), "hf_secret_value") {
			t.Fatal("the Hugging Face token's value is in the spec")
		}
		if in.State != "waiting" || in.URL != "/apps/"+task.ID+"/" || task.ComputeResourceID != b.computeResource(t, "ml-research", "8 GPUs").ID ||
			!strings.HasPrefix(task.Name, "vllm-rita-") {
			t.Fatalf("instance %+v", in)
		}
		if last := b.AuditLog(t)[0]; last.Action != "task.enqueued" || last.ObjectID != task.ID {
			t.Fatalf("audit %+v", last)
		}

		// The engine places it like any task, and it holds its 8 GPUs.
		eng := &loop.Loop{State: platform.EngineState{Store: b.Store}, Planner: b.Svc, Holder: "test"}
		_, err = eng.PassAll(context.Background())
		platformtest.Must(t, err)
		in, err = b.Svc.AppInstance(ps.rita, task.ID)
		platformtest.Must(t, err)
		if in.State != "placed" || in.Task.PoolID == "" || in.Task.Size.Total() != 8000 {
			t.Fatalf("after a pass the instance is %+v", in.Task)
		}

		t.Log("a form value failing its schema names the field")
		_, err = launch(ps.rita, b, "vllm", "1 GPU", map[string]any{"model": "m", "context_length": 10})
		platformtest.WantError(t, err, platform.CodeInvalid, `field "context_length"`, "minimum", "change the value")
		_, err = launch(ps.rita, b, "vllm", "1 GPU", map[string]any{})
		platformtest.WantError(t, err, platform.CodeInvalid, "model")

		t.Log("a compute resource not open to the caller is refused as tasks are")
		_, err = b.Svc.LaunchApp(ps.vic, platform.LaunchInput{App: "jupyterlab", ComputeResource: "1 A100", Project: "vision-detect"})
		platformtest.WantError(t, err, platform.CodeForbidden, "1 A100")

		t.Log("visibility: another group's member and another tenant do not see or stop it")
		for _, who := range []context.Context{ps.vic, ps.lead} {
			_, err = b.Svc.AppInstance(who, task.ID)
			platformtest.WantError(t, err, platform.CodeNotFound, "no app instance")
			list, err := b.Svc.AppInstances(who, platform.AppInstanceFilter{})
			platformtest.Must(t, err)
			if len(list) != 0 {
				t.Fatalf("a caller it is not shared with lists %d instances", len(list))
			}
		}
		_, err = b.Svc.StopApp(ps.vic, task.ID)
		platformtest.WantError(t, err, platform.CodeNotFound, "no app instance")
		nt, err := b.Svc.CreateTenant(b.Admin, "acme", "Acme", "root")
		platformtest.Must(t, err)
		acme := b.SignIn(t, nt.Secret)
		_, err = b.Svc.StopApp(acme, task.ID)
		platformtest.WantError(t, err, platform.CodeNotFound, "no app instance")

		shared, err := b.Svc.LaunchApp(ps.rita, platform.LaunchInput{App: "jupyterlab", ComputeResource: "1 GPU", Project: "fraud-models", ShareWithGroup: true, Name: "notebook"})
		platformtest.Must(t, err)
		if _, err := b.Svc.AppInstance(ps.both, shared.Task.ID); err != nil {
			t.Fatalf("a member of the group does not see an instance shared with it: %v", err)
		}
		_, err = b.Svc.AppInstance(ps.vic, shared.Task.ID)
		platformtest.WantError(t, err, platform.CodeNotFound, "no app instance")

		t.Log("governance: quotas, the app lock and the launches switch")
		_, err = b.Svc.SetAppQuota(b.Admin, "", 2)
		platformtest.Must(t, err)
		_, err = launch(ps.rita, b, "jupyterlab", "1 GPU", nil)
		platformtest.WantError(t, err, platform.CodeConflict, "the company's quota of 2 running apps is reached; stop one of yours: "+task.Name+", notebook")
		_, err = b.Svc.LaunchApp(ps.vic, platform.LaunchInput{App: "jupyterlab", ComputeResource: "1 GPU", Project: "vision-detect"})
		platformtest.WantError(t, err, platform.CodeConflict, "the company's quota of 2 running apps is reached; none of them is yours")
		_, err = b.Svc.SetAppQuota(b.Admin, "", 0)
		platformtest.Must(t, err)
		_, err = b.Svc.SetAppQuota(b.Admin, "ml-research", 2)
		platformtest.Must(t, err)
		_, err = launch(ps.rita, b, "jupyterlab", "1 GPU", nil)
		platformtest.WantError(t, err, platform.CodeConflict, "group ml-research's quota of 2 running apps is reached; stop one of yours")
		if _, err := b.Svc.LaunchApp(ps.vic, platform.LaunchInput{App: "jupyterlab", ComputeResource: "1 GPU", Project: "vision-detect"}); err != nil {
			t.Fatalf("another group's quota refused vision's launch: %v", err)
		}
		_, err = b.Svc.SetAppLocked(b.Admin, "code-server", true)
		platformtest.Must(t, err)
		_, err = b.Svc.LaunchApp(ps.vic, platform.LaunchInput{App: "code-server", ComputeResource: "1 GPU", Project: "vision-detect"})
		platformtest.WantError(t, err, platform.CodeForbidden, "app 'code-server' is locked by an admin", "ask an admin to unlock it")
		_, err = b.Svc.SetAppLaunches(b.Admin, false)
		platformtest.Must(t, err)
		_, err = b.Svc.LaunchApp(ps.vic, platform.LaunchInput{App: "jupyterlab", ComputeResource: "1 GPU", Project: "vision-detect"})
		platformtest.WantError(t, err, platform.CodeForbidden, "app launches are switched off for the whole company", "ask an admin to switch them on")

		t.Log("stopping releases it, with who stopped it")
		out, err := b.Svc.StopApp(ps.rita, task.ID)
		platformtest.Must(t, err)
		if out.State != "stopped" || out.Task.Reason != "stopped by rita" {
			t.Fatalf("stopped instance %+v", out.Task)
		}
		_, err = b.Svc.StopApp(ps.rita, task.ID)
		platformtest.WantError(t, err, platform.CodeConflict, "has already stopped")
	})
}

// The estate file's apps: section: an entry written as YAML, launch rules,
// and the refusals of a section that does not hold together.
func TestAppsSectionOfTheEstateFile(t *testing.T) {
	forEachStore(t, func(t *testing.T, b *testBundle) {
		b.ApplyExample(t)
		doc := []byte(`apiVersion: klique/v1
kind: Estate
apps:
  launches: disabled
  running: 20
  groups:
    - {group: vision, running: 3}
  catalogue:
    - name: echo
      kind: session
      port: 8000
      run: {process: "python3 -m http.server {port} --directory {dir}"}
      form:
        type: object
        properties:
          dir: {type: string, default: /tmp}
    - name: vllm
      kind: serving
      port: 8000
      locked: true
      run: {process: "vllm serve {model} --tensor-parallel-size {gpus}"}
      form: {type: object, required: [model], properties: {model: {type: string}}}
`)
		res := b.Apply(t, doc)
		if len(res.Changes) != 3 {
			t.Fatalf("apply made %v", res.Changes)
		}
		st, err := b.Svc.AppSettings(b.Admin)
		platformtest.Must(t, err)
		if !st.LaunchesDisabled || st.Running != 20 || len(st.Groups) != 1 || st.Groups[0].Group != "vision" || st.Groups[0].Running != 3 {
			t.Fatalf("settings %+v", st)
		}
		v, err := b.Svc.App(b.Admin, "vllm")
		platformtest.Must(t, err)
		if !v.Locked || !v.BuiltIn || v.Run.Process != "vllm serve {model} --tensor-parallel-size {gpus}" || v.Form != `{"properties":{"model":{"type":"string"}},"required":["model"],"type":"object"}` {
			t.Fatalf("vllm override %+v", v)
		}
		if again := b.Apply(t, doc); len(again.Changes) != 0 {
			t.Fatalf("applying the same file again made %v", again.Changes)
		}
		before := b.snapshot(t)
		for bad, want := range map[string]string{
			"apps:\n  groups: [{group: nowhere, running: 2}]\n":                                          `there is no group "nowhere"`,
			"apps:\n  launches: maybe\n":                                                                 `launches "maybe": write enabled or disabled`,
			"apps:\n  catalogue:\n    - {name: x, kind: session, port: 80, run: {process: \"a {b}\"}}\n": "refers to {b}",
			"apps:\n  catalogue:\n    - {name: x, kind: daemon, port: 0, run: {}}\n":                     `kind "daemon": use serving or session`,
		} {
			_, err := b.Svc.ApplyEstate(b.Admin, []byte("apiVersion: klique/v1\nkind: Estate\n"+bad), false)
			platformtest.WantError(t, err, platform.CodeInvalid, want)
		}
		b.unchanged(t, before)
	})
}
