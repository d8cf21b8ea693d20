package autoscaler_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/klique-ai/klique/agents"
	"github.com/klique-ai/klique/agents/client"
	"github.com/klique-ai/klique/agents/worker"
)

// threePools is one compute resource ("1 GPU") whose profile lists a bare
// metal pool first, a Kubernetes pool second and a cloud pool third.
const threePools = `apiVersion: klique/v1
kind: Estate
gpuClasses:
  - {name: h100, memoryGb: 80, pricePerGpuHour: 2.50, currency: USD}
pools:
  - {name: bare-metal, kind: bare_metal, capacity: 1, gpuClass: h100}
  - {name: onprem-k8s, kind: kubernetes, capacity: 1, gpuClass: h100}
  - {name: cloud-burst, kind: cloud, capacity: 2, gpuClass: h100}
profiles:
  - {name: one-gpu, size: 1, timeWeight: 1, pools: [bare-metal, onprem-k8s, cloud-burst]}
groups:
  - {name: ml-research}
policies:
  - group: ml-research
    reservation: 4
    limit: 4
    computeResources:
      - {name: 1 GPU, profile: one-gpu}
projects:
  - {name: fraud-models, group: ml-research, outputDestination: s3://ml-research/fraud-models}
`

// startWorker runs a worker daemon in-process until the test ends.
func startWorker(t *testing.T, o agents.Options) {
	t.Helper()
	o.Mode, o.Version, o.Grace, o.WorkDir = "process", "e2e", 2*time.Second, t.TempDir()
	o.NvidiaSMI = filepath.Join(o.WorkDir, "no-nvidia-smi")
	o.Log = slog.New(slog.DiscardHandler)
	o.Tune = func(c *worker.Config) {
		c.ClaimWait = time.Second
		c.LogFlushInterval = 100 * time.Millisecond
		c.Backoff = client.Backoff{Initial: 20 * time.Millisecond, Max: 200 * time.Millisecond}
	}
	w, err := agents.NewWorker(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Errorf("worker %s did not stop", o.Name)
		}
	})
}

// fakeKubelet plays the cluster for the Kubernetes worker's fake API:
// every pod it creates is scheduled, runs for a while and succeeds.
func fakeKubelet(t *testing.T, cs *fake.Clientset, ns string, runFor time.Duration) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	started := map[string]time.Time{}
	go func() {
		// Like a kubelet, it looks at its pods every so often (50 ms),
		// until the test ends.
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				continue
			}
			for i := range pods.Items {
				p := &pods.Items[i]
				if len(p.Spec.Containers) == 0 || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
					continue
				}
				name := p.Spec.Containers[0].Name
				switch at, ok := started[p.Name]; {
				case !ok:
					started[p.Name] = time.Now()
					p.Spec.NodeName = "gpu-node-1"
					p.Status.Phase = corev1.PodRunning
					p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}
					p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: name, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
				case time.Since(at) >= runFor:
					p.Status.Phase = corev1.PodSucceeded
					p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: name, State: corev1.ContainerState{
						Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}}}}
				default:
					continue
				}
				_, _ = cs.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
			}
		}
	}()
}

// TestABurstOverflowsFromBareMetalToKubernetesToTheCloud is the issue's
// "done means": three kinds of pools behind one compute resource; a burst
// of four tasks fills the bare-metal pool, overflows to the Kubernetes pool
// (the Kubernetes worker on a fake API, a fake kubelet running its pods)
// and then to the cloud pool, which scales from zero through the local
// provider and back down to zero after the idle timeout.
func TestABurstOverflowsFromBareMetalToKubernetesToTheCloud(t *testing.T) {
	t.Parallel()
	p := startPlane(t, threePools)
	url := p.url
	cred := func(pool string) string {
		return str(gql(t, url, adminKey, `mutation($p: ID!) { createWorkerCredential(pool: $p) { secret } }`, map[string]any{"p": pool}),
			"createWorkerCredential", "secret")
	}
	startWorker(t, agents.Options{Server: url, Token: cred("bare-metal"), Pool: "bare-metal", GPUs: "0", Name: "metal-1"})
	cs := fake.NewClientset()
	fakeKubelet(t, cs, "klique", 3*time.Second)
	startWorker(t, agents.Options{Server: url, Token: cred("onprem-k8s"), Pool: "onprem-k8s", Kind: agents.KindKubernetes, GPUs: "0",
		Name: "k8s-controller", KubeClient: cs, Namespace: "klique", DockerImage: "python:3.12"})
	gql(t, url, adminKey, `mutation { createAutoscaler(input: {name: "burst", pool: "cloud-burst", provider: LOCAL,
		instanceTypes: [{name: "local-1", gpus: 1}], maxInstances: 2, idleTimeoutSeconds: 2, spinUpTimeoutSeconds: 60}) { id } }`, nil)
	runAutoscaler(t, url, p.workerSecret, localProvider(t))

	var ids []string
	for _, name := range []string{"burst-1", "burst-2", "burst-3", "burst-4"} {
		ids = append(ids, p.enqueue(t, name, `sleep 3; echo "done on $KLIQUE_WORKER"`))
	}
	taskQuery := `query($id: ID!) { task(id: $id) { name status reason worker { hostname pool { name } } } }`
	var ranOn []string
	for _, id := range ids {
		d := waitFor(t, url, p.alice, "the task to complete", taskQuery, map[string]any{"id": id}, 90*time.Second, func(d map[string]any) bool {
			s := str(d, "task", "status")
			if s == "FAILED" || s == "ABORTED" {
				t.Fatalf("task ended %s: %v", s, d)
			}
			return s == "COMPLETED"
		})
		host := str(d, "task", "worker", "hostname")
		if strings.HasPrefix(host, "burst-") {
			host = "burst-*"
		}
		ranOn = append(ranOn, str(d, "task", "worker", "pool", "name")+"/"+host)
	}
	sort.Strings(ranOn)
	if got := strings.Join(ranOn, " "); got != "bare-metal/metal-1 cloud-burst/burst-* cloud-burst/burst-* onprem-k8s/k8s-controller" {
		t.Fatalf("the burst ran on %s; want one task on bare metal, one on Kubernetes, two on the cloud", got)
	}

	// The cloud pool is back to zero once its instances idle out.
	waitFor(t, url, adminKey, "the cloud pool back to zero", autoscalersQuery, nil, 30*time.Second, func(d map[string]any) bool {
		as := get(d, "autoscalers").([]any)[0]
		return len(get(as, "instances").([]any)) == 0
	})
}
