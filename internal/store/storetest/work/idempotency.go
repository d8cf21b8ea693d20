package work

import (
	"sync"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/storetest/harness"
)

// IdempotencyKeys checks the record of a client's idempotency keys: one
// per tenant, user, operation and key, a second insert refused (also when
// racing), pruned by age.
func IdempotencyKeys(t *testing.T, setup harness.Setup) {
	key := func(b *harness.Bundle, tenant, user, op, k string, at time.Time) *model.IdempotencyKey {
		return &model.IdempotencyKey{TenantID: tenant, UserID: user, Operation: op, Key: k, RequestHash: "h-" + k, ResultID: "r-" + k, CreatedAt: at}
	}

	setup.Run(t, "a key is recorded once per tenant, user and operation", func(t *testing.T, b *harness.Bundle) {
		harness.Must(t, b.Store.CreateIdempotencyKey(b.Ctx, key(b, b.Tenant.ID, "u1", "enqueueTask", "k1", b.Now)))
		got, err := b.Store.GetIdempotencyKey(b.Ctx, b.Tenant.ID, "u1", "enqueueTask", "k1")
		harness.Must(t, err)
		harness.CheckEqual(t, "request hash", got.RequestHash, "h-k1")
		harness.CheckEqual(t, "result", got.ResultID, "r-k1")
		harness.CheckEqual(t, "created", got.CreatedAt.UTC(), b.Now.UTC().Truncate(time.Microsecond))
		again := key(b, b.Tenant.ID, "u1", "enqueueTask", "k1", b.At(1))
		again.ResultID = "other"
		harness.WantErr(t, b.Store.CreateIdempotencyKey(b.Ctx, again), store.ErrConflict)
		// The same key in another scope is another key.
		harness.Must(t, b.Store.CreateIdempotencyKey(b.Ctx, key(b, b.Tenant.ID, "u2", "enqueueTask", "k1", b.Now)))
		harness.Must(t, b.Store.CreateIdempotencyKey(b.Ctx, key(b, b.Tenant.ID, "u1", "cloneTask", "k1", b.Now)))
		harness.Must(t, b.Store.CreateIdempotencyKey(b.Ctx, key(b, b.Other.ID, "u1", "enqueueTask", "k1", b.Now)))
		_, err = b.Store.GetIdempotencyKey(b.Ctx, b.Other.ID, "u1", "enqueueTask", "k2")
		harness.WantErr(t, err, store.ErrNotFound)
	})

	t.Run("keys created before a time are pruned, in every tenant", func(t *testing.T) {
		t.Parallel()
		b := setup(t, harness.OwnStore)
		harness.Must(t, b.Store.CreateIdempotencyKey(b.Ctx, key(b, b.Tenant.ID, "u", "op", "old", b.At(0))))
		harness.Must(t, b.Store.CreateIdempotencyKey(b.Ctx, key(b, b.Other.ID, "u", "op", "old", b.At(0))))
		harness.Must(t, b.Store.CreateIdempotencyKey(b.Ctx, key(b, b.Tenant.ID, "u", "op", "new", b.At(10))))
		n, err := b.Store.PruneIdempotencyKeys(b.Ctx, b.At(5))
		harness.Must(t, err)
		harness.CheckEqual(t, "pruned", n, int64(2))
		_, err = b.Store.GetIdempotencyKey(b.Ctx, b.Tenant.ID, "u", "op", "old")
		harness.WantErr(t, err, store.ErrNotFound)
		_, err = b.Store.GetIdempotencyKey(b.Ctx, b.Tenant.ID, "u", "op", "new")
		harness.Must(t, err)
	})

	t.Run("16 transactions recording one key at once: one commits", func(t *testing.T) {
		t.Parallel()
		b := setup(t, harness.OwnStore)
		const callers = 16
		var wg sync.WaitGroup
		errs := make([]error, callers)
		for i := range callers {
			wg.Go(func() {
				errs[i] = b.Store.InTx(b.Ctx, func(q store.Queries) error {
					k := key(b, b.Tenant.ID, "u", "enqueueTask", "race", b.Now)
					k.ResultID = string(rune('a' + i))
					return q.CreateIdempotencyKey(b.Ctx, k)
				})
			})
		}
		wg.Wait()
		ok := 0
		for _, err := range errs {
			switch {
			case err == nil:
				ok++
			default:
				harness.WantErr(t, err, store.ErrConflict)
			}
		}
		harness.CheckEqual(t, "committed", ok, 1)
	})
}
