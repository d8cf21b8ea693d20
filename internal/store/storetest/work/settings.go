package work

import (
	"fmt"
	"sync"
	"testing"

	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/storetest/harness"
)

// Settings checks the store-wide settings, also when callers race to put one
// first.
func Settings(t *testing.T, setup harness.Setup) {
	setup.Run(t, "GetSetting returns ErrNotFound for an unset key", func(t *testing.T, b *harness.Bundle) {
		_, err := b.Store.GetSetting(b.Ctx, "engine.enabled")
		harness.WantErr(t, err, store.ErrNotFound)
	})

	setup.Run(t, "PutSetting stores a value and replaces it", func(t *testing.T, b *harness.Bundle) {
		harness.Must(t, b.Store.PutSetting(b.Ctx, "engine.enabled", "true"))
		harness.Must(t, b.Store.PutSetting(b.Ctx, "other", ""))
		got, err := b.Store.GetSetting(b.Ctx, "engine.enabled")
		harness.Must(t, err)
		harness.CheckEqual(t, "first value", got, "true")
		harness.Must(t, b.Store.PutSetting(b.Ctx, "engine.enabled", "false"))
		got, err = b.Store.GetSetting(b.Ctx, "engine.enabled")
		harness.Must(t, err)
		harness.CheckEqual(t, "replaced value", got, "false")
		got, err = b.Store.GetSetting(b.Ctx, "other")
		harness.Must(t, err)
		harness.CheckEqual(t, "empty value", got, "")
	})

	setup.Run(t, "PutSettingIfAbsent stores a value only when the key is unset and returns what is stored", func(t *testing.T, b *harness.Bundle) {
		got, err := b.Store.PutSettingIfAbsent(b.Ctx, "signing.key", "first")
		harness.Must(t, err)
		harness.CheckEqual(t, "first call", got, "first")
		got, err = b.Store.PutSettingIfAbsent(b.Ctx, "signing.key", "second")
		harness.Must(t, err)
		harness.CheckEqual(t, "second call", got, "first")
		stored, err := b.Store.GetSetting(b.Ctx, "signing.key")
		harness.Must(t, err)
		harness.CheckEqual(t, "stored", stored, "first")
	})

	t.Run("PutSettingIfAbsent called from 16 goroutines at once settles on one value", func(t *testing.T) {
		t.Parallel()
		b := setup(t, harness.OwnStore)
		const callers = 16
		var wg sync.WaitGroup
		got := make([]string, callers)
		errs := make([]error, callers)
		for i := range callers {
			wg.Go(func() {
				got[i], errs[i] = b.Store.PutSettingIfAbsent(b.Ctx, "signing.key", fmt.Sprintf("value-%d", i))
			})
		}
		wg.Wait()
		for i := range callers {
			harness.Must(t, errs[i])
			if got[i] != got[0] {
				t.Fatalf("caller %d got %q, caller 0 got %q", i, got[i], got[0])
			}
		}
		stored, err := b.Store.GetSetting(b.Ctx, "signing.key")
		harness.Must(t, err)
		harness.CheckEqual(t, "stored", stored, got[0])
	})
}
