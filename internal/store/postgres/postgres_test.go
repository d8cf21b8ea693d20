package postgres_test

import (
	"sync"
	"testing"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/pgtest"
	"github.com/klique-ai/klique/internal/store/postgres"
	"github.com/klique-ai/klique/internal/store/storetest"
)

func open(t *testing.T, url string) store.Store {
	t.Helper()
	s, err := postgres.Open(t.Context(), url)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return s
}

func TestConformance(t *testing.T) {
	t.Parallel()
	pgtest.RequirePostgres(t)
	storetest.Exercise(t, func(t *testing.T) store.Store {
		return open(t, pgtest.RequirePostgresURL(t))
	})
}

func TestReplicasOpeningTogetherMigrateOnce(t *testing.T) {
	t.Parallel()
	url := pgtest.RequirePostgresURL(t)
	const replicas = 6
	stores := make([]store.Store, replicas)
	errs := make([]error, replicas)
	var wg sync.WaitGroup
	for i := range replicas {
		wg.Go(func() { stores[i], errs[i] = postgres.Open(t.Context(), url) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("replica %d: %v", i, err)
		}
		t.Cleanup(func() { _ = stores[i].Close() })
	}
	// Every replica sees one schema: what one writes, another reads.
	tn := &model.Tenant{Name: "acme"}
	if err := stores[0].CreateTenant(t.Context(), tn); err != nil {
		t.Fatal(err)
	}
	got, err := stores[replicas-1].GetTenantByName(t.Context(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != tn.ID {
		t.Fatalf("tenant id %q, want %q", got.ID, tn.ID)
	}
}

func TestReopeningKeepsData(t *testing.T) {
	t.Parallel()
	url := pgtest.RequirePostgresURL(t)
	s1, err := postgres.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	if err := s1.PutSetting(t.Context(), "k", "v"); err != nil {
		t.Fatal(err)
	}
	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := open(t, url)
	v, err := s2.GetSetting(t.Context(), "k")
	if err != nil || v != "v" {
		t.Fatalf("GetSetting = %q, %v; want \"v\"", v, err)
	}
}

func TestSchemasAreIsolated(t *testing.T) {
	t.Parallel()
	a := open(t, pgtest.RequirePostgresURL(t))
	b := open(t, pgtest.RequirePostgresURL(t))
	if err := a.PutSetting(t.Context(), "k", "v"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.GetSetting(t.Context(), "k"); err == nil {
		t.Fatal("a setting in one test schema shows in another")
	}
}
