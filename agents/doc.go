// Package agents will hold the worker daemon and its runners (process,
// Docker, Kubernetes), the HPC submitter and the cloud autoscaler: the parts
// that pull work for a pool over outbound HTTPS (issues 5 and 8). Nothing is
// implemented here yet.
package agents
