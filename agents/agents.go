package agents

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/klique-ai/klique/agents/client"
	"github.com/klique-ai/klique/agents/gpu"
	"github.com/klique-ai/klique/agents/hostuser"
	"github.com/klique-ai/klique/agents/runner"
	"github.com/klique-ai/klique/agents/runner/docker"
	"github.com/klique-ai/klique/agents/runner/hpc"
	"github.com/klique-ai/klique/agents/runner/process"
	"github.com/klique-ai/klique/agents/runner/state"
	"github.com/klique-ai/klique/agents/worker"
	"github.com/klique-ai/klique/internal/agentapi"
)

// KindBareMetal is a worker on a host (process or Docker mode); the other
// kind `klique worker` runs is KindKubernetes. HPC clusters have the HPC
// submitter (`klique hpc-submitter`), cloud pools the autoscaler.
const KindBareMetal = "bare_metal"

// Options are what `klique worker` is given.
type Options struct {
	// Server is the control plane's URL; Token the worker credential.
	Server, Token string
	// Pool is the pool the operator expects the credential to be for.
	Pool string
	// Kind is the environment (bare_metal).
	Kind string
	// Mode is process (virtual environments) or docker.
	Mode string
	// GPUs declares the GPUs ("0,1,2,3" or "0-3"); empty: ask nvidia-smi.
	GPUs string
	// GPUMemoryMB is each GPU's memory when declared.
	GPUMemoryMB int
	// NvidiaSMI is the nvidia-smi executable (default: on PATH).
	NvidiaSMI string
	// WorkDir holds task directories, the log spool and cached
	// environments.
	WorkDir string
	// StateDir records the work the worker's runner started (a process
	// group or a container per running attempt), so that a worker
	// restarted after SIGKILL stops what its earlier run left before it
	// claims anything (default: WorkDir/state).
	StateDir string
	// Grace is the time between SIGTERM and SIGKILL when a task is stopped.
	Grace time.Duration
	// AppHost is the host in an app instance's reported address: how the
	// worker's site reaches this machine (default 127.0.0.1).
	// AppStartTimeout bounds how long an instance has to answer on its
	// health path (default 10 min).
	AppHost         string
	AppStartTimeout time.Duration
	// NoTunnel: the worker holds no tunnel to the control plane
	// (--tunnel=false); its app instances are reached only directly.
	NoTunnel bool
	// RunAs runs tasks as this user (the daemon must run as root): every
	// task then shares it, and the worker runs tasks of one project at a
	// time (unless the pool is single-tenant).
	RunAs string
	// TaskUIDs is the range of uids a worker running as root gives its
	// tasks in process mode, one each (FIRST-LAST; "" takes
	// hostuser.Default when the worker runs as root without RunAs;
	// "off" gives none). UserMap, when set, is a YAML file mapping
	// platform users to Linux accounts (as the HPC submitters read it): a
	// mapped user's tasks run as their account instead.
	TaskUIDs string
	UserMap  string
	// Labels describe the worker; in docker mode each container carries
	// them too.
	Labels map[string]string
	// Name names the worker (default: the host name).
	Name string
	// Python and PipArgs shape virtual environments (process mode).
	Python  string
	PipArgs []string
	// Docker mode: the default image, extra mounts, the network, the CUDA
	// MPS pipe directory for fractions, and extra docker run arguments.
	DockerImage   string
	DockerVolumes []string
	DockerNetwork string
	DockerArgs    []string
	MPSPipeDir    string
	// Kubernetes (--kind kubernetes): the namespace of the task pods (else
	// the worker pod's own), a kubeconfig (else the in-cluster service
	// account), the pool's pod template, how long a task may stay pending,
	// the GPU resource (nvidia.com/gpu or a MIG profile) and the extended
	// resource of fractions. KubeClient replaces the API client (tests).
	Namespace        string
	Kubeconfig       string
	PodTemplate      string
	PendingTimeout   time.Duration
	GPUResource      string
	FractionResource string
	KubeClient       kubernetes.Interface
	Version          string
	Log              *slog.Logger
	// Tune, when set, adjusts the worker's configuration last (tests use
	// it for short intervals).
	Tune func(*worker.Config)
}

// NewWorker builds a worker daemon from opts: its GPUs, its runner and its
// client.
func NewWorker(ctx context.Context, opts Options) (*worker.Worker, error) {
	if opts.Kind == "" {
		opts.Kind = KindBareMetal
	}
	if opts.Kind != KindBareMetal && opts.Kind != KindKubernetes {
		return nil, fmt.Errorf("--kind %s: this worker runs on bare metal and VMs (bare_metal) or in a Kubernetes cluster (kubernetes); Slurm, PBS and LSF have `klique hpc-submitter`", opts.Kind)
	}
	if opts.Server == "" {
		return nil, errors.New("no control plane: give --server URL (or set KLIQUE_SERVER)")
	}
	if opts.Token == "" {
		return nil, errors.New("no worker credential: give --token-file FILE (an admin creates one for the pool)")
	}
	if opts.WorkDir == "" {
		opts.WorkDir = "klique-worker"
	}
	wd, err := filepath.Abs(opts.WorkDir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(wd, 0o755); err != nil {
		return nil, fmt.Errorf("work directory: %w", err)
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Name == "" {
		if opts.Name, err = os.Hostname(); err != nil {
			return nil, err
		}
	}
	if opts.Kind == KindKubernetes && opts.GPUs == "" {
		// The cluster's GPUs are not this host's: nvidia-smi cannot count
		// them.
		return nil, errors.New("--kind kubernetes: declare how many GPUs of the cluster this worker may hold at once with --gpus, such as 0-15 for 16")
	}
	smi := gpu.SMI{Path: opts.NvidiaSMI}
	gpus, err := gpu.Resolve(ctx, smi, opts.GPUs, opts.GPUMemoryMB)
	if err != nil {
		return nil, err
	}

	var pu *process.User
	dockerUser := ""
	if opts.RunAs != "" {
		if os.Geteuid() != 0 {
			return nil, fmt.Errorf("--run-as %s: the worker must run as root to run tasks as another user", opts.RunAs)
		}
		if pu, err = lookupUser(opts.RunAs); err != nil {
			return nil, err
		}
		dockerUser = fmt.Sprintf("%d:%d", pu.UID, pu.GID)
	}
	taskUIDs, userMap, err := taskUsers(opts)
	if err != nil {
		return nil, err
	}
	if opts.StateDir == "" {
		opts.StateDir = filepath.Join(wd, "state")
	}
	sd, err := filepath.Abs(opts.StateDir)
	if err != nil {
		return nil, fmt.Errorf("--state-dir: %w", err)
	}
	st := state.New(sd)
	var r runner.Runner
	switch {
	case opts.Kind == KindKubernetes:
		if opts.Mode != "" && opts.Mode != agentapi.ModePod && opts.Mode != agentapi.ModeProcess {
			return nil, fmt.Errorf("--mode %s: a kubernetes worker runs every task as a pod; leave --mode out", opts.Mode)
		}
		kr, err := newKubeRunner(opts)
		if err != nil {
			return nil, err
		}
		r = kr
	case opts.Mode == "" || opts.Mode == agentapi.ModeProcess:
		r = process.New(process.Options{Python: opts.Python, VenvCache: filepath.Join(wd, "venvs"), PipArgs: opts.PipArgs, User: pu, State: st})
	case opts.Mode == agentapi.ModeDocker:
		args := append([]string(nil), opts.DockerArgs...)
		keys := make([]string, 0, len(opts.Labels))
		for k := range opts.Labels {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			args = append(args, "--label", k+"="+opts.Labels[k])
		}
		r = docker.New(docker.Options{Instance: opts.Name, DefaultImage: opts.DockerImage, Volumes: opts.DockerVolumes,
			Network: opts.DockerNetwork, User: dockerUser, MPSPipeDir: opts.MPSPipeDir, ExtraArgs: args, State: st,
			PublishHost: publishHost(opts.AppHost)})
	default:
		return nil, fmt.Errorf("--mode %s: use process or docker", opts.Mode)
	}

	cl := client.New(opts.Server, opts.Token)
	cl.UserAgent = "klique-worker/" + opts.Version
	cl.Log = opts.Log
	cfg := worker.Config{
		Client: cl, Runner: r, GPUs: gpus, Pool: opts.Pool, Hostname: opts.Name, Version: opts.Version,
		Kind: opts.Kind, Labels: opts.Labels, WorkDir: wd, Grace: opts.Grace, Log: opts.Log, SMI: smi,
		// In a cluster the scheduler places the pods: the worker counts.
		Placed: opts.Kind == KindKubernetes, State: st,
		AppHost: opts.AppHost, AppStartTimeout: opts.AppStartTimeout, NoTunnel: opts.NoTunnel,
		TaskUIDs: taskUIDs, TaskUIDsByDefault: opts.TaskUIDs == "" && opts.UserMap == "",
	}
	if userMap != nil {
		cfg.UserMap = userMap
	}
	if opts.Tune != nil {
		opts.Tune(&cfg)
	}
	return worker.New(cfg)
}

// taskUsers reads --task-uids and --user-map: a worker running as root in
// process mode gives each task a uid of its own by default; one that runs
// tasks --run-as one user, or is not root, gives none.
func taskUsers(opts Options) (*hostuser.Range, *hpc.UserMap, error) {
	process := opts.Kind == KindBareMetal && (opts.Mode == "" || opts.Mode == agentapi.ModeProcess)
	switch {
	case opts.TaskUIDs == "off":
		if opts.UserMap != "" {
			return nil, nil, errors.New("--user-map gives tasks their owners' accounts, which needs per-task users: leave out --task-uids off")
		}
		return nil, nil, nil
	case opts.RunAs != "" && (opts.TaskUIDs != "" || opts.UserMap != ""):
		return nil, nil, errors.New("--run-as runs every task as one user; --task-uids and --user-map give each its own: give one or the other")
	case !process || opts.RunAs != "":
		return nil, nil, nil
	case opts.TaskUIDs == "" && os.Geteuid() != 0:
		if opts.UserMap != "" {
			return nil, nil, errors.New("--user-map: running tasks as their owners' accounts needs the worker to run as root")
		}
		return nil, nil, nil
	}
	r := hostuser.Default
	if opts.TaskUIDs != "" {
		var err error
		if r, err = hostuser.ParseRange(opts.TaskUIDs); err != nil {
			return nil, nil, err
		}
	}
	if opts.UserMap == "" {
		return &r, nil, nil
	}
	m, err := hpc.LoadUserMap(opts.UserMap)
	if err != nil {
		return nil, nil, fmt.Errorf("--user-map: %w", err)
	}
	return &r, m, nil
}

func lookupUser(name string) (*process.User, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("--run-as %s: %w", name, err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("--run-as %s: not a numeric uid/gid (%s:%s)", name, u.Uid, u.Gid)
	}
	pu := &process.User{Name: u.Username, UID: uint32(uid), GID: uint32(gid), Home: u.HomeDir}
	if ids, err := u.GroupIds(); err == nil {
		for _, id := range ids {
			if g, err := strconv.ParseUint(id, 10, 32); err == nil {
				pu.Groups = append(pu.Groups, uint32(g))
			}
		}
	}
	return pu, nil
}

// ParseLabels reads k=v pairs, separated by commas or given one by one.
func ParseLabels(list []string) (map[string]string, error) {
	out := map[string]string{}
	for _, item := range list {
		for _, kv := range strings.Split(item, ",") {
			kv = strings.TrimSpace(kv)
			if kv == "" {
				continue
			}
			k, v, ok := strings.Cut(kv, "=")
			if !ok || strings.TrimSpace(k) == "" {
				return nil, fmt.Errorf("--labels %q: write labels as key=value", kv)
			}
			out[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return out, nil
}

// publishHost is where docker mode publishes app instances' ports: on the
// address the site reaches this machine at when --app-host is one, on
// every address when it is a name, on loopback by default.
func publishHost(appHost string) string {
	switch {
	case appHost == "":
		return "127.0.0.1"
	case net.ParseIP(appHost) != nil:
		return appHost
	}
	return "0.0.0.0"
}
