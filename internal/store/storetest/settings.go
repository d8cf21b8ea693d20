package storetest

import (
	"fmt"
	"sync"
	"testing"

	"github.com/klique-ai/klique/internal/store"
)

func exerciseSettings(t *testing.T, setup setupFunc) {
	t.Run("GetSetting returns ErrNotFound for an unset key", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.store.GetSetting(b.ctx, "engine.enabled")
		wantErr(t, err, store.ErrNotFound)
	})

	t.Run("PutSetting stores a value and replaces it", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		must(t, b.store.PutSetting(b.ctx, "engine.enabled", "true"))
		must(t, b.store.PutSetting(b.ctx, "other", ""))
		got, err := b.store.GetSetting(b.ctx, "engine.enabled")
		must(t, err)
		checkEqual(t, "first value", got, "true")
		must(t, b.store.PutSetting(b.ctx, "engine.enabled", "false"))
		got, err = b.store.GetSetting(b.ctx, "engine.enabled")
		must(t, err)
		checkEqual(t, "replaced value", got, "false")
		got, err = b.store.GetSetting(b.ctx, "other")
		must(t, err)
		checkEqual(t, "empty value", got, "")
	})

	t.Run("PutSettingIfAbsent stores a value only when the key is unset and returns what is stored", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		got, err := b.store.PutSettingIfAbsent(b.ctx, "signing.key", "first")
		must(t, err)
		checkEqual(t, "first call", got, "first")
		got, err = b.store.PutSettingIfAbsent(b.ctx, "signing.key", "second")
		must(t, err)
		checkEqual(t, "second call", got, "first")
		stored, err := b.store.GetSetting(b.ctx, "signing.key")
		must(t, err)
		checkEqual(t, "stored", stored, "first")
	})

	t.Run("PutSettingIfAbsent called from 16 goroutines at once settles on one value", func(t *testing.T) {
		t.Parallel()
		b := setup(t, ownStore)
		const callers = 16
		var wg sync.WaitGroup
		got := make([]string, callers)
		errs := make([]error, callers)
		for i := range callers {
			wg.Go(func() {
				got[i], errs[i] = b.store.PutSettingIfAbsent(b.ctx, "signing.key", fmt.Sprintf("value-%d", i))
			})
		}
		wg.Wait()
		for i := range callers {
			must(t, errs[i])
			if got[i] != got[0] {
				t.Fatalf("caller %d got %q, caller 0 got %q", i, got[i], got[0])
			}
		}
		stored, err := b.store.GetSetting(b.ctx, "signing.key")
		must(t, err)
		checkEqual(t, "stored", stored, got[0])
	})
}
