// Package faults is the fault suite: it builds the klique binary, runs
// `klique serve`, workers, Redis and PostgreSQL as real processes on
// loopback, breaks them (kill -9, SIGSTOP, restarts, outages longer than a
// lease) and checks that nothing acknowledged is lost and nothing runs
// twice. Its tests carry the build tag "faults" so that `make test` stays
// fast; `make test-faults` and .ci/run run them. docs/operations.md states
// the guarantees they back.
package faults
