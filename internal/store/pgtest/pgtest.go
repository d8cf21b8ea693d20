// Package pgtest gives tests a PostgreSQL database of their own.
//
// Tests find the server through KLIQUE_TEST_DATABASE_URL. Each call of
// RequirePostgresURL creates a fresh schema with a random name and returns
// the URL with search_path set to it, so tests can run in parallel against
// one database without seeing each other's rows; the schema is dropped when
// the test ends.
package pgtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
)

// EnvURL names the environment variable that holds the test server's URL.
const EnvURL = "KLIQUE_TEST_DATABASE_URL"

// RequirePostgresURL returns a connection URL whose search_path is a brand
// new, empty schema, and drops the schema (with everything in it) when t
// ends. Without KLIQUE_TEST_DATABASE_URL it skips t, unless CI is "true":
// then a missing database is a failure, so CI cannot pass by skipping.
func RequirePostgresURL(t testing.TB) string {
	t.Helper()
	base := RequirePostgres(t)
	db, err := adminDB(base)
	if err != nil {
		t.Fatalf("pgtest: connect to %s: %v", EnvURL, err)
	}
	schema := "klique_test_" + randomHex(t, 8)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, `CREATE SCHEMA `+schema); err != nil {
		t.Fatalf("pgtest: create schema %s: %v", schema, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := db.ExecContext(ctx, `DROP SCHEMA `+schema+` CASCADE`); err != nil {
			t.Errorf("pgtest: drop schema %s: %v", schema, err)
		}
	})
	u, err := withSearchPath(base, schema)
	if err != nil {
		t.Fatalf("pgtest: %s: %v", EnvURL, err)
	}
	return u
}

// RequirePostgres returns KLIQUE_TEST_DATABASE_URL, or skips t when it is
// unset (fails t when CI is "true"). A test with many subtests calls it first
// to skip once rather than in every subtest.
func RequirePostgres(t testing.TB) string {
	t.Helper()
	base := os.Getenv(EnvURL)
	if base == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not set; CI must run the PostgreSQL tests", EnvURL)
		}
		t.Skipf("%s is not set; skipping PostgreSQL tests", EnvURL)
	}
	return base
}

var (
	adminMu  sync.Mutex
	adminDBs = map[string]*sql.DB{}
)

// adminDB returns one shared pool per server URL for creating and dropping
// schemas, so that many tests do not each open their own connections for
// that. The pools live as long as the test binary.
func adminDB(base string) (*sql.DB, error) {
	adminMu.Lock()
	defer adminMu.Unlock()
	if db, ok := adminDBs[base]; ok {
		return db, nil
	}
	db, err := sql.Open("pgx", base)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(4)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, err
	}
	adminDBs[base] = db
	return db, nil
}

// withSearchPath sets search_path in a URL or key=value connection string.
// It also turns synchronous_commit off: a test schema is thrown away, so its
// commits need not wait for the WAL to reach disk.
func withSearchPath(base, schema string) (string, error) {
	if strings.HasPrefix(base, "postgres://") || strings.HasPrefix(base, "postgresql://") {
		u, err := url.Parse(base)
		if err != nil {
			return "", err
		}
		q := u.Query()
		q.Set("search_path", schema)
		q.Set("synchronous_commit", "off")
		u.RawQuery = q.Encode()
		return u.String(), nil
	}
	// A later key=value pair overrides an earlier one.
	return base + " search_path=" + schema + " synchronous_commit=off", nil
}

func randomHex(t testing.TB, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatalf("pgtest: random schema name: %v", err)
	}
	return hex.EncodeToString(b)
}
