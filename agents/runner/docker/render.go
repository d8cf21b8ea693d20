package docker

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/klique-ai/klique/agents/runner"
	"github.com/klique-ai/klique/internal/runenv"
)

// Render returns the docker run arguments (after the docker executable) and
// the environment for the docker CLI.
func (r *Runner) Render(job *runner.Job) (args []string, env []string, err error) {
	t := job.Task
	image := t.Image
	if image == "" {
		image = r.opts.DefaultImage
	}
	if image == "" {
		return nil, nil, errors.New("the task names no image, and docker mode needs one (or a worker default image, --docker-image)")
	}
	if len(t.Command) == 0 && t.EntryPoint == "" && t.App == nil {
		return nil, nil, errors.New("the task has nothing to run: give it a command, or a repository with an entry point")
	}
	if err := r.checkApp(job); err != nil {
		return nil, nil, err
	}
	vars := map[string]string{}
	for k, v := range job.Env {
		vars[k] = v
	}
	args = r.labelArgs(job)
	gpuArgs, err := r.gpuArgs(job, vars)
	if err != nil {
		return nil, nil, err
	}
	args = append(args, gpuArgs...)
	placeArgs, err := r.placeArgs(job)
	if err != nil {
		return nil, nil, err
	}
	args = append(args, placeArgs...)
	envArgs, env := r.envArgs(vars)
	args = append(args, envArgs...)
	args = append(args, r.opts.ExtraArgs...)
	args = append(args, image)
	args = append(args, commandArgs(job)...)
	return args, env, nil
}

// checkApp refuses an app instance docker mode cannot publish: a port that
// is not a TCP port, no host port picked, or the host's network (where a
// published port means nothing).
func (r *Runner) checkApp(job *runner.Job) error {
	t := job.Task
	if t.App == nil {
		return nil
	}
	switch {
	case t.App.Port <= 0 || t.App.Port > 65535:
		return fmt.Errorf("the app's port %d is not a TCP port: give the catalogue entry the port it listens on", t.App.Port)
	case job.AppPort <= 0:
		return errors.New("an app instance needs a host port to publish its port on, and the worker picked none")
	case r.opts.Network == "host":
		return errors.New("an app instance in docker mode needs the container's own network, so that its port can be published on a free port of the host: start the worker without --docker-network host")
	}
	return nil
}

// labelArgs starts the docker run line: the container's name and the
// labels by which the worker finds its containers again (Recover) and
// people read them.
func (r *Runner) labelArgs(job *runner.Job) []string {
	t := job.Task
	args := []string{"run", "--rm", "--init", "--name", ContainerName(t.TaskID, t.Attempt),
		"--label", LabelTask + "=" + t.TaskID,
		"--label", LabelAttempt + "=" + strconv.Itoa(t.Attempt),
	}
	if t.Name != "" {
		args = append(args, "--label", LabelName+"="+t.Name)
	}
	if t.Project != "" {
		args = append(args, "--label", LabelProject+"="+t.Project)
	}
	if r.opts.Instance != "" {
		args = append(args, "--label", LabelWorker+"="+r.opts.Instance)
	}
	return args
}

// gpuArgs gives the container the task's GPUs: the host's indices select
// devices; inside, CUDA numbers them from 0. A fraction of a GPU gets the
// variables (in vars) that cap its memory, and the MPS pipe if the worker
// has one.
func (r *Runner) gpuArgs(job *runner.Job, vars map[string]string) ([]string, error) {
	var args []string
	host := make([]string, len(job.GPUs))
	inside := make([]string, len(job.GPUs))
	for i, g := range job.GPUs {
		host[i], inside[i] = strconv.Itoa(g.Index), strconv.Itoa(i)
	}
	if len(job.GPUs) > 0 {
		// The quotes are part of the value: docker parses --gpus as CSV.
		args = append(args, "--gpus", `"device=`+strings.Join(host, ",")+`"`)
		vars["NVIDIA_VISIBLE_DEVICES"] = strings.Join(host, ",")
	} else {
		vars["NVIDIA_VISIBLE_DEVICES"] = "void"
	}
	vars["CUDA_VISIBLE_DEVICES"] = strings.Join(inside, ",")
	vars["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
	if job.MilliGPUs > 0 && job.MilliGPUs < 1000 {
		if len(job.GPUs) != 1 {
			return nil, fmt.Errorf("a fraction of a GPU needs exactly one GPU, got %d", len(job.GPUs))
		}
		mem := job.GPUs[0].MemoryMB
		if mem <= 0 {
			return nil, errors.New("a fraction of a GPU needs the GPU's memory size (from nvidia-smi, or --gpu-memory-mb)")
		}
		limit := int64(mem) * job.MilliGPUs / 1000
		vars[EnvFraction] = strconv.FormatFloat(float64(job.MilliGPUs)/1000, 'f', -1, 64)
		vars[EnvMemoryLimitMB] = strconv.FormatInt(limit, 10)
		vars[EnvMPSMemLimit] = "0=" + strconv.FormatInt(limit, 10) + "M"
		vars[EnvMPSThreads] = strconv.FormatInt(max(1, job.MilliGPUs/10), 10)
		if r.opts.MPSPipeDir != "" {
			args = append(args, "--ipc", "host", "-v", r.opts.MPSPipeDir+":"+r.opts.MPSPipeDir)
			vars[EnvMPSPipeDir] = r.opts.MPSPipeDir
		}
	}
	return args, nil
}

// placeArgs are the container's filesystem and network: the task's
// directory, at the same path inside, so the paths in its environment
// (params, metrics, outputs files) hold in both places; then the compute
// resource's mounts, then the worker's own volumes; the working directory,
// the network, the app's published port and the user.
func (r *Runner) placeArgs(job *runner.Job) ([]string, error) {
	t := job.Task
	args := []string{"-v", job.Dir + ":" + job.Dir}
	for _, m := range t.Mounts {
		// The control plane checked them; checked again here so that a
		// malformed one fails the task with a reason instead of reaching
		// docker.
		if err := runenv.CheckMount(m); err != nil {
			return nil, fmt.Errorf("the compute resource's mounts: %w", err)
		}
		args = append(args, "-v", m)
	}
	for _, v := range r.opts.Volumes {
		args = append(args, "-v", v)
	}
	base := filepath.Join(job.Dir, "work")
	if t.Repository != "" {
		base = filepath.Join(job.Dir, "src")
	}
	wd := base
	if t.WorkingDir != "" {
		if filepath.IsAbs(t.WorkingDir) {
			wd = t.WorkingDir
		} else {
			wd = filepath.Join(base, filepath.Clean("/"+t.WorkingDir))
		}
	}
	args = append(args, "-w", wd)
	if r.opts.Network != "" {
		args = append(args, "--network", r.opts.Network)
	}
	if t.App != nil {
		// The app listens on its own port in the container; the worker
		// reaches (and reports) it on the host port it picked.
		args = append(args, "-p", net.JoinHostPort(r.opts.PublishHost, strconv.Itoa(job.AppPort))+":"+strconv.Itoa(t.App.Port)+"/tcp")
	}
	if r.opts.User != "" {
		args = append(args, "--user", r.opts.User)
	}
	return args, nil
}

// envArgs passes the task's variables, in name order: by name only (-e
// NAME), their values in the docker CLI's environment (env), so secrets
// never show in `ps`; those the CLI reads itself (inArgv) with their value.
func (r *Runner) envArgs(vars map[string]string) (args []string, env []string) {
	env = append([]string(nil), r.opts.BaseEnv...)
	names := make([]string, 0, len(vars))
	for k := range vars {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if inArgv(k) {
			args = append(args, "-e", k+"="+vars[k])
			continue
		}
		args = append(args, "-e", k)
		env = setEnv(env, k, vars[k])
	}
	return args, env
}

// commandArgs are what the container runs, after the image: the task's
// command, or python on its entry point; an app instance runs its image
// with the app's container args (none: the image's own command; its
// process line is for process mode). Packages are installed first.
func commandArgs(job *runner.Job) []string {
	t := job.Task
	var args []string
	argv := t.Command
	switch {
	case t.App != nil:
		argv = t.App.Args
	case len(argv) == 0:
		argv = []string{"python", t.EntryPoint}
	}
	if len(t.Packages) > 0 {
		// Install the task's packages in the container, then run it.
		args = append(args, "sh", "-c",
			`python -m pip install --disable-pip-version-check --no-input -r "$0" && exec "$@"`,
			filepath.Join(job.Dir, "requirements.txt"))
	}
	return append(args, argv...)
}
