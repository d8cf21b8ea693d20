package sqlite_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/sqlite"
	"github.com/klique-ai/klique/internal/store/storetest"
)

func openFile(t *testing.T, path string) store.Store {
	t.Helper()
	s, err := sqlite.Open(t.Context(), path)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return s
}

func TestConformanceFile(t *testing.T) {
	t.Parallel()
	storetest.Exercise(t, func(t *testing.T) store.Store {
		return openFile(t, filepath.Join(t.TempDir(), "klique.db"))
	})
}

func TestConformanceMemory(t *testing.T) {
	t.Parallel()
	storetest.Exercise(t, func(t *testing.T) store.Store {
		return openFile(t, sqlite.Memory)
	})
}

func TestOpenCreatesTheDirectoryAndKeepsDataAcrossOpens(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "nested", "dir", "klique.db")
	ctx := context.Background()
	s1, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	tn := &model.Tenant{Name: "acme"}
	if err := s1.CreateTenant(ctx, tn); err != nil {
		t.Fatal(err)
	}
	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("database file: %v", err)
	}
	// Reopening runs no migration twice and finds the data.
	s2 := openFile(t, path)
	got, err := s2.GetTenantByName(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != tn.ID {
		t.Fatalf("tenant id %q, want %q", got.ID, tn.ID)
	}
}

func TestOpenFromSeveralGoroutinesMigratesOnce(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "klique.db")
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() {
			s, err := sqlite.Open(t.Context(), path)
			if err == nil {
				err = s.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
	}
}

func TestMemoryDatabasesArePrivate(t *testing.T) {
	t.Parallel()
	a := openFile(t, sqlite.Memory)
	b := openFile(t, sqlite.Memory)
	if err := a.PutSetting(t.Context(), "k", "v"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.GetSetting(t.Context(), "k"); err == nil {
		t.Fatal("a setting of one in-memory store shows in another")
	}
}

func TestOpenRejectsPathsTheDriverWouldMisread(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"", "a?b.db", "file:x.db"} {
		if s, err := sqlite.Open(t.Context(), p); err == nil {
			_ = s.Close()
			t.Errorf("Open(%q) succeeded", p)
		}
	}
}
