package identity

import (
	"context"
	"errors"
	"testing"
)

func TestAuthenticateCached(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	a := f.auth(nil)
	secret, key := f.key(t, f.alice, nil)

	p, err := a.AuthenticateCached(ctx, secret)
	if err != nil || p.UserName != "alice" {
		t.Fatalf("first check: %+v, %v", p, err)
	}
	p.UserName = "changed by the caller"
	if p2, _ := a.AuthenticateCached(ctx, secret); p2.UserName != "alice" {
		t.Fatal("a caller's change reached the cache")
	}

	// Revoked in the store: within CacheTTL the cached check still stands
	// (a change made through another replica)...
	must(t, f.st.RevokeAPIKey(ctx, f.tenant.ID, key.ID, f.clock.Now()))
	f.clock.Add(CacheTTL / 2)
	if _, err := a.AuthenticateCached(ctx, secret); err != nil {
		t.Fatalf("within the TTL: %v", err)
	}
	// ...and not after it.
	f.clock.Add(CacheTTL)
	if _, err := a.AuthenticateCached(ctx, secret); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("after the TTL: %v", err)
	}

	// A change made through this replica invalidates at once.
	other, _ := f.key(t, f.alice, nil)
	if _, err := a.AuthenticateCached(ctx, other); err != nil {
		t.Fatal(err)
	}
	f.alice.Disabled = true
	must(t, f.st.UpdateUser(ctx, f.alice))
	a.Invalidate()
	if _, err := a.AuthenticateCached(ctx, other); err == nil {
		t.Fatal("a disabled user's cached check survived Invalidate")
	}

	// Failures are not cached.
	if _, err := a.AuthenticateCached(ctx, "kq_nonsense"); err == nil {
		t.Fatal("nonsense accepted")
	}
}
