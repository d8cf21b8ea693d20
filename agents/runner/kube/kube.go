// Package kube is the Kubernetes environment of the worker daemon: the
// worker runs as a controller in its own namespace and never runs the work
// itself. For every claimed task it renders a pod (or, for a task on
// several nodes, an indexed Job of one pod per node) from the pool's base
// pod template plus the task's run settings, creates it through the
// Kubernetes API, and lets the cluster's scheduler place it. It then
// watches the pods, tells the task's log why they are pending (the
// scheduler's reason), streams their output, keeps what is known at the
// end (exit code, OOMKilled, the last lines, the pods' events) and deletes
// them.
//
// Whole GPUs, MIG slices and memory-capped fractions are only different
// resource names in the rendered spec: the pool's GPU resource
// (nvidia.com/gpu, or a MIG profile such as nvidia.com/mig-1g.10gb) counts
// whole units, and a fraction asks for the fraction resource (an extended
// resource of a GPU-sharing device plugin, counted in MiB of GPU memory)
// with the variables that cap the task's memory. docs/kubernetes.md says
// where each part of a pod comes from.
//
// The package talks to the API with client-go only (no kubectl), so its
// tests run against k8s.io/client-go/kubernetes/fake.
package kube

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/klique-ai/klique/internal/agentapi"
)

// Labels put on every pod, Job and Secret the runner creates: they link
// the object to its task, and let Cleanup find what this worker left.
const (
	LabelTask    = "klique.ai/task"
	LabelAttempt = "klique.ai/attempt"
	LabelPool    = "klique.ai/pool"
	LabelWorker  = "klique.ai/worker"
	LabelProject = "klique.ai/project"
	// AnnotationTaskName keeps the task's name, which may not fit a label.
	AnnotationTaskName = "klique.ai/task-name"
)

// Resource names and variables.
const (
	// DefaultGPUResource is what the NVIDIA device plugin advertises.
	DefaultGPUResource = "nvidia.com/gpu"
	// TaskContainer names the container the task runs in when the
	// template has none.
	TaskContainer = "task"
	// EnvNodes is the number of pods of a task on several nodes; each
	// pod's rank is Kubernetes' own JOB_COMPLETION_INDEX.
	EnvNodes = "KLIQUE_NODES"
	// Variables of a fractional share, as in docker mode.
	EnvFraction      = "KLIQUE_GPU_FRACTION"
	EnvMemoryLimitMB = "KLIQUE_GPU_MEMORY_LIMIT_MB"
	EnvMPSMemLimit   = "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"
	EnvMPSThreads    = "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"
	// EnvRequirements holds the task's packages, one a line, when it has
	// any: the container installs them before it runs the command.
	EnvRequirements = "KLIQUE_REQUIREMENTS"
)

// hostOnly are variables the worker gives every task that name files or a
// URL on the worker's own host: a pod cannot reach them, so they are left
// out (parameters still arrive as KLIQUE_PARAM_ variables).
var hostOnly = map[string]bool{
	"KLIQUE_PARAMS_FILE": true, "KLIQUE_METRICS_FILE": true, "KLIQUE_OUTPUTS_FILE": true, "KLIQUE_METRICS_URL": true,
	"KLIQUE_GPUS": true,
}

// Options configure the runner.
type Options struct {
	// Client is the Kubernetes API (in-cluster, from a kubeconfig, or a
	// fake in tests).
	Client kubernetes.Interface
	// Namespace holds every object the runner creates.
	Namespace string
	// Instance names this worker on its objects (label klique.ai/worker),
	// so Cleanup finds what an earlier run left.
	Instance string
	// Template is the base pod: node selectors, tolerations, volumes (the
	// shared filesystem), the service account, the scheduler, resources
	// other than GPUs. Its first container runs the task.
	Template *corev1.PodTemplateSpec
	// GPUResource is the resource a task's GPUs are counted in (default
	// nvidia.com/gpu; a MIG profile such as nvidia.com/mig-1g.10gb makes
	// each of the pool's GPUs a slice).
	GPUResource string
	// FractionResource, when set, is the extended resource a fraction of a
	// GPU asks for, counted in MiB of GPU memory (share × GPUMemoryMB);
	// empty, the worker claims no fractions.
	FractionResource string
	// GPUMemoryMB is each GPU's memory, for a fraction's cap.
	GPUMemoryMB int
	// DefaultImage runs tasks that name no image and whose template
	// container names none either.
	DefaultImage string
	// PendingTimeout ends a task whose pods have not all started in this
	// time (default 10 min), with the scheduler's reason.
	PendingTimeout time.Duration
	// Resync is how often a task's pods are listed again besides the
	// watch (default 30 s), so a missed event only delays what is seen.
	Resync time.Duration
	// TailLines is how many last lines are kept for the diagnostics
	// (default 20).
	TailLines int
}

// Runner runs tasks as Kubernetes pods.
type Runner struct {
	opts Options
	// templateGPUs is the template's own limit on the GPU resource, -1
	// when it sets none.
	templateGPUs int64
}

// New checks opts and returns a runner.
func New(opts Options) (*Runner, error) {
	if opts.Client == nil {
		return nil, errors.New("kubernetes runner: no API client")
	}
	if opts.Namespace == "" {
		return nil, errors.New("kubernetes runner: no namespace: give --namespace (or run in a pod, which knows its own)")
	}
	if opts.Template == nil {
		opts.Template = &corev1.PodTemplateSpec{}
	}
	if opts.GPUResource == "" {
		opts.GPUResource = DefaultGPUResource
	}
	for _, name := range []string{opts.GPUResource, opts.FractionResource} {
		if name != "" && !resourceNameRE.MatchString(name) {
			return nil, fmt.Errorf("resource name %q: write an extended resource as domain/name, such as nvidia.com/gpu or nvidia.com/mig-1g.10gb", name)
		}
	}
	if opts.FractionResource != "" && opts.GPUMemoryMB <= 0 {
		return nil, fmt.Errorf("fractions through %s need each GPU's memory: give --gpu-memory-mb", opts.FractionResource)
	}
	if opts.PendingTimeout <= 0 {
		opts.PendingTimeout = 10 * time.Minute
	}
	if opts.Resync <= 0 {
		opts.Resync = 30 * time.Second
	}
	if opts.TailLines <= 0 {
		opts.TailLines = 20
	}
	r := &Runner{opts: opts, templateGPUs: -1}
	if len(opts.Template.Spec.Containers) > 0 {
		c := opts.Template.Spec.Containers[0]
		q, ok := c.Resources.Limits[corev1.ResourceName(opts.GPUResource)]
		if !ok {
			q, ok = c.Resources.Requests[corev1.ResourceName(opts.GPUResource)]
		}
		if ok {
			r.templateGPUs = q.Value()
		}
	}
	return r, nil
}

var resourceNameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`)

// LoadTemplate reads a base pod template from a YAML (or JSON) file: a
// Pod manifest, or a pod template (metadata and spec). Unknown fields are
// refused, so a misspelt field is not silently dropped.
func LoadTemplate(file string) (*corev1.PodTemplateSpec, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("pod template: %w", err)
	}
	return ParseTemplate(b)
}

// ParseTemplate reads a base pod template; see LoadTemplate.
func ParseTemplate(b []byte) (*corev1.PodTemplateSpec, error) {
	var head struct {
		Kind string `json:"kind"`
	}
	if err := yaml.Unmarshal(b, &head); err != nil {
		return nil, fmt.Errorf("pod template: not YAML: %w", err)
	}
	t := &corev1.PodTemplateSpec{}
	switch head.Kind {
	case "Pod":
		var p corev1.Pod
		if err := yaml.UnmarshalStrict(b, &p); err != nil {
			return nil, fmt.Errorf("pod template: %w", err)
		}
		t.ObjectMeta, t.Spec = p.ObjectMeta, p.Spec
	case "":
		if err := yaml.UnmarshalStrict(b, t); err != nil {
			return nil, fmt.Errorf("pod template (metadata and spec, or a Pod manifest): %w", err)
		}
	default:
		return nil, fmt.Errorf("pod template: kind %s: give a Pod, or a pod template without a kind (metadata and spec)", head.Kind)
	}
	return t, nil
}

// Name is "pod".
func (r *Runner) Name() string { return agentapi.ModePod }

// Fractions is true when a fraction resource is configured.
func (r *Runner) Fractions() bool { return r.opts.FractionResource != "" }

// CheckProfiles refuses a template whose GPU limit differs from the size
// of a profile that places work on the pool: every task of that profile
// would be refused, so the worker does not start.
func (r *Runner) CheckProfiles(profiles []agentapi.ProfileSize) error {
	if r.templateGPUs < 0 {
		return nil
	}
	for _, p := range profiles {
		if err := r.checkSize(p.MilliGPUsPerNode); err != nil {
			return fmt.Errorf("profile %q: %w", p.Name, err)
		}
	}
	return nil
}

// checkSize says how a task size disagrees with the template's GPU limit.
func (r *Runner) checkSize(milliPerNode int64) error {
	if r.templateGPUs < 0 {
		return nil
	}
	if milliPerNode%1000 != 0 || milliPerNode/1000 != r.templateGPUs {
		return fmt.Errorf("the pod template's first container sets %s: %d, but the profile's size is %s per node: "+
			"remove the GPU limit from the template (the worker sets it from each task's size) or make them agree",
			r.opts.GPUResource, r.templateGPUs, sizeString(milliPerNode))
	}
	return nil
}

func sizeString(milli int64) string {
	if milli%1000 == 0 {
		if milli == 1000 {
			return "1 GPU"
		}
		return fmt.Sprintf("%d GPUs", milli/1000)
	}
	return strconv.FormatFloat(float64(milli)/1000, 'f', -1, 64) + " of a GPU"
}

// ObjectName is the pod (or Job) of one attempt of a task: a DNS label,
// short enough for a Job's pods to add their index and suffix.
func ObjectName(taskID string, attempt int) string {
	id := strings.Trim(nameUnsafe.ReplaceAllString(strings.ToLower(taskID), "-"), "-")
	suffix := "-" + strconv.Itoa(attempt)
	if max := 48 - len("klique-") - len(suffix); len(id) > max {
		id = strings.TrimRight(id[:max], "-")
	}
	return "klique-" + id + suffix
}

var nameUnsafe = regexp.MustCompile(`[^a-z0-9-]+`)

// labelValue makes s a valid label value (at most 63 characters of
// letters, digits, '-', '_' and '.', starting and ending alphanumeric).
func labelValue(s string) string {
	s = labelUnsafe.ReplaceAllString(s, "_")
	if len(s) > 63 {
		s = s[:63]
	}
	return strings.Trim(s, "-_.")
}

var labelUnsafe = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

func setEnv(env []corev1.EnvVar, k, v string) []corev1.EnvVar {
	for i := range env {
		if env[i].Name == k {
			env[i] = corev1.EnvVar{Name: k, Value: v}
			return env
		}
	}
	return append(env, corev1.EnvVar{Name: k, Value: v})
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// selector selects every object of this worker.
func (r *Runner) selector() string {
	return LabelWorker + "=" + labelValue(r.opts.Instance)
}

// Cleanup deletes the pods, Jobs and Secrets an earlier run of this worker
// left (a worker killed without draining): their tasks were requeued when
// their leases ran out.
func (r *Runner) Cleanup(ctx context.Context) error {
	if labelValue(r.opts.Instance) == "" {
		return nil
	}
	ns, sel := r.opts.Namespace, metav1.ListOptions{LabelSelector: r.selector()}
	bg := metav1.DeletePropagationBackground
	del := metav1.DeleteOptions{PropagationPolicy: &bg}
	var errs []error
	jobs, err := r.opts.Client.BatchV1().Jobs(ns).List(ctx, sel)
	if err != nil {
		errs = append(errs, fmt.Errorf("list Jobs left by an earlier run: %w", err))
	} else {
		for _, j := range jobs.Items {
			if err := r.opts.Client.BatchV1().Jobs(ns).Delete(ctx, j.Name, del); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("delete Job %s: %w", j.Name, err))
			}
		}
	}
	pods, err := r.opts.Client.CoreV1().Pods(ns).List(ctx, sel)
	if err != nil {
		errs = append(errs, fmt.Errorf("list pods left by an earlier run: %w", err))
	} else {
		for _, p := range pods.Items {
			if err := r.opts.Client.CoreV1().Pods(ns).Delete(ctx, p.Name, del); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("delete pod %s: %w", p.Name, err))
			}
		}
	}
	secrets, err := r.opts.Client.CoreV1().Secrets(ns).List(ctx, sel)
	if err != nil {
		errs = append(errs, fmt.Errorf("list Secrets left by an earlier run: %w", err))
	} else {
		for _, s := range secrets.Items {
			if err := r.opts.Client.CoreV1().Secrets(ns).Delete(ctx, s.Name, del); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("delete Secret %s: %w", s.Name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// sortedKeys lists m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
