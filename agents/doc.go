// Package agents holds the parts of Klique that run in the estate and pull
// work for a pool over outbound HTTPS: the worker daemon and its runners
// today (bare metal, process and Docker modes, issue 5), and the
// Kubernetes, HPC and cloud agents next (issue 8).
//
// The pieces:
//
//	agents/client          the worker side of the agent protocol (internal/agentapi)
//	agents/worker          the daemon loop, written once for every environment
//	agents/runner          the one interface every environment implements
//	agents/runner/process  virtual-environment mode: a process group on the host
//	agents/runner/docker   Docker mode: a container, whole GPUs or a memory-capped share
//	agents/gpu             nvidia-smi: the host's GPUs and their utilization
//
// This package assembles them from the options of `klique worker`.
package agents
