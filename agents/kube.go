package agents

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/klique-ai/klique/agents/runner/kube"
)

// KindKubernetes is a worker that runs as a controller in a cluster and
// renders each task as a pod.
const KindKubernetes = "kubernetes"

// inClusterNamespace is where a pod finds its own namespace.
const inClusterNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// newKubeRunner builds the Kubernetes runner from `klique worker --kind
// kubernetes`: the API client (a kubeconfig, else the pod's in-cluster
// service account), the namespace (else the pod's own), and the pool's pod
// template.
func newKubeRunner(opts Options) (*kube.Runner, error) {
	cs := opts.KubeClient
	if cs == nil {
		var cfg *rest.Config
		var err error
		if opts.Kubeconfig != "" {
			if cfg, err = clientcmd.BuildConfigFromFlags("", opts.Kubeconfig); err != nil {
				return nil, fmt.Errorf("--kubeconfig %s: %w", opts.Kubeconfig, err)
			}
		} else if cfg, err = rest.InClusterConfig(); err != nil {
			if errors.Is(err, rest.ErrNotInCluster) {
				return nil, errors.New("--kind kubernetes: not running in a pod: give --kubeconfig FILE")
			}
			return nil, fmt.Errorf("--kind kubernetes: in-cluster configuration: %w", err)
		}
		cfg.UserAgent = "klique-worker/" + opts.Version
		if cs, err = kubernetes.NewForConfig(cfg); err != nil {
			return nil, fmt.Errorf("--kind kubernetes: Kubernetes client: %w", err)
		}
	}
	ns := opts.Namespace
	if ns == "" {
		if b, err := os.ReadFile(inClusterNamespace); err == nil {
			ns = strings.TrimSpace(string(b))
		}
	}
	if ns == "" {
		return nil, errors.New("--kind kubernetes: say which namespace the task pods go in with --namespace")
	}
	ko := kube.Options{Client: cs, Namespace: ns, Instance: opts.Name, GPUResource: opts.GPUResource,
		FractionResource: opts.FractionResource, GPUMemoryMB: opts.GPUMemoryMB, DefaultImage: opts.DockerImage,
		PendingTimeout: opts.PendingTimeout}
	if opts.PodTemplate != "" {
		t, err := kube.LoadTemplate(opts.PodTemplate)
		if err != nil {
			return nil, fmt.Errorf("--pod-template %s: %w", opts.PodTemplate, err)
		}
		ko.Template = t
	}
	r, err := kube.New(ko)
	if err != nil {
		return nil, fmt.Errorf("--kind kubernetes: %w", err)
	}
	return r, nil
}
