package limits_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/gateway/limits"
	"github.com/klique-ai/klique/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// BenchmarkRedisReserveSettle is a chat call's work in Redis: a reserve
// and a settle of the gateway benchmark's windows (per-user request and
// token rates, a per-alias request rate, a project budget and its per-user
// cap), one call after another. Besides the client's time it reports
// Redis's own CPU per call for the two scripts, from Redis's command
// statistics (the time Redis spent in EVALSHA, so other clients of a
// shared Redis do not count unless they run scripts too).
//
//	KLIQUE_TEST_REDIS_URL=redis://127.0.0.1:6379/0 go test ./gateway/limits -run '^$' -bench RedisReserveSettle
func BenchmarkRedisReserveSettle(b *testing.B) {
	c, prefix := redistest.Require(b)
	l := limits.NewRedis(c, prefix)
	ctx := context.Background()
	now := time.Now()
	end := now.Add(time.Hour)
	windows := []limits.Window{
		{Key: "rate/user/u1/req", Limit: 1 << 40, Amount: 1, Ends: end},
		{Key: "rate/user/u1/tok", Limit: 1 << 50, Amount: 96, Ends: end},
		{Key: "rate/alias/chat/req", Limit: 1 << 40, Amount: 1, Ends: end},
		{Key: "budget/project/p1", Limit: 1 << 50, Amount: 96, Ends: end, Seeded: true},
		{Key: "budget/project/p1/user/u1", Limit: 1 << 49, Amount: 96, Ends: end, Seeded: true},
	}
	for _, w := range windows {
		if w.Seeded {
			if err := l.Seed(ctx, w, 0, 0); err != nil {
				b.Fatal(err)
			}
		}
	}
	actual := []int64{1, 32, 1, 32, 32}
	call := func(i int) {
		req := limits.Request{ID: "req-" + strconv.Itoa(i), Windows: windows, Expires: now.Add(time.Minute)}
		d, err := l.Reserve(ctx, req, now)
		if err != nil || !d.Allowed {
			b.Fatalf("reserve: %+v, %v", d, err)
		}
		if err := l.Settle(ctx, req, actual); err != nil {
			b.Fatal(err)
		}
	}
	for i := 0; i < 100; i++ {
		call(-i - 1)
	}
	calls0, usec0, cmds0 := evalshaStats(b, c)
	cpu0 := redisCPU(b, c)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		call(i)
	}
	b.StopTimer()
	cpu1 := redisCPU(b, c)
	calls1, usec1, cmds1 := evalshaStats(b, c)
	b.ReportMetric(float64(usec1-usec0)/float64(b.N), "redis-µs/call")
	b.ReportMetric(float64(calls1-calls0)/float64(b.N), "scripts/call")
	// The commands the scripts ran, and Redis's CPU time (INFO cpu): on a
	// machine shared with other work the time in EVALSHA is wall time and
	// swings with the load; the count of commands does not move, and the
	// CPU time moves less. Both count every client of the Redis: use one of
	// your own to measure.
	b.ReportMetric(float64(cmds1-cmds0)/float64(b.N), "redis-commands/call")
	b.ReportMetric((cpu1-cpu0)*1e6/float64(b.N), "redis-cpu-µs/call")
}

// redisCPU is the CPU time, in seconds, the Redis server has used.
func redisCPU(b *testing.B, c *redis.Client) float64 {
	info, err := c.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	var total float64
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				b.Fatalf("INFO cpu: %s", line)
			}
			total += f
		}
	}
	return total
}

// evalshaStats reads Redis's count of EVALSHA commands and the
// microseconds it spent in them, and the count of the commands other than
// EVALSHA and INFO (those the scripts ran).
func evalshaStats(b *testing.B, c *redis.Client) (calls, usec, commands int64) {
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		for _, f := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(f, "=")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch {
			case name == "cmdstat_evalsha" && k == "calls":
				calls = n
			case name == "cmdstat_evalsha" && k == "usec":
				usec = n
			case name != "cmdstat_info" && k == "calls":
				commands += n
			}
		}
	}
	return calls, usec, commands
}
