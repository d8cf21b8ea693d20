// Package agents holds the parts of Klique that run in the estate and pull
// work for a pool over outbound HTTPS: the worker daemon and its runners
// (a process or a Docker container on a host, a pod from a template on
// Kubernetes), the HPC submitter (Slurm, PBS, LSF batch jobs), and the
// cloud autoscaler that starts instances whose workers claim the work.
//
// The pieces:
//
//	agents/client          the worker side of the agent protocol (internal/agentapi)
//	agents/worker          the daemon loop, written once for every environment
//	agents/runner          the one interface every environment implements
//	agents/runner/process  virtual-environment mode: a process group on the host
//	agents/runner/docker   Docker mode: a container, whole GPUs or a memory-capped share
//	agents/runner/kube     Kubernetes: each task a pod rendered from a template
//	agents/runner/hpc      the HPC submitter's runner: a batch job per task (Slurm, PBS, LSF)
//	agents/autoscaler      cloud pools: instances started and stopped for the work placed there
//	agents/gpu             nvidia-smi: the host's GPUs and their utilization
//
// This package assembles the worker from the options of `klique worker`
// (bare metal or Kubernetes); cmd/klique assembles the HPC submitter and
// the autoscaler.
package agents
