package agents_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/klique-ai/klique/agents"
	"github.com/klique-ai/klique/agents/client"
	"github.com/klique-ai/klique/agents/runner/kube"
	"github.com/klique-ai/klique/agents/worker"
	"github.com/klique-ai/klique/internal/eventually"
)

// kubeEstate has a Kubernetes pool behind the "1 GPU" compute resource
// (and the bare-metal pool startControlPlane makes a credential for).
var kubeEstate = newEstate().pool("{name: k8s, kind: kubernetes, capacity: 2, gpuClass: a100-80gb}").profile("one-gpu", "k8s").
	policy("ml-research", 2, 2, "1 GPU=one-gpu").
	project("{name: fraud-models, group: ml-research, outputDestination: s3://ml-research/fraud-models}").String()

const kubeNS = "klique-tasks"

// kubeWorker builds `klique worker --kind kubernetes --pool k8s --gpus 0-1`
// on a fake cluster.
func kubeWorker(t *testing.T, e *e2e, cs *fake.Clientset, template string) (*worker.Worker, *syncWriter) {
	t.Helper()
	secret := str(gql(t, e.url, adminKey, `mutation { createWorkerCredential(pool: "k8s", name: "kube") { secret } }`, nil),
		"createWorkerCredential", "secret")
	tmplFile := ""
	if template != "" {
		tmplFile = filepath.Join(t.TempDir(), "pod-template.yaml")
		if err := os.WriteFile(tmplFile, []byte(template), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	logs := &syncWriter{}
	w, err := agents.NewWorker(context.Background(), agents.Options{
		Server: e.url, Token: secret, Pool: "k8s", Kind: agents.KindKubernetes, GPUs: "0-1", WorkDir: t.TempDir(),
		Grace: 2 * time.Second, Name: "kube-worker-e2e", Version: "e2e", NvidiaSMI: filepath.Join(t.TempDir(), "absent"),
		Namespace: kubeNS, KubeClient: cs, PodTemplate: tmplFile, PendingTimeout: time.Minute,
		Log: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Tune: func(c *worker.Config) {
			c.ClaimWait = 2 * time.Second
			c.LogFlushInterval = 100 * time.Millisecond
			c.Backoff = client.Backoff{Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return w, logs
}

// TestAKubernetesTaskRunsAsAPodThroughTheWorkerLoop runs the real control
// plane and the real worker loop with the Kubernetes runner on a fake
// cluster: the task is queued, placed on the kubernetes pool, claimed, its
// pod created; the test plays the kubelet (running, then succeeded) and
// the task completes on the control plane with the pod's output in its log.
func TestAKubernetesTaskRunsAsAPodThroughTheWorkerLoop(t *testing.T) {
	t.Parallel()
	e := startControlPlane(t, kubeEstate)
	cs := fake.NewClientset()
	w, logs := kubeWorker(t, e, cs, "")
	wctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	t.Cleanup(func() {
		stop()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("the worker: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Errorf("the worker did not stop")
		}
	})

	d := gql(t, e.url, e.alice, `mutation($in: EnqueueTaskInput!) { enqueueTask(input: $in) { id } }`, map[string]any{"in": map[string]any{
		"name": "train", "project": "fraud-models", "computeResource": "1 GPU", "secrets": []any{"HF_TOKEN"},
		"image": "ghcr.io/example/train:2", "command": []any{"python", "train.py"},
	}})
	id := str(d, "enqueueTask", "id")

	ctx := context.Background()
	var pod *corev1.Pod
	eventually.True(t, "", func() bool {
		list, err := cs.CoreV1().Pods(kubeNS).List(ctx, metav1.ListOptions{})
		if err == nil && len(list.Items) == 1 {
			pod = &list.Items[0]
		}
		return pod != nil
	})
	if pod.Labels[kube.LabelTask] != id || pod.Labels[kube.LabelPool] != "k8s" || pod.Labels[kube.LabelAttempt] != "1" {
		t.Fatalf("pod labels %v do not link it to task %s on pool k8s", pod.Labels, id)
	}
	c := pod.Spec.Containers[0]
	if c.Image != "ghcr.io/example/train:2" || strings.Join(c.Command, " ") != "python train.py" {
		t.Errorf("container %s %v, want the task's image and command", c.Image, c.Command)
	}
	if q := c.Resources.Limits["nvidia.com/gpu"]; q.Value() != 1 {
		t.Errorf("GPU limit %v, want 1 from the profile's size", c.Resources.Limits)
	}
	sec, err := cs.CoreV1().Secrets(kubeNS).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil || string(sec.Data["HF_TOKEN"]) != "hf_e2e_secret_value" || string(sec.Data["KLIQUE_TASK_ID"]) != id {
		t.Fatalf("the task's Secret: %v %v", err, sec)
	}
	e.waitTask(t, e.alice, id, "running on the control plane", func(d map[string]any) bool {
		return str(d, "task", "status") == "RUNNING" && str(d, "task", "worker", "hostname") == "kube-worker-e2e"
	})

	// The kubelet's part, once the worker watches.
	eventually.True(t, "", func() bool {
		for _, a := range cs.Actions() {
			if a.GetVerb() == "watch" && a.GetResource().Resource == "pods" {
				return true
			}
		}
		return false
	})
	setPod := func(fn func(*corev1.Pod)) {
		p, err := cs.CoreV1().Pods(kubeNS).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		fn(p)
		if _, err := cs.CoreV1().Pods(kubeNS).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setPod(func(p *corev1.Pod) {
		p.Spec.NodeName, p.Status.Phase = "gpu-node-1", corev1.PodRunning
	})
	e.waitTask(t, e.alice, id, "the pod's node in the log", func(d map[string]any) bool {
		return strings.Contains(logText(d), "running on gpu-node-1")
	})
	setPod(func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodSucceeded
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: kube.TaskContainer,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}}}
	})
	d = e.waitTask(t, e.alice, id, "completed", func(d map[string]any) bool { return str(d, "task", "status") == "COMPLETED" })
	if log := logText(d); !strings.Contains(log, "stdout: fake logs") || strings.Contains(log, "hf_e2e_secret_value") {
		t.Errorf("the task's log lacks the pod's output, or shows the secret:\n%s", log)
	}
	if _, err := cs.CoreV1().Pods(kubeNS).Get(ctx, pod.Name, metav1.GetOptions{}); err == nil {
		t.Error("the pod is left after the task completed")
	}
	if strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("worker errors:\n%s", logs)
	}
}

// TestAKubernetesWorkerWhoseTemplateDisagreesWithAProfileDoesNotStart
// registers a worker whose pod template asks 2 GPUs on a pool whose
// profile gives 1: it refuses to start and says both.
func TestAKubernetesWorkerWhoseTemplateDisagreesWithAProfileDoesNotStart(t *testing.T) {
	t.Parallel()
	e := startControlPlane(t, kubeEstate)
	w, _ := kubeWorker(t, e, fake.NewClientset(), `spec:
  containers:
    - name: task
      image: busybox
      resources:
        limits: {nvidia.com/gpu: 2}
`)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := w.Run(ctx)
	if err == nil {
		t.Fatal("the worker started with a template asking 2 GPUs for a profile of 1")
	}
	for _, want := range []string{`profile "one-gpu"`, "nvidia.com/gpu: 2", "1 GPU per node"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not say %q", err, want)
		}
	}
}
