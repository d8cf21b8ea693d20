// Package redistest gives tests a Redis of their own: the server at
// KLIQUE_TEST_REDIS_URL, with a key prefix no other test uses.
package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// EnvURL names the environment variable that holds the test server's URL.
const EnvURL = "KLIQUE_TEST_REDIS_URL"

// Require returns a client for KLIQUE_TEST_REDIS_URL and a key prefix of
// the test's own; the keys under it are deleted when the test ends.
// Without the variable it skips t, unless CI is "true": then a missing
// Redis is a failure, so CI cannot pass by skipping.
func Require(t testing.TB) (*redis.Client, string) {
	t.Helper()
	url := RequireURL(t)
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatalf("redistest: %s: %v", EnvURL, err)
	}
	c := redis.NewClient(opts)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("redistest: ping %s: %v", url, err)
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	prefix := "klique-test-" + hex.EncodeToString(b) + ":"
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			c.Del(ctx, iter.Val())
		}
		_ = c.Close()
	})
	return c, prefix
}

// RequireURL returns KLIQUE_TEST_REDIS_URL, or skips t when it is unset
// (fails t when CI is "true").
func RequireURL(t testing.TB) string {
	t.Helper()
	url := os.Getenv(EnvURL)
	if url == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("redistest: %s is not set, and CI=true: the tests that need Redis must run", EnvURL)
		}
		t.Skipf("redistest: set %s to run this test against Redis", EnvURL)
	}
	return url
}
