package limits

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis is the Limiter replicas share. Each window is two keys: a counter
// (PREFIX+key) and a sorted set of live reservations (PREFIX+key+":r",
// member "id:amount", score the expiry in milliseconds). One script call
// reserves a whole call: it gives back lapsed reservations, checks every
// window and takes every amount, atomically. Keys are not hash-tagged: a
// call's windows must live on one Redis (not a cluster).
type Redis struct {
	c      redis.UniversalClient
	prefix string
}

// NewRedis returns a limiter over c whose keys start with prefix.
func NewRedis(c redis.UniversalClient, prefix string) *Redis {
	return &Redis{c: c, prefix: prefix}
}

// reserveScript: KEYS are n counters then n reservation sets. ARGV: now
// (ms), expires (ms), id, n, then for each window: limit, amount, keep
// until (ms), seeded (1/0). It returns {1, used...} when reserved,
// {0, denied index, used...} when refused, {-1, unseeded indexes...} when a
// seeded window has no counter.
var reserveScript = redis.NewScript(`
local now = tonumber(ARGV[1])
local expires = tonumber(ARGV[2])
local id = ARGV[3]
local n = tonumber(ARGV[4])
local used = {}
local unseeded = {}
for i = 1, n do
  local ck, rk = KEYS[i], KEYS[n + i]
  local lapsed = redis.call('ZRANGEBYSCORE', rk, '-inf', now)
  if #lapsed > 0 then
    local back = 0
    for _, m in ipairs(lapsed) do
      back = back + tonumber(string.match(m, ':(%-?%d+)$'))
    end
    redis.call('ZREMRANGEBYSCORE', rk, '-inf', now)
    redis.call('DECRBY', ck, back)
  end
  local v = redis.call('GET', ck)
  if not v then
    if ARGV[4 + (i - 1) * 4 + 4] == '1' then
      unseeded[#unseeded + 1] = i - 1
    end
    v = 0
  end
  used[i] = tonumber(v)
end
if #unseeded > 0 then
  local out = {-1}
  for _, i in ipairs(unseeded) do out[#out + 1] = i end
  return out
end
for i = 1, n do
  local base = 4 + (i - 1) * 4
  if used[i] + tonumber(ARGV[base + 2]) > tonumber(ARGV[base + 1]) then
    local out = {0, i - 1}
    for j = 1, n do out[#out + 1] = used[j] end
    return out
  end
end
local out = {1}
for i = 1, n do
  local base = 4 + (i - 1) * 4
  local amount = tonumber(ARGV[base + 2])
  local untilms = ARGV[base + 3]
  local ck, rk = KEYS[i], KEYS[n + i]
  used[i] = redis.call('INCRBY', ck, amount)
  redis.call('ZADD', rk, expires, id .. ':' .. ARGV[base + 2])
  redis.call('PEXPIREAT', ck, untilms)
  redis.call('PEXPIREAT', rk, untilms)
  out[#out + 1] = used[i]
end
return out
`)

// settleScript: KEYS are n counters then n reservation sets. ARGV: id, n,
// then for each window: reserved amount, actual amount, keep until (ms),
// seeded (1/0). A reservation still held is swapped for the actual amount;
// one that lapsed (and was given back) adds the actual amount. A seeded
// counter that is gone is left for the next seed to count from the ledger.
var settleScript = redis.NewScript(`
local id = ARGV[1]
local n = tonumber(ARGV[2])
for i = 1, n do
  local base = 2 + (i - 1) * 4
  local reserved = tonumber(ARGV[base + 1])
  local actual = tonumber(ARGV[base + 2])
  local ck, rk = KEYS[i], KEYS[n + i]
  local held = redis.call('ZREM', rk, id .. ':' .. ARGV[base + 1])
  local exists = redis.call('EXISTS', ck)
  if held == 1 then
    redis.call('INCRBY', ck, actual - reserved)
  elseif exists == 1 or ARGV[base + 4] ~= '1' then
    redis.call('INCRBY', ck, actual)
    if exists == 0 then redis.call('PEXPIREAT', ck, ARGV[base + 3]) end
  end
end
return 1
`)

// seedScript: KEYS[1] the counter; ARGV: used, keep until (ms).
var seedScript = redis.NewScript(`
if redis.call('SET', KEYS[1], ARGV[1], 'NX') then
  redis.call('PEXPIREAT', KEYS[1], ARGV[2])
end
return 1
`)

// peekScript: KEYS are n counters then n reservation sets; ARGV: now (ms).
var peekScript = redis.NewScript(`
local n = #KEYS / 2
local now = tonumber(ARGV[1])
local out = {}
for i = 1, n do
  local ck, rk = KEYS[i], KEYS[n + i]
  local lapsed = redis.call('ZRANGEBYSCORE', rk, '-inf', now)
  if #lapsed > 0 then
    local back = 0
    for _, m in ipairs(lapsed) do
      back = back + tonumber(string.match(m, ':(%-?%d+)$'))
    end
    redis.call('ZREMRANGEBYSCORE', rk, '-inf', now)
    redis.call('DECRBY', ck, back)
  end
  out[i] = tonumber(redis.call('GET', ck) or '0')
end
return out
`)

func (r *Redis) keys(ws []Window) []string {
	keys := make([]string, 2*len(ws))
	for i, w := range ws {
		keys[i] = r.prefix + w.Key
		keys[len(ws)+i] = r.prefix + w.Key + ":r"
	}
	return keys
}

func ms(t time.Time) int64 { return t.UnixMilli() }

func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

func unavailable(what string, err error) error {
	return fmt.Errorf("%s in Redis: %w: %w", what, ErrUnavailable, err)
}

// Reserve implements Limiter.
func (r *Redis) Reserve(ctx context.Context, req Request, now time.Time) (Decision, error) {
	args := make([]any, 0, 4+4*len(req.Windows))
	args = append(args, ms(now), ms(req.Expires), req.ID, len(req.Windows))
	for _, w := range req.Windows {
		args = append(args, w.Limit, w.Amount, ms(w.Ends.Add(keep)), flag(w.Seeded))
	}
	res, err := reserveScript.Run(ctx, r.c, r.keys(req.Windows), args...).Int64Slice()
	if err != nil {
		return Decision{}, unavailable("reserve", err)
	}
	d := Decision{Used: make([]int64, len(req.Windows))}
	switch {
	case len(res) > 0 && res[0] == -1:
		for _, i := range res[1:] {
			d.Unseeded = append(d.Unseeded, int(i))
		}
	case len(res) == 1+len(req.Windows) && res[0] == 1:
		d.Allowed = true
		copy(d.Used, res[1:])
	case len(res) == 2+len(req.Windows) && res[0] == 0:
		d.Denied = int(res[1])
		copy(d.Used, res[2:])
	default:
		return Decision{}, fmt.Errorf("reserve in Redis: unexpected answer %v", res)
	}
	return d, nil
}

// Settle implements Limiter.
func (r *Redis) Settle(ctx context.Context, req Request, actual []int64) error {
	if len(actual) != len(req.Windows) {
		return errSettleLength(len(req.Windows), len(actual))
	}
	args := make([]any, 0, 2+4*len(req.Windows))
	args = append(args, req.ID, len(req.Windows))
	for i, w := range req.Windows {
		args = append(args, strconv.FormatInt(w.Amount, 10), actual[i], ms(w.Ends.Add(keep)), flag(w.Seeded))
	}
	if err := settleScript.Run(ctx, r.c, r.keys(req.Windows), args...).Err(); err != nil {
		return unavailable("settle", err)
	}
	return nil
}

// Seed implements Limiter.
func (r *Redis) Seed(ctx context.Context, w Window, used int64) error {
	if err := seedScript.Run(ctx, r.c, []string{r.prefix + w.Key}, used, ms(w.Ends.Add(keep))).Err(); err != nil {
		return unavailable("seed", err)
	}
	return nil
}

// Peek implements Limiter.
func (r *Redis) Peek(ctx context.Context, ws []Window, now time.Time) ([]int64, error) {
	if len(ws) == 0 {
		return nil, nil
	}
	res, err := peekScript.Run(ctx, r.c, r.keys(ws), ms(now)).Int64Slice()
	if err != nil {
		return nil, unavailable("peek", err)
	}
	return res, nil
}
