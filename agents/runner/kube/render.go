package kube

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/klique-ai/klique/agents/runner"
	"github.com/klique-ai/klique/internal/agentapi"
	"github.com/klique-ai/klique/internal/runenv"
)

// Rendered is what Render makes of a task: a Pod for one node or a Job
// for several, and the Secret holding the task's variables (secrets among
// them), so that no value is written in a pod spec.
type Rendered struct {
	Pod    *corev1.Pod
	Job    *batchv1.Job
	Secret *corev1.Secret
}

// Render turns a claimed task into its Kubernetes objects.
func (r *Runner) Render(job *runner.Job) (*Rendered, error) {
	t := job.Task
	if t.Repository != "" {
		return nil, errors.New("the task runs from a repository, and the kubernetes worker runs images only: build an image with the code, or use a bare-metal pool")
	}
	if len(t.Command) == 0 && t.EntryPoint == "" && t.App == nil {
		return nil, errors.New("the task has nothing to run: give it a command")
	}
	nodes := max(t.Nodes, 1)
	if err := r.checkSize(t.MilliGPUsPerNode); err != nil {
		return nil, err
	}
	name := ObjectName(t.TaskID, t.Attempt)
	labels := r.objectLabels(job)

	tmpl := r.opts.Template.DeepCopy()
	meta := objectMeta(name, r.opts.Namespace, tmpl, labels, t.Name)
	spec := tmpl.Spec
	spec.RestartPolicy = corev1.RestartPolicyNever
	if len(spec.Containers) == 0 {
		spec.Containers = []corev1.Container{{}}
	}
	c := &spec.Containers[0]
	c.Name = orDefault(c.Name, TaskContainer)

	// The image: the task's (or its compute resource's), else the
	// template's, else the worker's default.
	switch {
	case t.Image != "":
		c.Image = t.Image
	case c.Image == "":
		c.Image = r.opts.DefaultImage
	}
	if c.Image == "" {
		return nil, errors.New("the task names no image, and neither does the pod template: give the compute resource an image, or the worker --default-image")
	}
	secretData := map[string][]byte{}
	c.Command, c.Args = taskArgv(t, secretData), nil
	if t.App != nil {
		var err error
		if spec, err = appContainer(spec, t.App); err != nil {
			return nil, err
		}
		c = &spec.Containers[0]
	}
	if t.WorkingDir != "" {
		if path.IsAbs(t.WorkingDir) {
			c.WorkingDir = t.WorkingDir
		} else {
			c.WorkingDir = path.Join("/", c.WorkingDir, path.Clean("/"+t.WorkingDir))
		}
	}

	env := secretEnv(c, name, job.Env, secretData)
	env, err := r.gpuResources(c, env, t.MilliGPUsPerNode)
	if err != nil {
		return nil, err
	}
	if err := hostMounts(&spec, c, t.Mounts); err != nil {
		return nil, err
	}
	if nodes > 1 {
		env = setEnv(env, EnvNodes, strconv.Itoa(nodes))
	}
	c.Env = env
	if t.App != nil {
		if err := appProbe(c, t.App); err != nil {
			return nil, err
		}
	}

	out := &Rendered{Secret: &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: r.opts.Namespace, Labels: labels},
		Type:       corev1.SecretTypeOpaque, Data: secretData,
	}}
	if nodes == 1 {
		out.Pod = &corev1.Pod{ObjectMeta: meta, Spec: spec}
		return out, nil
	}
	out.Job = indexedJob(meta, spec, nodes)
	return out, nil
}

// objectLabels are the labels every object of the task carries, so that
// the worker finds its own pods again (task, attempt, pool, worker,
// project); an empty value is left out rather than written blank.
func (r *Runner) objectLabels(job *runner.Job) map[string]string {
	t := job.Task
	labels := map[string]string{
		LabelTask: labelValue(t.TaskID), LabelAttempt: strconv.Itoa(t.Attempt),
		LabelPool: labelValue(job.Env["KLIQUE_POOL"]), LabelWorker: labelValue(r.opts.Instance),
	}
	if t.Project != "" {
		labels[LabelProject] = labelValue(t.Project)
	}
	for k, v := range labels {
		if v == "" {
			delete(labels, k)
		}
	}
	return labels
}

// objectMeta is the pod's (or job's) metadata: the template's labels and
// annotations, then the task's labels over them (the worker's own must
// win), and the task's name as an annotation for people reading pods.
func objectMeta(name, namespace string, tmpl *corev1.PodTemplateSpec, labels map[string]string, taskName string) metav1.ObjectMeta {
	meta := metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{}, Annotations: map[string]string{}}
	for k, v := range tmpl.Labels {
		meta.Labels[k] = v
	}
	for k, v := range tmpl.Annotations {
		meta.Annotations[k] = v
	}
	for k, v := range labels {
		meta.Labels[k] = v
	}
	if taskName != "" {
		meta.Annotations[AnnotationTaskName] = taskName
	}
	return meta
}

// taskArgv is the container's command: the task's, or python on its entry
// point; with packages, wrapped in a shell line that installs them first,
// the requirements passed in the Secret (secretData) rather than the spec.
func taskArgv(t *agentapi.Assignment, secretData map[string][]byte) []string {
	argv := t.Command
	if len(argv) == 0 {
		argv = []string{"python", t.EntryPoint}
	}
	if len(t.Packages) > 0 {
		secretData[EnvRequirements] = []byte(strings.Join(t.Packages, "\n") + "\n")
		argv = append([]string{"sh", "-c",
			`printf '%s\n' "$` + EnvRequirements + `" > /tmp/klique-requirements.txt && python -m pip install --disable-pip-version-check --no-input -r /tmp/klique-requirements.txt && exec "$@"`,
			"sh"}, argv...)
	}
	return argv
}

// appContainer makes the pod spec's first container an app instance's.
// An app instance runs its image with the app's container args (none: the
// image's own command), then the app's pod fragment merged over it; its
// process line is for process mode.
func appContainer(spec corev1.PodSpec, app *agentapi.AppAssignment) (corev1.PodSpec, error) {
	c := &spec.Containers[0]
	c.Command, c.Args = nil, slices.Clone(app.Args)
	if strings.TrimSpace(app.Pod) != "" {
		merged, err := mergePodFragment(spec, app.Pod)
		if err != nil {
			return spec, err
		}
		spec = merged
		c = &spec.Containers[0]
	}
	if c.Image == "" {
		return spec, errors.New("the app's pod names no image, and neither does the pod template: give the catalogue entry run.image")
	}
	return spec, nil
}

// secretEnv puts the task's variables in secretData, the Secret the
// container reads whole (envFrom): they hold its secrets, which must not be
// written in a pod spec anyone who can read pods would see. It returns the
// template's own variables less those the task sets, so that the task's
// value wins (env wins over envFrom in Kubernetes).
func secretEnv(c *corev1.Container, name string, jobEnv map[string]string, secretData map[string][]byte) []corev1.EnvVar {
	for k, v := range jobEnv {
		if !hostOnly[k] {
			secretData[k] = []byte(v)
		}
	}
	var env []corev1.EnvVar
	for _, e := range c.Env {
		if _, ok := secretData[e.Name]; !ok {
			env = append(env, e)
		}
	}
	c.EnvFrom = append(c.EnvFrom, corev1.EnvFromSource{SecretRef: &corev1.SecretEnvSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: name}}})
	return env
}

// gpuResources sets the container's GPUs: whole units of the GPU resource
// (GPUs, or MIG slices), or a fraction as MiB of the fraction resource with
// the variables that cap the task's memory; none hides the node's GPUs.
func (r *Runner) gpuResources(c *corev1.Container, env []corev1.EnvVar, m int64) ([]corev1.EnvVar, error) {
	if c.Resources.Limits == nil {
		c.Resources.Limits = corev1.ResourceList{}
	}
	if c.Resources.Requests == nil {
		c.Resources.Requests = corev1.ResourceList{}
	}
	setRes := func(n string, q resource.Quantity) {
		c.Resources.Limits[corev1.ResourceName(n)] = q
		c.Resources.Requests[corev1.ResourceName(n)] = q
	}
	switch {
	case m <= 0:
		env = setEnv(env, "NVIDIA_VISIBLE_DEVICES", "void")
	case m%1000 == 0:
		setRes(r.opts.GPUResource, *resource.NewQuantity(m/1000, resource.DecimalSI))
	case m < 1000:
		if r.opts.FractionResource == "" {
			return nil, fmt.Errorf("the task asks for %s, and this worker has no --fraction-resource to run a fraction with", sizeString(m))
		}
		limit := int64(r.opts.GPUMemoryMB) * m / 1000
		setRes(r.opts.FractionResource, *resource.NewQuantity(limit, resource.DecimalSI))
		env = setEnv(env, EnvFraction, strconv.FormatFloat(float64(m)/1000, 'f', -1, 64))
		env = setEnv(env, EnvMemoryLimitMB, strconv.FormatInt(limit, 10))
		env = setEnv(env, EnvMPSMemLimit, "0="+strconv.FormatInt(limit, 10)+"M")
		env = setEnv(env, EnvMPSThreads, strconv.FormatInt(max(1, m/10), 10))
	default:
		return nil, fmt.Errorf("the task asks for %s per node: more than one GPU per node must be whole GPUs", sizeString(m))
	}
	if len(c.Resources.Limits) == 0 {
		c.Resources.Limits = nil
	}
	if len(c.Resources.Requests) == 0 {
		c.Resources.Requests = nil
	}
	return env, nil
}

// hostMounts adds the compute resource's mounts as host paths (the shared
// filesystem as each node mounts it), checked first so that a bad mount
// is a clear error rather than a pod Kubernetes refuses.
func hostMounts(spec *corev1.PodSpec, c *corev1.Container, mounts []string) error {
	for i, m := range mounts {
		if err := runenv.CheckMount(m); err != nil {
			return fmt.Errorf("the compute resource's mounts: %w", err)
		}
		parts := strings.Split(m, ":")
		vol := "klique-mount-" + strconv.Itoa(i)
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: vol, VolumeSource: corev1.VolumeSource{
			HostPath: &corev1.HostPathVolumeSource{Path: parts[0]}}})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: vol, MountPath: parts[1],
			ReadOnly: len(parts) == 3 && parts[2] == "ro"})
	}
	return nil
}

// indexedJob is the Job for a task on several nodes: one pod per node, all
// at once (parallelism = completions), none retried: a failed pod fails
// the task.
func indexedJob(meta metav1.ObjectMeta, spec corev1.PodSpec, nodes int) *batchv1.Job {
	n := int32(nodes)
	indexed := batchv1.IndexedCompletion
	backoff := int32(0)
	podMeta := meta
	podMeta.Name, podMeta.Namespace = "", ""
	return &batchv1.Job{ObjectMeta: meta, Spec: batchv1.JobSpec{
		Parallelism: &n, Completions: &n, CompletionMode: &indexed, BackoffLimit: &backoff,
		Template: corev1.PodTemplateSpec{ObjectMeta: podMeta, Spec: spec},
	}}
}
