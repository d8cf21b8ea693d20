package kube

import (
	"bytes"
	"context"
	"maps"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/klique-ai/klique/agents/runner"
	"github.com/klique-ai/klique/internal/agentapi"
	"github.com/klique-ai/klique/internal/estate/appconf"
	"github.com/klique-ai/klique/internal/eventually"
)

// appJob is a launch of the built-in catalogue entry name on gpus GPUs
// (its size in thousandths: milli) as the kubernetes worker is handed it:
// the form's defaults under values, the templates rendered with the
// values every launch has (as the control plane renders them), the
// assignment's app part, and {port} filled with the app's own port (as
// the worker fills it in pod mode).
func (b *testBundle) appJob(t *testing.T, name string, milli int64, values map[string]any) *runner.Job {
	t.Helper()
	app := appconf.BuiltIn(name)
	if app == nil {
		t.Fatalf("no built-in app %s", name)
	}
	form, err := appconf.CompileForm(app.Form)
	if err != nil {
		t.Fatal(err)
	}
	checked, problems := form.Check(values)
	if len(problems) > 0 {
		t.Fatalf("launch values: %v", problems)
	}
	vals := map[string]string{}
	for k, v := range checked {
		vals[k] = appconf.String(v)
	}
	gpus := max(int(milli/1000), 1)
	vals["gpus"], vals["port"], vals["instance"], vals["app"] = strconv.Itoa(gpus), strconv.Itoa(app.Port), "tsk_01HXAPP", app.Name
	run := appconf.RenderRun(app, vals)
	port := strconv.Itoa(app.Port)
	env := map[string]string{"KLIQUE_TASK_ID": "tsk_01HXAPP", "KLIQUE_POOL": "k8s-a100", "KLIQUE_APP": app.Name,
		"KLIQUE_APP_INSTANCE": "tsk_01HXAPP", "KLIQUE_APP_PORT": port, "HF_TOKEN": "hf_secret_value"}
	return &runner.Job{
		Task: &agentapi.Assignment{TaskID: "tsk_01HXAPP", Attempt: 1, Name: app.Name + "-alice-1", MilliGPUsPerNode: milli, Nodes: 1,
			Command: strings.Fields(strings.ReplaceAll(run.Process, "{port}", port)), Image: run.Image, Project: "fraud-models",
			Env: maps.Clone(env), Secrets: []string{"HF_TOKEN"},
			App: &agentapi.AppAssignment{Port: app.Port, HealthPath: appconf.Render(app.HealthPath, vals), Args: run.Args, Pod: run.Pod, Batch: run.Batch}},
		Env: env, Dir: "/var/lib/klique/tasks/x", Log: b.log.sink,
	}
}

// TestAppPodsMatchTheGoldenFiles renders the built-in vLLM entry's pod on
// 8 whole GPUs (tensor parallelism 8), on a MIG slice and on a fraction:
// the worker's template with the app's pod fragment merged into its task
// container (the vLLM image and args), the GPUs as the kube runner asks
// for them for any task, the app's port declared and a readiness probe on
// /health.
func TestAppPodsMatchTheGoldenFiles(t *testing.T) {
	cases := []struct {
		name  string
		tune  func(*Options)
		milli int64
		tp    string
	}{
		{name: "vllm-tp8", milli: 8000, tp: "8"},
		{name: "vllm-mig", tune: func(o *Options) { o.GPUResource = "nvidia.com/mig-3g.40gb" }, milli: 1000, tp: "1"},
		{name: "vllm-fraction", tune: func(o *Options) { o.FractionResource = "nvidia.com/gpumem"; o.GPUMemoryMB = 81920 }, milli: 500, tp: "1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := setup(t, c.tune)
			j := b.appJob(t, "vllm", c.milli, map[string]any{"model": "meta-llama/Llama-3.1-70B-Instruct", "context_length": 32768})
			out, err := b.r.Render(j)
			if err != nil {
				t.Fatal(err)
			}
			spec, err := yaml.Marshal(out.Pod)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, c.name+".golden.yaml", spec)

			ct := out.Pod.Spec.Containers[0]
			args := strings.Join(ct.Args, " ")
			if ct.Image != "vllm/vllm-openai:latest" || !strings.Contains(args, "--tensor-parallel-size "+c.tp) ||
				!strings.Contains(args, "--model meta-llama/Llama-3.1-70B-Instruct") || !strings.Contains(args, "--max-model-len 32768") {
				t.Errorf("the task container runs %s %q, want vLLM with tensor parallelism %s", ct.Image, ct.Args, c.tp)
			}
			if len(ct.Command) != 0 {
				t.Errorf("the container's command is set (%q): the image's entrypoint serves", ct.Command)
			}
			if p := ct.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/health" || p.HTTPGet.Port.IntValue() != 8000 {
				t.Errorf("readiness probe %+v, want GET /health on 8000", p)
			}
			if ct.Name != "trainer" || len(out.Pod.Spec.Containers) != 1 {
				t.Errorf("the fragment's container was not merged into the template's: %d containers, first %q", len(out.Pod.Spec.Containers), ct.Name)
			}
			if bytes.Contains(spec, []byte("hf_secret_value")) {
				t.Error("a secret's value is written in the pod spec")
			}
		})
	}
}

// TestAppPodFragmentMergesAndRefuses: a fragment's own settings (a node
// selector, a sidecar, its own readiness probe) merge in; it cannot take
// the worker's GPUs away; a misspelt field is refused with its name.
func TestAppPodFragmentMergesAndRefuses(t *testing.T) {
	b := setup(t, nil)
	j := b.appJob(t, "vllm", 2000, map[string]any{"model": "m"})
	j.Task.App.Pod = `nodeSelector: {gpu-tier: premium}
containers:
- name: app
  image: registry.example/vllm:0.9
  args: [--model, m]
  readinessProbe: {httpGet: {path: /v1/models, port: 8000}}
  resources: {limits: {nvidia.com/gpu: 1}}
- name: metrics
  image: registry.example/exporter:1
`
	out, err := b.r.Render(j)
	if err != nil {
		t.Fatal(err)
	}
	s := out.Pod.Spec
	if s.NodeSelector["gpu-tier"] != "premium" || s.NodeSelector["nvidia.com/gpu.product"] == "" {
		t.Errorf("node selector %v, want the template's and the fragment's", s.NodeSelector)
	}
	if len(s.Containers) != 2 || s.Containers[1].Name != "metrics" || s.Containers[0].Image != "registry.example/vllm:0.9" {
		t.Errorf("containers %+v, want the task container from the fragment and its sidecar", s.Containers)
	}
	if q := s.Containers[0].Resources.Limits["nvidia.com/gpu"]; q.Value() != 2 {
		t.Errorf("the fragment changed the task's GPUs to %s", q.String())
	}
	if p := s.Containers[0].ReadinessProbe; p == nil || p.HTTPGet.Path != "/v1/models" {
		t.Errorf("the fragment's own readiness probe was replaced: %+v", p)
	}
	if v := s.Containers[0].VolumeMounts; len(v) == 0 || v[0].Name != "shared" {
		t.Errorf("the template's volume mounts were lost: %+v", v)
	}
	j.Task.App.Pod = "containerz: []\n"
	if _, err := b.r.Render(j); err == nil || !strings.Contains(err.Error(), "containerz") || !strings.Contains(err.Error(), "pod template fragment") {
		t.Errorf("a misspelt fragment: %v, want a refusal naming the field", err)
	}
}

// TestAppReadinessFromThePodStatus: on the fake cluster, an app instance's
// pod is not ready while it is pending or running without its Ready
// condition (the readiness probe has not answered yet), is ready at the
// pod's IP and the app's port once Ready, and not ready again when the
// condition turns false.
func TestAppReadinessFromThePodStatus(t *testing.T) {
	b := setup(t, nil)
	j := b.appJob(t, "vllm", 1000, map[string]any{"model": "m"})
	h, err := b.r.Submit(context.Background(), j)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = h.Stop(context.Background(), 0) }()
	ready := h.(runner.AppReadiness)
	name := ObjectName(j.Task.TaskID, j.Task.Attempt)
	if addr, ok := ready.AppReady(context.Background()); ok {
		t.Fatalf("ready (%s) while pending", addr)
	}
	setCond := func(running bool, cond corev1.ConditionStatus) {
		b.setStatus(t, name, func(p *corev1.Pod) {
			if running {
				p.Status.Phase, p.Status.PodIP = corev1.PodRunning, "10.42.0.17"
			}
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: cond}}
		})
	}
	setCond(true, corev1.ConditionFalse)
	waitPhase(t, h, runner.Running)
	if addr, ok := ready.AppReady(context.Background()); ok {
		t.Fatalf("ready (%s) before its Ready condition", addr)
	}
	setCond(true, corev1.ConditionTrue)
	eventually.True(t, "the pod to be ready", func() bool {
		addr, ok := ready.AppReady(context.Background())
		return ok && addr == "10.42.0.17:8000"
	})
	setCond(true, corev1.ConditionFalse)
	eventually.True(t, "the pod to be not ready again", func() bool {
		_, ok := ready.AppReady(context.Background())
		return !ok
	})
}
