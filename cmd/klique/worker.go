package main

import (
	"os"
	"strings"
	"time"

	"github.com/klique-ai/klique/internal/cli"

	"github.com/spf13/cobra"

	"github.com/klique-ai/klique/agents"
	"github.com/klique-ai/klique/internal/version"
)

func newWorkerCmd(c *cli.CLI) *cobra.Command {
	var o agents.Options
	var pool, tokenFile string
	var logs logFlags
	tunnel := true
	var labels []string
	cmd := &cobra.Command{
		Use:   "worker --pool NAME [--server URL] --token-file FILE",
		Short: "Run the worker daemon of a pool on this host",
		Long: `Run the worker daemon on a GPU host (bare metal or a VM with GPU passthrough).
It connects out to the control plane with the pool's worker credential, pulls
the tasks placed on its pool, runs them on the GPUs it owns, streams their
logs and metrics home, and reports their end.

In process mode (the default) a task runs natively: a command in a fresh
directory, or a repository cloned at its recorded commit with its uncommitted
changes applied, in a Python virtual environment with its packages. Run as
root, the worker gives each task a uid of its own (--task-uids, or its
owner's account from --user-map), so that no task reads another's
environment or files; a worker that cannot (not root, or --run-as one user)
runs tasks of one project at a time unless the pool is single-tenant. In docker
mode it runs in a container of its image, and fractions of a GPU run as
memory-capped shares.

On SIGTERM the worker stops claiming, stops its tasks (SIGTERM, the grace
period, SIGKILL) and reports them preempted, so they are requeued at the
front of their compute resource.

The worker records each running task (its process group or container) in a
state directory (--state-dir, default WORK-DIR/state). Restarted after a
crash or kill -9, it first stops whatever its earlier run left running, and
never hands out the GPUs of what it could not stop. See docs/worker.md.

The worker keeps one outbound connection to the control plane, its tunnel,
through which the control plane and its router reach the worker's app
instances when nothing can connect into the worker's site; --tunnel=false
turns it off. See docs/apps.md.`,
		Example: `  klique worker --pool bare-metal --server https://klique.corp --token-file /etc/klique/worker.token
  klique worker --pool bare-metal --server http://127.0.0.1:8080 --token-file worker.token --gpus 0,1 --work-dir /tmp/kw
  klique worker --pool shared-a100 --server https://klique.corp --token-file worker.token --mode docker --gpus 0-3 --gpu-memory-mb 81920
  klique worker --kind kubernetes --pool k8s-a100 --server https://klique.corp --token-file /etc/klique/token --gpus 0-15 --pod-template /etc/klique/pod-template.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			server, token, err := agentEndpoint(c, tokenFile)
			if err != nil {
				return err
			}
			o.Server, o.Token, o.Pool, o.NoTunnel = server, token, pool, !tunnel
			if o.Labels, err = agents.ParseLabels(labels); err != nil {
				return cli.Usage(err)
			}
			if o.Grace < 0 {
				return cli.Usagef("--grace must not be negative")
			}
			if o.Log, err = logs.logger(c.Err); err != nil {
				return err
			}
			o.Version = version.String()
			w, err := agents.NewWorker(cmd.Context(), o)
			if err != nil {
				return optionError(err)
			}
			return runDaemon(cmd.Context(), "worker", w.Run)
		},
	}
	f := cmd.Flags()
	f.StringVar(&pool, "pool", "", "the pool this worker serves (checked against the credential's pool)")
	f.StringVar(&tokenFile, "token-file", "", "file holding the pool's worker credential (or $KLIQUE_WORKER_TOKEN)")
	f.StringVar(&o.Kind, "kind", agents.KindBareMetal, "environment: bare_metal, or kubernetes (a controller that renders each task as a pod; see docs/kubernetes.md)")
	f.StringVar(&o.Mode, "mode", "process", "how tasks run: process (virtual environments on the host) or docker")
	f.StringVar(&o.GPUs, "gpus", "", "GPUs this worker owns, such as 0,1,2,3 or 0-3 (default: every GPU nvidia-smi lists)")
	f.IntVar(&o.GPUMemoryMB, "gpu-memory-mb", 0, "memory of each GPU in MB, when nvidia-smi cannot tell (fractions need it)")
	f.StringVar(&o.WorkDir, "work-dir", "klique-worker", "directory for task directories, the log spool and cached Python environments")
	f.StringVar(&o.StateDir, "state-dir", "", "directory recording the tasks this worker runs, so a restarted worker stops what a killed one left running (default: WORK-DIR/state); one per worker")
	f.DurationVar(&o.Grace, "grace", 30*time.Second, "time a stopped task gets between SIGTERM and SIGKILL")
	f.StringVar(&o.AppHost, "app-host", "", "host of app instances' addresses as the site reaches this machine (default 127.0.0.1)")
	f.DurationVar(&o.AppStartTimeout, "app-start-timeout", 10*time.Minute, "time an app instance has to answer on its health path before it is stopped and reported failed")
	f.BoolVar(&tunnel, "tunnel", true, "keep a tunnel to the control plane, through which it reaches this worker's app instances; --tunnel=false when it reaches them directly")
	f.StringVar(&o.RunAs, "run-as", "", "run every task as this user (the worker must run as root); tasks then share it, so the worker runs tasks of one project at a time unless the pool is single-tenant")
	f.StringVar(&o.TaskUIDs, "task-uids", "", "uids a worker running as root gives its tasks, one each, as FIRST-LAST (default 20000-20999 when root; off: none); no account may use them, and each worker on a host needs its own range")
	f.StringVar(&o.UserMap, "user-map", "", "YAML file mapping platform users to Linux accounts (users: {alice: alice}, default: ACCOUNT), as hpc-submitter reads it: a mapped user's tasks run as their account (process mode, as root)")
	f.StringSliceVar(&labels, "labels", nil, "labels describing this worker, key=value[,key=value]")
	f.StringVar(&o.Name, "name", "", "name of this worker (default: the host name); give each worker on one host its own")
	f.StringVar(&o.Python, "python", "python3", "Python interpreter for entry points and virtual environments (process mode)")
	f.StringArrayVar(&o.PipArgs, "pip-arg", nil, "extra argument for pip install, repeatable (such as --index-url=URL)")
	f.StringVar(&o.DockerImage, "docker-image", "", "image for tasks that name none (docker mode)")
	f.StringArrayVar(&o.DockerVolumes, "docker-volume", nil, "extra mount for every container, as docker -v writes it, repeatable")
	f.StringVar(&o.DockerNetwork, "docker-network", "", "network of the containers, such as host (docker mode)")
	f.StringArrayVar(&o.DockerArgs, "docker-arg", nil, "extra docker run argument, repeatable (docker mode)")
	f.StringVar(&o.MPSPipeDir, "mps-pipe-dir", "", "CUDA MPS pipe directory shared with fractional containers, so MPS enforces their memory cap")
	f.StringVar(&o.Namespace, "namespace", "", "namespace of the task pods (kubernetes; default: the worker pod's own)")
	f.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig file (kubernetes; default: the in-cluster service account)")
	f.StringVar(&o.PodTemplate, "pod-template", "", "YAML file with the pool's base pod: node selectors, tolerations, volumes; its first container runs the task (kubernetes)")
	f.DurationVar(&o.PendingTimeout, "pending-timeout", 10*time.Minute, "end a task whose pods have not all started in this time, with the scheduler's reason (kubernetes)")
	f.StringVar(&o.GPUResource, "gpu-resource", "nvidia.com/gpu", "resource a task's GPUs are counted in, such as nvidia.com/mig-1g.10gb for MIG slices (kubernetes)")
	f.StringVar(&o.FractionResource, "fraction-resource", "", "extended resource, in MiB of GPU memory, that a fraction of a GPU asks for; empty: no fractions (kubernetes)")
	f.StringVar(&o.NvidiaSMI, "nvidia-smi", "", "nvidia-smi executable (default: nvidia-smi on PATH)")
	logs.add(f, true)
	return cmd
}

// agentEndpoint is the control plane and the worker credential every daemon
// of a pool (worker, HPC submitter, autoscaler) starts with: --server,
// $KLIQUE_SERVER, or on the machine someone signed in from, the control
// plane they signed in to; --token-file or $KLIQUE_WORKER_TOKEN.
func agentEndpoint(c *cli.CLI, tokenFile string) (server, token string, err error) {
	server = cli.FirstNonEmpty(c.Server, os.Getenv("KLIQUE_SERVER"))
	if server == "" {
		if cfg, err := cli.LoadConfig(); err == nil {
			server = cfg.Server
		}
	}
	if server == "" {
		return "", "", cli.Usagef("say which control plane with --server URL (or set KLIQUE_SERVER)")
	}
	token = os.Getenv("KLIQUE_WORKER_TOKEN")
	if tokenFile != "" {
		b, err := os.ReadFile(tokenFile)
		if err != nil {
			return "", "", cli.Usagef("--token-file: %v", err)
		}
		token = strings.TrimSpace(string(b))
	}
	if token == "" {
		return "", "", cli.Usagef("give the pool's worker credential with --token-file FILE (or $KLIQUE_WORKER_TOKEN)")
	}
	return server, token, nil
}
