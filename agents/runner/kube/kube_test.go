package kube

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/yaml"

	"github.com/klique-ai/klique/agents/runner"
	"github.com/klique-ai/klique/internal/agentapi"
	"github.com/klique-ai/klique/internal/eventually"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

const ns = "klique-tasks"

// testBundle is a runner on a fake cluster and the lines it logged.
type testBundle struct {
	cs  *fake.Clientset
	r   *Runner
	log *lineLog
}

type lineLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *lineLog) sink(stream, line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, stream+": "+line)
}

func (l *lineLog) has(sub string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.lines {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

func (l *lineLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

func loadTestTemplate(t *testing.T) *corev1.PodTemplateSpec {
	t.Helper()
	tmpl, err := LoadTemplate(filepath.Join("testdata", "template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return tmpl
}

func setup(t *testing.T, tune func(*Options)) *testBundle {
	t.Helper()
	cs := fake.NewClientset()
	opts := Options{Client: cs, Namespace: ns, Instance: "kube-worker-1", Template: loadTestTemplate(t),
		Resync: 50 * time.Millisecond, PendingTimeout: time.Minute}
	if tune != nil {
		tune(&opts)
	}
	r, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return &testBundle{cs: cs, r: r, log: &lineLog{}}
}

// job is a claimed task as the worker hands it over: the worker's
// variables (host paths among them) and a secret's value.
func (b *testBundle) job(id string, milli int64, nodes int) *runner.Job {
	return &runner.Job{
		Task: &agentapi.Assignment{TaskID: id, Attempt: 1, Name: "train resnet", MilliGPUsPerNode: milli, Nodes: nodes,
			Command: []string{"python", "train.py", "--epochs", "3"}, Image: "ghcr.io/example/train:2", WorkingDir: "src",
			Mounts: []string{"/mnt/datasets:/datasets:ro"}, Project: "fraud-models"},
		Env: map[string]string{"KLIQUE_TASK_ID": id, "KLIQUE_POOL": "k8s-a100", "HF_TOKEN": "hf_secret_value",
			"KLIQUE_PARAMS_FILE": "/var/lib/klique/tasks/x/params.json", "KLIQUE_METRICS_URL": "http://127.0.0.1:4000/m"},
		Dir: "/var/lib/klique/tasks/x",
		Log: b.log.sink,
	}
}

// golden compares got with testdata/name, or rewrites it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	file := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(file, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run go test -run TestRender -update to write it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the rendered spec (rerun with -update if the change is meant):\n%s", file, got)
	}
}

func TestRenderedSpecsMatchTheGoldenFiles(t *testing.T) {
	cases := []struct {
		name  string
		tune  func(*Options)
		milli int64
		nodes int
	}{
		{name: "whole", milli: 2000, nodes: 1},
		{name: "mig", tune: func(o *Options) { o.GPUResource = "nvidia.com/mig-1g.10gb" }, milli: 1000, nodes: 1},
		{name: "fraction", tune: func(o *Options) { o.FractionResource = "nvidia.com/gpumem"; o.GPUMemoryMB = 81920 }, milli: 250, nodes: 1},
		{name: "multinode", milli: 4000, nodes: 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := setup(t, c.tune)
			out, err := b.r.Render(b.job("tsk_01HX", c.milli, c.nodes))
			if err != nil {
				t.Fatal(err)
			}
			var obj any = out.Pod
			if out.Job != nil {
				obj = out.Job
			}
			spec, err := yaml.Marshal(obj)
			if err != nil {
				t.Fatal(err)
			}
			// The Secret by its keys: the values are the task's own.
			keys := sortedKeys(out.Secret.Data)
			secret, _ := yaml.Marshal(map[string]any{"secret": out.Secret.Name, "labels": out.Secret.Labels, "keys": keys})
			golden(t, c.name+".golden.yaml", append(append(spec, "---\n"...), secret...))

			if bytes.Contains(spec, []byte("hf_secret_value")) {
				t.Error("a secret's value is written in the pod spec")
			}
			if string(out.Secret.Data["HF_TOKEN"]) != "hf_secret_value" {
				t.Error("the task's Secret lacks its secret")
			}
			if _, ok := out.Secret.Data["KLIQUE_PARAMS_FILE"]; ok {
				t.Error("a path on the worker's host is given to the pod")
			}
		})
	}
}

func TestRenderRefusesWhatAPodCannotRun(t *testing.T) {
	b := setup(t, nil)
	j := b.job("t1", 500, 1)
	if _, err := b.r.Render(j); err == nil || !strings.Contains(err.Error(), "--fraction-resource") {
		t.Errorf("a fraction without a fraction resource: err %v, want one naming --fraction-resource", err)
	}
	j = b.job("t1", 1000, 1)
	j.Task.Repository = "https://git.example/repo.git"
	if _, err := b.r.Render(j); err == nil || !strings.Contains(err.Error(), "images only") {
		t.Errorf("a task from a repository: err %v", err)
	}
	j = b.job("t1", 1000, 1)
	j.Task.Mounts = []string{"relative:/x"}
	if _, err := b.r.Render(j); err == nil || !strings.Contains(err.Error(), "absolute") {
		t.Errorf("a bad mount: err %v", err)
	}
	if _, err := ParseTemplate([]byte("spec:\n  containerz: []\n")); err == nil || !strings.Contains(err.Error(), "containerz") {
		t.Errorf("a misspelt template field: err %v, want one naming it", err)
	}
	if _, err := ParseTemplate([]byte("kind: Deployment\n")); err == nil || !strings.Contains(err.Error(), "Deployment") {
		t.Errorf("a Deployment as template: err %v", err)
	}
}

func TestATemplateWhoseGPULimitDiffersFromAProfileIsRefused(t *testing.T) {
	tmpl, err := ParseTemplate([]byte(`kind: Pod
spec:
  containers:
    - name: task
      image: busybox
      resources:
        limits: {nvidia.com/gpu: 2}
`))
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(Options{Client: fake.NewClientset(), Namespace: ns, Template: tmpl})
	if err != nil {
		t.Fatal(err)
	}
	err = r.CheckProfiles([]agentapi.ProfileSize{{Name: "two-gpus", MilliGPUsPerNode: 2000, Nodes: 1}, {Name: "one-gpu", MilliGPUsPerNode: 1000, Nodes: 1}})
	if err == nil {
		t.Fatal("a template asking 2 GPUs accepted for a profile of 1 GPU")
	}
	for _, want := range []string{`"one-gpu"`, "nvidia.com/gpu: 2", "1 GPU per node"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not say %q", err, want)
		}
	}
	if err := r.CheckProfiles([]agentapi.ProfileSize{{Name: "two-gpus", MilliGPUsPerNode: 2000, Nodes: 1}}); err != nil {
		t.Errorf("a template agreeing with its profile refused: %v", err)
	}
	// A template without a GPU limit takes every size.
	b := setup(t, nil)
	if err := b.r.CheckProfiles([]agentapi.ProfileSize{{Name: "one", MilliGPUsPerNode: 1000}, {Name: "eight", MilliGPUsPerNode: 8000}}); err != nil {
		t.Errorf("no GPU limit in the template: %v", err)
	}
}

// setStatus changes a pod's status as the kubelet would.
func (b *testBundle) setStatus(t *testing.T, name string, fn func(*corev1.Pod)) {
	t.Helper()
	ctx := context.Background()
	p, err := b.cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fn(p)
	if _, err := b.cs.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func waitPhase(t *testing.T, h runner.Handle, want runner.Phase) runner.Status {
	t.Helper()
	var st runner.Status
	eventually.True(t, "phase "+want.String(), func() bool {
		st, _ = h.Poll(context.Background())
		return st.Phase == want
	})
	return st
}

func unschedulable(p *corev1.Pod) {
	p.Status.Phase = corev1.PodPending
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable",
		Message: "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."}}
}

func running(p *corev1.Pod) {
	p.Spec.NodeName = "gpu-node-7"
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "trainer", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
}

func exited(code int32, reason string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodSucceeded
		if code != 0 {
			p.Status.Phase = corev1.PodFailed
		}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "trainer", State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason}}}}
	}
}

func (b *testBundle) gone(kind, name string) bool {
	var err error
	switch kind {
	case "pod":
		_, err = b.cs.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	case "job":
		_, err = b.cs.BatchV1().Jobs(ns).Get(context.Background(), name, metav1.GetOptions{})
	case "secret":
		_, err = b.cs.CoreV1().Secrets(ns).Get(context.Background(), name, metav1.GetOptions{})
	}
	return apierrors.IsNotFound(err)
}

func TestAPodPendingUnschedulableThenRunningThenSucceeded(t *testing.T) {
	b := setup(t, nil)
	h, err := b.r.Submit(context.Background(), b.job("t-ok", 1000, 1))
	if err != nil {
		t.Fatal(err)
	}
	name := ObjectName("t-ok", 1)
	if b.gone("pod", name) || b.gone("secret", name) {
		t.Fatal("Submit did not create the pod and its Secret")
	}
	b.setStatus(t, name, unschedulable)
	st := waitPhase(t, h, runner.Pending)
	eventually.True(t, "the scheduler's reason", func() bool {
		st, _ = h.Poll(context.Background())
		return strings.Contains(st.Reason, "Unschedulable: 0/3 nodes are available")
	})
	eventually.True(t, "the pending line in the task's log", func() bool { return b.log.has("pending: Unschedulable: 0/3 nodes") })

	b.setStatus(t, name, running)
	waitPhase(t, h, runner.Running)
	eventually.True(t, "the node in the log", func() bool { return b.log.has("running on gpu-node-7") })

	b.setStatus(t, name, exited(0, "Completed"))
	select {
	case <-h.(runner.Notifier).Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the handle did not end")
	}
	st, _ = h.Poll(context.Background())
	if st.Phase != runner.Ended || st.ExitCode != 0 {
		t.Fatalf("status %+v, want ended with 0", st)
	}
	if !b.gone("pod", name) || !b.gone("secret", name) {
		t.Error("the pod or its Secret is left after the end")
	}
	if !b.log.has("stdout: fake logs") {
		t.Errorf("the pod's output is not in the task's log:\n%s", b.log)
	}
}

func TestAnOOMKilledPodKeepsItsDiagnosticsAndEvents(t *testing.T) {
	b := setup(t, nil)
	h, err := b.r.Submit(context.Background(), b.job("t-oom", 1000, 1))
	if err != nil {
		t.Fatal(err)
	}
	name := ObjectName("t-oom", 1)
	_, err = b.cs.CoreV1().Events(ns).Create(context.Background(), &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: name + ".oom", Namespace: ns},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: name, Namespace: ns},
		Reason:         "OOMKilling", Message: "Memory cgroup out of memory: Killed process 4242 (python)",
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b.setStatus(t, name, running)
	waitPhase(t, h, runner.Running)
	b.setStatus(t, name, exited(137, "OOMKilled"))
	st := waitPhase(t, h, runner.Ended)
	d := h.Diagnostics(context.Background())
	if st.ExitCode != 137 || d.ExitCode != 137 || !d.OOMKilled || d.Signal != "killed" {
		t.Fatalf("status %+v diagnostics %+v, want exit 137, OOMKilled", st, d)
	}
	if !strings.Contains(d.Message, "OOMKilled") {
		t.Errorf("message %q does not say OOMKilled", d.Message)
	}
	if len(d.LastLines) == 0 || d.LastLines[len(d.LastLines)-1] != "fake logs" {
		t.Errorf("last lines %q, want the pod's output", d.LastLines)
	}
	if !b.log.has("event: OOMKilling: Memory cgroup out of memory") {
		t.Errorf("the pod's events are not in the task's log:\n%s", b.log)
	}
	if !b.gone("pod", name) {
		t.Error("the pod is left after its diagnostics were kept")
	}
}

func TestAFailedPodEndsWithItsExitCodeAndLastEvent(t *testing.T) {
	b := setup(t, nil)
	h, err := b.r.Submit(context.Background(), b.job("t-fail", 1000, 1))
	if err != nil {
		t.Fatal(err)
	}
	name := ObjectName("t-fail", 1)
	_, _ = b.cs.CoreV1().Events(ns).Create(context.Background(), &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: name + ".b", Namespace: ns},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: name, Namespace: ns},
		Reason:         "Pulled", Message: "Container image already present on machine",
	}, metav1.CreateOptions{})
	b.setStatus(t, name, exited(3, "Error"))
	st := waitPhase(t, h, runner.Ended)
	if st.ExitCode != 3 {
		t.Fatalf("exit code %d, want 3", st.ExitCode)
	}
	if d := h.Diagnostics(context.Background()); !strings.Contains(d.Message, "Pulled: Container image already present") {
		t.Errorf("message %q lacks the last event", d.Message)
	}
}

func TestAPodPendingPastTheTimeoutIsEndedWithItsReason(t *testing.T) {
	b := setup(t, func(o *Options) { o.PendingTimeout = 300 * time.Millisecond })
	h, err := b.r.Submit(context.Background(), b.job("t-stuck", 1000, 1))
	if err != nil {
		t.Fatal(err)
	}
	name := ObjectName("t-stuck", 1)
	b.setStatus(t, name, unschedulable)
	st := waitPhase(t, h, runner.Ended)
	if st.ExitCode != -1 || !strings.Contains(st.Reason, "the pod did not start within 300ms") || !strings.Contains(st.Reason, "Unschedulable") {
		t.Fatalf("status %+v, want ended -1 naming the timeout and the scheduler's reason", st)
	}
	if !b.gone("pod", name) || !b.gone("secret", name) {
		t.Error("the stuck pod is left")
	}
}

func TestStopDeletesThePod(t *testing.T) {
	b := setup(t, nil)
	h, err := b.r.Submit(context.Background(), b.job("t-abort", 1000, 1))
	if err != nil {
		t.Fatal(err)
	}
	name := ObjectName("t-abort", 1)
	b.setStatus(t, name, running)
	waitPhase(t, h, runner.Running)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.Stop(ctx, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if !b.gone("pod", name) || !b.gone("secret", name) {
		t.Error("Stop left the pod or its Secret")
	}
	var grace *int64
	for _, a := range b.cs.Actions() {
		if d, ok := a.(interface{ GetDeleteOptions() metav1.DeleteOptions }); ok && a.GetResource().Resource == "pods" {
			grace = d.GetDeleteOptions().GracePeriodSeconds
			break
		}
	}
	if grace == nil || *grace != 5 {
		t.Errorf("the pod was deleted with grace %v, want the 5 s grace period", grace)
	}
	if st, _ := h.Poll(context.Background()); st.Phase != runner.Ended {
		t.Errorf("after Stop: %+v", st)
	}
}

func TestAMultiNodeTaskRunsAsAnIndexedJobAndEndsWhenAllPodsSucceed(t *testing.T) {
	b := setup(t, nil)
	h, err := b.r.Submit(context.Background(), b.job("t-multi", 4000, 2))
	if err != nil {
		t.Fatal(err)
	}
	name := ObjectName("t-multi", 1)
	j, err := b.cs.BatchV1().Jobs(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The Job controller's part: one pod per index.
	var pods []string
	for i := range 2 {
		p := &corev1.Pod{ObjectMeta: *j.Spec.Template.ObjectMeta.DeepCopy(), Spec: *j.Spec.Template.Spec.DeepCopy()}
		p.Name, p.Namespace = name+"-"+string(rune('0'+i))+"-abcde", ns
		p.Annotations["batch.kubernetes.io/job-completion-index"] = string(rune('0' + i))
		if _, err := b.cs.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		pods = append(pods, p.Name)
	}
	b.setStatus(t, pods[0], running)
	b.setStatus(t, pods[1], unschedulable)
	eventually.True(t, "the gang waiting for its second pod", func() bool { return b.log.has("pending: Unschedulable") })
	if st, _ := h.Poll(context.Background()); st.Phase != runner.Pending {
		t.Fatalf("one pod of two running: %+v, want pending", st)
	}
	b.setStatus(t, pods[1], running)
	waitPhase(t, h, runner.Running)
	b.setStatus(t, pods[0], exited(0, "Completed"))
	b.setStatus(t, pods[1], exited(0, "Completed"))
	st := waitPhase(t, h, runner.Ended)
	if st.ExitCode != 0 {
		t.Fatalf("status %+v", st)
	}
	if !b.gone("job", name) {
		t.Error("the Job is left after the end")
	}
	if !b.log.has("[1] fake logs") {
		t.Errorf("the second pod's output is not in the log, marked with its index:\n%s", b.log)
	}
}

func TestCleanupDeletesOnlyThisWorkersLeftovers(t *testing.T) {
	b := setup(t, nil)
	ctx := context.Background()
	mk := func(name, worker string) {
		_, err := b.cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
			Labels: map[string]string{LabelWorker: worker}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	mk("left-by-me", "kube-worker-1")
	mk("of-another-worker", "kube-worker-2")
	if err := b.r.Cleanup(ctx); err != nil {
		t.Fatal(err)
	}
	list, _ := b.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	var left []string
	for _, p := range list.Items {
		left = append(left, p.Name)
	}
	sort.Strings(left)
	if strings.Join(left, ",") != "of-another-worker" {
		t.Errorf("pods left %v, want only of-another-worker", left)
	}
}

func TestAPodDeletedOutsideTheWorkerOrEvictedEndsTheTask(t *testing.T) {
	b := setup(t, nil)
	ctx := context.Background()
	h, err := b.r.Submit(ctx, b.job("t-gone", 1000, 1))
	if err != nil {
		t.Fatal(err)
	}
	name := ObjectName("t-gone", 1)
	b.setStatus(t, name, running)
	waitPhase(t, h, runner.Running)
	if err := b.cs.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	st := waitPhase(t, h, runner.Ended)
	if st.ExitCode != -1 || !strings.Contains(st.Reason, "deleted outside the worker") {
		t.Errorf("deleted pod: %+v", st)
	}

	h, err = b.r.Submit(ctx, b.job("t-evicted", 1000, 1))
	if err != nil {
		t.Fatal(err)
	}
	name = ObjectName("t-evicted", 1)
	b.setStatus(t, name, func(p *corev1.Pod) {
		p.Status.Phase, p.Status.Reason, p.Status.Message = corev1.PodFailed, "Evicted", "The node was low on resource: memory."
	})
	st = waitPhase(t, h, runner.Ended)
	if st.ExitCode != -1 || !strings.Contains(st.Reason, "Evicted: The node was low on resource: memory.") {
		t.Errorf("evicted pod: %+v", st)
	}
}

// TestTheHelmChartsPodTemplateLoads reads the pod template the chart ships
// as a values entry, as the worker reads it from the chart's ConfigMap.
func TestTheHelmChartsPodTemplateLoads(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "deploy", "helm", "klique-worker", "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values struct {
		PodTemplate any `json:"podTemplate"`
	}
	if err := yaml.Unmarshal(b, &values); err != nil {
		t.Fatal(err)
	}
	doc, err := yaml.Marshal(values.PodTemplate)
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := ParseTemplate(doc)
	if err != nil {
		t.Fatalf("the chart's podTemplate: %v", err)
	}
	r, err := New(Options{Client: fake.NewClientset(), Namespace: ns, Template: tmpl})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.CheckProfiles([]agentapi.ProfileSize{{Name: "one", MilliGPUsPerNode: 1000}, {Name: "eight", MilliGPUsPerNode: 8000}}); err != nil {
		t.Errorf("the chart's template sets a GPU limit: %v", err)
	}
}

// BenchmarkRender renders one task's pod and Secret from the test template:
// the worker's own cost per claimed task, before any API call.
func BenchmarkRender(b *testing.B) {
	tb := &testBundle{log: &lineLog{}}
	tmpl, err := ParseTemplate(mustRead(b, filepath.Join("testdata", "template.yaml")))
	if err != nil {
		b.Fatal(err)
	}
	r, err := New(Options{Client: fake.NewClientset(), Namespace: ns, Instance: "w", Template: tmpl})
	if err != nil {
		b.Fatal(err)
	}
	job := tb.job("tsk_bench", 2000, 1)
	job.Log = func(string, string) {}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Render(job); err != nil {
			b.Fatal(err)
		}
	}
}

func mustRead(tb testing.TB, file string) []byte {
	tb.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}
