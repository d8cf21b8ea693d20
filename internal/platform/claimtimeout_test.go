package platform_test

import (
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/platform"
	"github.com/klique-ai/klique/internal/platform/platformtest"
)

// TestPoolClaimTimeoutOverGraphQLInput sets a pool's claim timeout the way
// createPool and updatePool do, with the estate file's rules.
func TestPoolClaimTimeoutOverGraphQLInput(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, b *testBundle) {
		b.ApplyExample(t)
		claim := func() *time.Duration {
			t.Helper()
			e, err := b.Svc.Estate(b.Admin)
			platformtest.Must(t, err)
			return e.PoolByName("bare-metal").ClaimTimeout
		}
		_, err := b.Svc.UpdatePool(b.Admin, "bare-metal", platform.PoolInput{ClaimTimeoutSeconds: ptr(120)})
		platformtest.Must(t, err)
		if got := claim(); got == nil || *got != 2*time.Minute {
			t.Fatalf("claim timeout %v, want 2m", got)
		}
		pw, err := b.Svc.PoolWorkersOf(b.Admin, b.pool(t, "bare-metal"))
		platformtest.Must(t, err)
		if s := pw.ClaimTimeoutSeconds(); s == nil || *s != 120 || pw.NoWorker() == nil ||
			*pw.NoWorker() != "no worker of pool bare-metal is online (none has registered)" {
			t.Fatalf("worker status %+v", pw)
		}

		before := b.snapshot(t)
		_, err = b.Svc.UpdatePool(b.Admin, "bare-metal", platform.PoolInput{ClaimTimeoutSeconds: ptr(30)})
		platformtest.WantError(t, err, platform.CodeInvalid, "claimTimeout 30s must be whole seconds from 1m to 168h, or off")
		b.unchanged(t, before)

		_, err = b.Svc.UpdatePool(b.Admin, "bare-metal", platform.PoolInput{ClaimTimeoutSeconds: ptr(-1)})
		platformtest.Must(t, err)
		if got := claim(); got != nil {
			t.Fatalf("claim timeout %v, want the default", *got)
		}
	})
}

func (b *testBundle) pool(t *testing.T, name string) string {
	t.Helper()
	e, err := b.Svc.Estate(b.Admin)
	platformtest.Must(t, err)
	return e.PoolByName(name).ID
}
