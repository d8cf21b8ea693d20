// Package platformtest builds a real control plane for tests, without
// HTTP: a fresh store, bootstrapped, with an authenticator, a vault and
// the platform service over them, signed in as the bootstrap admin.
//
// Every package that tests through the platform service (internal/platform
// itself, graph, mcp, engine/loop) used to build this by hand, each copy a
// little different. Here it is built once, the same way for all of them, so
// that a change to how the service is composed is made in one place and a
// test reads as what it checks rather than how it set up. Domain-specific
// helpers (a cast of users over the example estate, a worker driven by
// hand, an engine pass) stay in the packages that need them; this package
// holds only what more than one of them shares.
//
// The shape follows River's riverdrivertest: a Bundle of everything a test
// may touch, built by one setup call (New, SQLite, Postgres), and
// ForEachStore to run the same test against every store.
package platformtest

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/events"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
	"github.com/klique-ai/klique/internal/store"
	"github.com/klique-ai/klique/internal/store/pgtest"
	"github.com/klique-ai/klique/internal/store/postgres"
	"github.com/klique-ai/klique/internal/store/sqlite"
	"github.com/klique-ai/klique/internal/vault"
)

// Bundle is one platform service over a fresh, bootstrapped store, and the
// means to act as its users. Its fields are what a test may need to reach
// past the service: the store to seed or inspect rows the service does not
// expose, the authenticator to sign in or drop its caches, the logs to
// assert on.
type Bundle struct {
	Store store.Store
	Svc   *platform.Service
	Auth  *identity.Authenticator
	Vault *vault.Vault
	// Logs records what the service logged at warning level and above;
	// Logger writes into it, for servers a test builds over Svc.
	Logs   *LogRecorder
	Logger *slog.Logger
	// Bus is the service's event bus, with WithEvents; nil otherwise.
	Bus *events.Bus
	// Clock is the service's and the authenticator's clock, with
	// WithClock; nil otherwise (they use the wall clock).
	Clock *Clock

	// Admin acts as the bootstrap admin (platform admin of tenant
	// "default"), over the CLI channel; AdminSecret is its API key.
	Admin       context.Context
	AdminSecret string
	AdminID     string
	// Tenant is the id of the bootstrap tenant.
	Tenant string
}

// An Option changes how New builds a bundle. Each option builds its part
// afresh for every bundle, so the options given to ForEachStore never share
// a clock or a bus between the SQLite and the PostgreSQL runs.
type Option func(*config)

type config struct {
	events      bool
	start       time.Time
	noErrorLogs bool
	schedules   platform.ScheduleLimits
}

// WithEvents gives the service an in-process event bus (Bundle.Bus), for
// tests that subscribe to what the service publishes. Without it the
// service publishes nothing.
func WithEvents() Option { return func(c *config) { c.events = true } }

// WithClock gives the service and the authenticator a settable clock
// (Bundle.Clock) that starts at start and moves only when the test moves
// it, for tests about leases, budget periods or expiry.
func WithClock(start time.Time) Option { return func(c *config) { c.start = start } }

// NoErrorLogs fails the test when it ends if anything logged at error
// level through Bundle.Logger: a caller's mistake, however bad, is not a
// server error, and a channel under test must not log it as one.
func NoErrorLogs() Option { return func(c *config) { c.noErrorLogs = true } }

// WithScheduleLimits builds the service with limits on schedules, for
// tests of the caps.
func WithScheduleLimits(l platform.ScheduleLimits) Option {
	return func(c *config) { c.schedules = l }
}

// ForEachStore runs fn against SQLite and against PostgreSQL, each in a
// parallel subtest with a bundle and a store of its own. Without
// KLIQUE_TEST_DATABASE_URL the PostgreSQL run is skipped, unless CI=true:
// then it fails, so that CI cannot pass by skipping (pgtest decides).
func ForEachStore(t *testing.T, fn func(t *testing.T, b *Bundle), opts ...Option) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		fn(t, SQLite(t, opts...))
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		fn(t, Postgres(t, opts...))
	})
}

// SQLite is a bundle over a new SQLite database in t's temporary
// directory, for tests that are not about the store.
func SQLite(t testing.TB, opts ...Option) *Bundle {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "k.db"))
	if err != nil {
		t.Fatalf("platformtest: open sqlite: %v", err)
	}
	return New(t, st, opts...)
}

// Postgres is a bundle over a schema of its own in the PostgreSQL server of
// KLIQUE_TEST_DATABASE_URL, dropped when t ends. It skips t without the
// server, or fails it under CI=true (pgtest.RequirePostgresURL).
func Postgres(t testing.TB, opts ...Option) *Bundle {
	t.Helper()
	st, err := postgres.Open(context.Background(), pgtest.RequirePostgresURL(t))
	if err != nil {
		t.Fatalf("platformtest: open postgres: %v", err)
	}
	return New(t, st, opts...)
}

// New builds the service over st, which it takes over and closes when t
// ends, bootstraps it and signs in as the bootstrap admin.
func New(t testing.TB, st store.Store, opts ...Option) *Bundle {
	t.Helper()
	var c config
	for _, o := range opts {
		o(&c)
	}
	// Cleanups run last in, first out: the store closes before pgtest,
	// which registered earlier, drops the schema under it.
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("platformtest: close store: %v", err)
		}
	})
	b := &Bundle{Store: st, Logs: &LogRecorder{}}
	b.Logger = slog.New(b.Logs)
	if c.noErrorLogs {
		// Registered after the store's close, so it runs before it, and
		// after whatever the test builds over the service and stops.
		t.Cleanup(func() {
			for _, r := range b.Logs.All() {
				if strings.HasPrefix(r, slog.LevelError.String()) {
					t.Errorf("logged an error: %s", r)
				}
			}
		})
	}
	var now func() time.Time
	if !c.start.IsZero() {
		b.Clock = NewClock(c.start)
		now = b.Clock.Now
	}
	var broker events.Broker
	if c.events {
		b.Bus = events.NewBus()
		broker = b.Bus
	}
	ctx := context.Background()
	var err error
	if b.Vault, err = vault.New(bytes.Repeat([]byte{7}, 32)); err != nil {
		t.Fatalf("platformtest: vault: %v", err)
	}
	signer, err := identity.LoadOrCreateSigner(ctx, st, b.Vault, "https://klique.test", "klique", time.Hour)
	if err != nil {
		t.Fatalf("platformtest: signer: %v", err)
	}
	b.Auth = identity.NewAuthenticator(st, signer, nil, now)
	b.Svc = platform.New(platform.Options{Store: st, Auth: b.Auth, Events: broker, Logger: b.Logger, Now: now, Vault: b.Vault,
		Schedules: c.schedules})
	secret, err := b.Svc.Bootstrap(ctx, "")
	if err != nil || secret == "" {
		t.Fatalf("platformtest: Bootstrap = %q, %v", secret, err)
	}
	b.AdminSecret = secret
	b.Admin = b.SignIn(t, secret)
	p, _ := identity.PrincipalFrom(b.Admin)
	if p.Role != model.RolePlatformAdmin || p.UserName != "admin" {
		t.Fatalf("platformtest: bootstrap principal %+v", p)
	}
	b.AdminID, b.Tenant = p.UserID, p.TenantID
	return b
}
