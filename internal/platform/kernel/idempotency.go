package kernel

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
)

// Idempotency keys: a client that timed out cannot tell whether its create
// was done, so it sends it again with the same key, and gets the first
// result instead of a second object. The rule lives here once; each
// creating operation calls Idempotency before its write, Replay to answer
// a retry, and Txn.RecordIdempotency in the write that creates the object,
// so that the record and the object commit together. Concurrent retries
// race on the record's primary key (tenant, user, operation, key): one
// commits, the others roll back and answer as a retry.

// IdempotencyTTL is how long a key is kept: a retry within it returns the
// first result. Keys are pruned after it (PruneIdempotencyKeys).
const IdempotencyTTL = 24 * time.Hour

// MaxIdempotencyKey bounds a key's length.
const MaxIdempotencyKey = 255

type idempotencyKeyCtx struct{}

// WithIdempotencyKey carries a request's Idempotency-Key header to the
// creating operations it runs, for those whose input names no key.
func WithIdempotencyKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, idempotencyKeyCtx{}, key)
}

// Idem is an idempotency key made ready for one operation of one caller.
type Idem struct {
	p         *identity.Principal
	operation string
	key       string
	hash      string
}

// Idempotency prepares the key of a creating operation: key (the input's),
// or else the request's header, or none (nil). request is what the key
// must always come with: a digest of it tells a retry from a different
// request.
func Idempotency(ctx context.Context, p *identity.Principal, operation, key string, request any) (*Idem, error) {
	if key == "" {
		key, _ = ctx.Value(idempotencyKeyCtx{}).(string)
	}
	if key == "" {
		return nil, nil
	}
	if len(key) > MaxIdempotencyKey {
		return nil, Invalid("an idempotency key is at most %d bytes; a UUID will do", MaxIdempotencyKey)
	}
	for _, c := range key {
		if c <= ' ' || c > '~' {
			return nil, Invalid("idempotency key %q: use printable ASCII without spaces, such as a UUID", key)
		}
	}
	b, err := json.Marshal(request)
	if err != nil {
		return nil, fmt.Errorf("digest the request of idempotency key %s: %w", key, err)
	}
	sum := sha256.Sum256(b)
	return &Idem{p: p, operation: operation, key: key, hash: hex.EncodeToString(sum[:])}, nil
}

// Replay returns the id of what the key's first request created, "" when
// the key is new (or i is nil), and a CONFLICT when the key was used for a
// different request.
func (k *Kernel) Replay(ctx context.Context, i *Idem) (string, error) {
	if i == nil {
		return "", nil
	}
	rec, err := k.Store.GetIdempotencyKey(ctx, i.p.TenantID, i.p.UserID, i.operation, i.key)
	if errors.Is(err, store.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", k.Internal(ctx, fmt.Errorf("read idempotency key %s: %w", i.key, err))
	}
	if rec.RequestHash != i.hash {
		return "", Conflict("idempotency key %s was used for a different request (%s at %s): send a new key for a new request",
			Quote(i.key), i.operation, rec.CreatedAt.UTC().Format(time.RFC3339))
	}
	return rec.ResultID, nil
}

// ErrIdempotencyRace is what a write returns when another request with
// the same key committed first: the write is rolled back and the caller
// answers with Replay.
var ErrIdempotencyRace = &Error{Code: CodeConflict, Message: "another request with this idempotency key was done first"}

// RecordIdempotency records the key of the write's request with the id of
// what it created, in the write's transaction. Nil i records nothing.
func (t *Txn) RecordIdempotency(i *Idem, resultID string) error {
	if i == nil {
		return nil
	}
	err := t.Q.CreateIdempotencyKey(t.Ctx, &model.IdempotencyKey{TenantID: i.p.TenantID, UserID: i.p.UserID,
		Operation: i.operation, Key: i.key, RequestHash: i.hash, ResultID: resultID, CreatedAt: t.Now})
	if errors.Is(err, store.ErrConflict) {
		return ErrIdempotencyRace
	}
	return err
}

// PruneIdempotencyKeys deletes the keys older than IdempotencyTTL, in
// every tenant. The engine's maintenance calls it periodically.
func (k *Kernel) PruneIdempotencyKeys(ctx context.Context) (int64, error) {
	n, err := k.Store.PruneIdempotencyKeys(ctx, k.Now().Add(-IdempotencyTTL))
	if err != nil {
		return 0, fmt.Errorf("prune idempotency keys: %w", err)
	}
	return n, nil
}
