package identity

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/netip"
)

// WorkerCredentialPrefix starts every worker credential, so that it is told
// apart from a user's API key at a glance and by secret scanners.
const WorkerCredentialPrefix = "kqw_"

// NewWorkerCredential makes a worker credential: shown once, stored as the
// SHA-256 of the whole secret (HashAPIKey), found again by that hash.
func NewWorkerCredential() (secret, prefix string, hash []byte, err error) {
	buf := make([]byte, apiKeyBytes)
	if _, err := rand.Read(buf); err != nil {
		return "", "", nil, fmt.Errorf("identity: generate worker credential: %w", err)
	}
	secret = WorkerCredentialPrefix + base62(buf)
	return secret, secret[:apiKeyDisplayLen+1], HashAPIKey(secret), nil
}

// Worker is the identity of a worker daemon: a worker credential, which
// belongs to one pool of one tenant. It never acts as a user.
type Worker struct {
	TenantID     string
	PoolID       string
	PoolName     string
	CredentialID string
}

type workerKey struct{}

// WithWorker returns a context carrying a worker identity.
func WithWorker(ctx context.Context, w *Worker) context.Context {
	return context.WithValue(ctx, workerKey{}, w)
}

// WorkerFrom returns the worker identity of the context.
func WorkerFrom(ctx context.Context) (*Worker, bool) {
	w, ok := ctx.Value(workerKey{}).(*Worker)
	return w, ok && w != nil
}

type peerKey struct{}

// WithPeer returns a context carrying the network address a request came
// from (its connection's remote IP). The router's address rule reads it:
// an app instance may be reached directly only in the network its
// worker's report came from (appnet.NewAllow).
func WithPeer(ctx context.Context, ip netip.Addr) context.Context {
	return context.WithValue(ctx, peerKey{}, ip)
}

// PeerFrom returns the address of WithPeer (invalid when none).
func PeerFrom(ctx context.Context) netip.Addr {
	ip, _ := ctx.Value(peerKey{}).(netip.Addr)
	return ip
}
