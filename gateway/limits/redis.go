package limits

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis is the Limiter replicas share. A window is one counter key
// (PREFIX+key). A reservation of budget (seeded) windows is also written
// down, so that it can lapse: one member of the sorted set PREFIX+"lapse",
// scored by its expiry, that holds the reservation's id and its amount per
// counter (see member). Every reserve first gives back a few lapsed
// reservations, then takes its amounts: rate windows by INCRBY straight
// away (taken back if a window would pass its limit), budget windows after
// checking they are seeded. One script call does a whole reserve,
// atomically, and concurrent calls are pipelined. Keys are not hash-tagged:
// a gateway's limits live on one Redis (not a cluster).
//
// Budget counters are reconciled with the ledger by epoch (see
// Reconciler): PREFIX+"epoch" counts the reconciliations, and each budget
// counter has a marker, its key and "#r", holding the epoch it was last
// seeded at. A reserve that finds a budget counter missing, or its marker
// behind the epoch, reports it Unseeded; its seed raises the counter to
// the ledger's spend plus the reservations held in it, and sets the
// marker. A counter without a marker, in a Redis that never reconciled,
// is at epoch 0, as it was before epochs.
//
// A Redis restored from an older snapshot holds older epochs too, and its
// counters' markers match them: a replica that did not notice the restart
// (the client retried its commands until the new Redis answered) would
// trust counts that miss what was spent since the snapshot. So epochs
// only grow (a new one is past both Redis's and every one this replica
// has seen), each replica keeps the highest it has seen, and a reserve
// that finds Redis's epoch below it takes Redis for rolled back (or
// emptied): it reconciles before it reserves.
//
// The seed reads the ledger first and writes the counter after, and a
// call can settle in between: its reservation leaves the lapse set (or
// was never in it: made on the in-process fallback, or in a Redis since
// lost) and its ledger row may come after the read, so neither the read
// nor the lapse set has it. So while a budget counter is not reconciled
// at the current epoch (missing, or its marker behind), a settle also
// keeps what the call used, by call id, in a side key (a hash, the
// counter's key and "#q"), and the seed adds that to the ledger's spend.
// So that no call is counted twice, the ledger's sum leaves out the calls
// the seed counts from Redis (Outstanding): those of the side key, and
// those whose reservations the lapse set holds. (An earlier version kept
// a sum, "#p", which the seed still adds.)
//
// A seed sets the counter (ledger + side key + held reservations) in
// both directions. What the gateway sent to a Redis it could not reach
// is given back when it is reached again (Cancel): a frozen Redis reads
// what was written to it, late, so a reserve that timed out may hold its
// amount in Redis as well as in the fallback, and a reservation whose
// settle was made on the fallback would stay held until it lapsed,
// counted on top of its call's spend in the ledger.
//
// Reservations written by earlier versions (the id alone in the sorted
// set, the amounts in a hash PREFIX+"r:"+id) are still given back and
// settled.
type Redis struct {
	c      redis.UniversalClient
	prefix string
	batch  *batcher
	// lapse is the lapse set's key, and hashPrefix the key prefix of
	// earlier versions' reservations, boxed once: every reserve and settle
	// sends them.
	lapse      string
	hashPrefix any
	// epoch is the key of the reconciliation epoch, and seen the highest
	// epoch this limiter has seen in Redis (see Redis).
	epoch string
	seen  atomic.Int64
	// counters caches PREFIX+key by key, so that a call does not build the
	// same few strings again (see counter).
	mu       sync.RWMutex
	counters map[string]string
}

// ClientOptions sets what a Redis client for a Redis limiter needs: to
// fail fast (a call waits on Redis, so one that does not answer must hand
// over to the in-process limiter quickly), and never to send a command
// again after a timeout. The scripts are not idempotent: a Redis that was
// frozen, not gone, reads both copies when it wakes and runs both, so a
// retried reserve would take its amount twice while its reservation gives
// it back once.
func ClientOptions(o *redis.Options) {
	o.DialTimeout, o.ReadTimeout, o.WriteTimeout = time.Second, 500*time.Millisecond, 500*time.Millisecond
	o.MaxRetries = -1
	o.PoolSize = max(o.PoolSize, 256)
}

// NewRedis returns a limiter over c whose keys start with prefix.
// Concurrent calls are pipelined (see batcher).
func NewRedis(c redis.UniversalClient, prefix string) *Redis {
	return &Redis{c: c, prefix: prefix, batch: &batcher{c: c},
		lapse: prefix + "lapse", hashPrefix: prefix + "r:", epoch: prefix + "epoch", counters: map[string]string{}}
}

// maxCounters bounds the counter names cached. A window's key changes
// with its period (a minute, a day, a month), so the cache is emptied when
// full rather than kept tidy.
const maxCounters = 4096

// counter returns a window's Redis key, PREFIX+key.
func (r *Redis) counter(key string) string {
	r.mu.RLock()
	k, ok := r.counters[key]
	r.mu.RUnlock()
	if ok {
		return k
	}
	k = r.prefix + key
	r.mu.Lock()
	if len(r.counters) >= maxCounters {
		clear(r.counters)
	}
	r.counters[key] = k
	r.mu.Unlock()
	return k
}

// ints reads a script's answer as integers.
func ints(v any) ([]int64, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("unexpected answer %T", v)
	}
	out := make([]int64, len(list))
	for i, x := range list {
		n, ok := x.(int64)
		if !ok {
			return nil, fmt.Errorf("unexpected answer %v", list)
		}
		out[i] = n
	}
	return out, nil
}

// giveBackLua gives back the lapsed reservations in the list lapsed (of
// the sorted set lapse): each member is "id\0counter\0amount..." (or, from
// an earlier version, an id whose amounts are in the hash hashPrefix..id).
const giveBackLua = `
local function giveBack(lapse, lapsed, hashPrefix)
  for _, m in ipairs(lapsed) do
    local parts = {}
    for p in string.gmatch(m, '[^%z]+') do parts[#parts + 1] = p end
    if #parts == 1 then
      local hk = hashPrefix .. m
      local held = redis.call('HGETALL', hk)
      for j = 1, #held, 2 do
        if redis.call('EXISTS', held[j]) == 1 then redis.call('DECRBY', held[j], held[j + 1]) end
      end
      redis.call('DEL', hk)
    else
      for j = 2, #parts, 2 do
        if redis.call('EXISTS', parts[j]) == 1 then redis.call('DECRBY', parts[j], parts[j + 1]) end
      end
    end
    redis.call('ZREM', lapse, m)
  end
end
`

// reserveScript: KEYS are n counters, then the lapse set, then the epoch.
// ARGV: now (ms), expires (ms), the reservation's member ("" when it has
// no budget window), n, the hash key prefix of earlier versions'
// reservations, then for each window: limit, amount, keep until (ms),
// seeded (1/0), then the highest epoch the caller has seen. It returns
// {1, used...} when reserved, {0, denied index, used...} when refused
// (used before the call), {-1, epoch, unseeded indexes...} when a seeded
// window has no counter, or one whose marker (KEYS[i].."#r") is not at the
// epoch, and {-2, epoch} when a seeded window is asked for and the epoch
// is below the one the caller has seen (Redis rolled back): nothing is
// reserved.
var reserveScript = redis.NewScript(giveBackLua + `
local now = tonumber(ARGV[1])
local n = tonumber(ARGV[4])
local lapse = KEYS[n + 1]
giveBack(lapse, redis.call('ZRANGEBYSCORE', lapse, '-inf', now, 'LIMIT', 0, 32), ARGV[5])
-- The epoch and each seeded window's counter and marker, in one MGET: a
-- counter that is not there reads false.
local seeded = {KEYS[n + 2]}
for i = 1, n do
  if ARGV[5 + (i - 1) * 4 + 4] == '1' then
    seeded[#seeded + 1] = KEYS[i]
    seeded[#seeded + 1] = KEYS[i] .. '#r'
  end
end
local unseeded = {}
local epoch = nil
if #seeded > 1 then
  local got = redis.call('MGET', unpack(seeded))
  epoch = got[1] or '0'
  if tonumber(epoch) < tonumber(ARGV[6 + n * 4]) then return {-2, tonumber(epoch)} end
  local j = 2
  for i = 1, n do
    if ARGV[5 + (i - 1) * 4 + 4] == '1' then
      if got[j] == false or (got[j + 1] or '0') ~= epoch then
        unseeded[#unseeded + 1] = i - 1
      end
      j = j + 2
    end
  end
end
if #unseeded > 0 then
  local out = {-1, tonumber(epoch)}
  for _, i in ipairs(unseeded) do out[#out + 1] = i end
  return out
end
local used = {}
for i = 1, n do
  local base = 5 + (i - 1) * 4
  local amount = tonumber(ARGV[base + 2])
  local v = redis.call('INCRBY', KEYS[i], amount)
  if v == amount and ARGV[base + 4] ~= '1' then
    redis.call('PEXPIREAT', KEYS[i], ARGV[base + 3])
  end
  used[i] = v
  if v > tonumber(ARGV[base + 1]) then
    local out = {0, i - 1}
    for j = 1, i do
      local a = tonumber(ARGV[5 + (j - 1) * 4 + 2])
      redis.call('DECRBY', KEYS[j], a)
      used[j] = used[j] - a
    end
    for j = i + 1, n do used[j] = tonumber(redis.call('GET', KEYS[j]) or '0') end
    for j = 1, n do out[#out + 1] = used[j] end
    return out
  end
end
if ARGV[3] ~= '' then redis.call('ZADD', lapse, ARGV[2], ARGV[3]) end
local out = {1}
for i = 1, n do out[#out + 1] = used[i] end
return out
`)

// settleScript: KEYS are n counters, then the lapse set, then the epoch.
// ARGV: the reservation's member ("" when it has no budget window), n, its
// id, the hash key prefix of earlier versions' reservations, then for each
// window: reserved amount, actual amount, seeded (1/0), keep until (ms),
// then the highest epoch the caller has seen. A reservation still held is
// swapped for the actual amounts; one that lapsed (its amounts given back)
// adds them. A counter that is gone (its period ended, or Redis lost it)
// is left alone. A seeded counter not reconciled at the epoch (gone, its
// marker behind, or the epoch below the caller's: rolled back) also gets
// the actual amount in its side key (KEYS[i].."#q", by call id), which
// its seed adds to the ledger's spend, from which it is left out (see
// Redis).
var settleScript = redis.NewScript(`
local n = tonumber(ARGV[2])
local held = 0
if ARGV[1] ~= '' then
  held = redis.call('ZREM', KEYS[n + 1], ARGV[1])
  if held == 0 then
    -- Reserved by an earlier version: its id, and a hash.
    held = redis.call('ZREM', KEYS[n + 1], ARGV[3])
    if held == 1 then redis.call('DEL', ARGV[4] .. ARGV[3]) end
  end
end
-- What the loop below reads, in one MGET: the counter of each window that
-- changes, the epoch and the marker of each seeded window that used
-- something (a request window settles the one it reserved, and needs
-- nothing). A counter that is not there reads false.
local read = {}
local at = {}
local marker = {}
local epochAt = nil
for i = 1, n do
  local base = 4 + (i - 1) * 4
  local actual = tonumber(ARGV[base + 2])
  local seeded = ARGV[base + 3] == '1'
  if actual ~= tonumber(ARGV[base + 1]) or (seeded and (held == 0 or actual > 0)) then
    read[#read + 1] = KEYS[i]
    at[i] = #read
  end
  if seeded and actual > 0 then
    if epochAt == nil then
      read[#read + 1] = KEYS[n + 2]
      epochAt = #read
    end
    read[#read + 1] = KEYS[i] .. '#r'
    marker[i] = #read
  end
end
local got = {}
if #read > 0 then got = redis.call('MGET', unpack(read)) end
local epoch = '0'
if epochAt ~= nil then epoch = got[epochAt] or '0' end
for i = 1, n do
  local base = 4 + (i - 1) * 4
  local reserved = tonumber(ARGV[base + 1])
  local actual = tonumber(ARGV[base + 2])
  local seeded = ARGV[base + 3] == '1'
  local delta = actual - reserved
  if seeded and held == 0 then delta = actual end
  local exists = at[i] ~= nil and got[at[i]] ~= false
  if delta ~= 0 and exists then redis.call('INCRBY', KEYS[i], delta) end
  if seeded and actual > 0 then
    if not exists or (got[marker[i]] or '0') ~= epoch or tonumber(epoch) < tonumber(ARGV[5 + n * 4]) then
      redis.call('HSET', KEYS[i] .. '#q', ARGV[3], actual)
      redis.call('PEXPIREAT', KEYS[i] .. '#q', ARGV[base + 4])
    end
  end
end
return 1
`)

// peekScript: KEYS are n counters then the lapse set; ARGV: now (ms), the
// hash key prefix of earlier versions' reservations. It gives back lapsed
// reservations first.
var peekScript = redis.NewScript(giveBackLua + `
local n = #KEYS - 1
local lapse = KEYS[n + 1]
giveBack(lapse, redis.call('ZRANGEBYSCORE', lapse, '-inf', tonumber(ARGV[1]), 'LIMIT', 0, 1000), ARGV[2])
local out = {}
for i = 1, n do out[i] = tonumber(redis.call('GET', KEYS[i]) or '0') end
return out
`)

// keys lists the counters of ws, then the lapse set.
func (r *Redis) keys(ws []Window) []string {
	keys := make([]string, len(ws), len(ws)+2)
	for i, w := range ws {
		keys[i] = r.counter(w.Key)
	}
	return append(keys, r.lapse)
}

// member is how a reservation of budget windows is kept in the lapse set:
// its id, then each budget window's counter and amount, separated by NUL
// bytes (which ids and keys do not hold), so that giving it back needs
// nothing else, and settling it finds it again from the same request. It
// is "" when the request has no budget window.
func (r *Redis) member(req Request) string {
	// Sized first, so that the string is one allocation: it is built for
	// every reserve and every settle.
	size := 0
	for _, w := range req.Windows {
		if w.Seeded {
			size += 2 + len(r.prefix) + len(w.Key) + 20
		}
	}
	if size == 0 {
		return ""
	}
	var b strings.Builder
	b.Grow(len(req.ID) + size)
	b.WriteString(req.ID)
	var num [20]byte
	for _, w := range req.Windows {
		if !w.Seeded {
			continue
		}
		b.WriteByte(0)
		b.WriteString(r.prefix)
		b.WriteString(w.Key)
		b.WriteByte(0)
		b.Write(strconv.AppendInt(num[:0], w.Amount, 10))
	}
	return b.String()
}

func ms(t time.Time) int64 { return t.UnixMilli() }

func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// unavailable wraps an error of a Redis call as ErrUnavailable, which
// makes Failover fall back to the process, unless the caller's context was
// cancelled (the client went away): that says nothing of Redis.
func unavailable(ctx context.Context, what string, err error) error {
	if ctx.Err() == context.Canceled {
		return fmt.Errorf("%s in Redis: %w", what, err)
	}
	return fmt.Errorf("%s in Redis: %w: %w", what, ErrUnavailable, err)
}

// Reserve implements Limiter.
func (r *Redis) Reserve(ctx context.Context, req Request, now time.Time) (Decision, error) {
	if err := checkReserve(req); err != nil {
		return Decision{}, err
	}
	args := make([]any, 0, 6+4*len(req.Windows))
	args = append(args, ms(now), ms(req.Expires), r.member(req), len(req.Windows), r.hashPrefix)
	for _, w := range req.Windows {
		args = append(args, w.Limit, w.Amount, ms(w.Ends.Add(keep)), flag(w.Seeded))
	}
	args = append(args, r.seen.Load())
	keys := append(r.keys(req.Windows), r.epoch)
	v, err := r.batch.run(ctx, reserveScript, keys, args)
	if err != nil {
		return Decision{}, unavailable(ctx, "reserve", err)
	}
	res, err := ints(v)
	if err != nil {
		return Decision{}, fmt.Errorf("reserve in Redis: %w", err)
	}
	if len(res) == 2 && res[0] == -2 {
		// Redis rolled back (or lost its keys) since this limiter last saw
		// it: a new epoch, past every one before, makes each budget counter
		// due again, and the reserve asks for its seed.
		if err := r.Reconcile(ctx); err != nil {
			return Decision{}, err
		}
		args[len(args)-1] = r.seen.Load()
		if v, err = r.batch.run(ctx, reserveScript, keys, args); err != nil {
			return Decision{}, unavailable(ctx, "reserve", err)
		}
		if res, err = ints(v); err != nil {
			return Decision{}, fmt.Errorf("reserve in Redis: %w", err)
		}
	}
	d := Decision{Used: make([]int64, len(req.Windows))}
	switch {
	case len(res) > 1 && res[0] == -1:
		d.Epoch = res[1]
		r.saw(d.Epoch)
		for _, i := range res[2:] {
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

// Settle implements Limiter. Rate windows whose actual amount is what was
// reserved (a request counts as one either way) need no change and are
// not sent.
func (r *Redis) Settle(ctx context.Context, req Request, actual []int64) error {
	keys, args, err := r.settleArgs(req, actual)
	if err != nil || keys == nil {
		return err
	}
	if _, err := r.batch.run(ctx, settleScript, keys, args); err != nil {
		return unavailable(ctx, "settle", err)
	}
	return nil
}

// settleArgs returns the keys and arguments of settleScript for a
// settlement; nil keys when nothing needs changing.
func (r *Redis) settleArgs(req Request, actual []int64) ([]string, []any, error) {
	if err := checkSettle(req, actual); err != nil {
		return nil, nil, err
	}
	n := 0
	for i, w := range req.Windows {
		if w.Seeded || actual[i] != w.Amount {
			n++
		}
	}
	if n == 0 {
		return nil, nil, nil
	}
	keys := make([]string, 0, n+2)
	args := make([]any, 0, 5+4*n)
	args = append(args, r.member(req), n, req.ID, r.hashPrefix)
	for i, w := range req.Windows {
		if !w.Seeded && actual[i] == w.Amount {
			continue
		}
		keys = append(keys, r.counter(w.Key))
		args = append(args, w.Amount, actual[i], flag(w.Seeded), ms(w.Ends.Add(keep)))
	}
	return append(keys, r.lapse, r.epoch), append(args, r.seen.Load()), nil
}

// SettleBatch implements BatchSettler: the settlements' scripts go in one
// pipeline.
func (r *Redis) SettleBatch(ctx context.Context, batch []Settlement) []error {
	type sent struct {
		i    int
		cmd  *redis.Cmd
		keys []string
		args []any
	}
	var errs []error
	fail := func(i int, err error) {
		if errs == nil {
			errs = make([]error, len(batch))
		}
		errs[i] = err
	}
	pipe := r.c.Pipeline()
	cmds := make([]sent, 0, len(batch))
	for i, s := range batch {
		keys, args, err := r.settleArgs(s.Request, s.Actual)
		if err != nil {
			fail(i, err)
			continue
		}
		if keys != nil {
			cmds = append(cmds, sent{i, settleScript.EvalSha(ctx, pipe, keys, args...), keys, args})
		}
	}
	if len(cmds) == 0 {
		return errs
	}
	_, _ = pipe.Exec(ctx)
	for _, c := range cmds {
		err := c.cmd.Err()
		if err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
			// The script is not loaded yet (a Redis restarted): Run loads
			// it.
			err = settleScript.Run(ctx, r.c, c.keys, c.args...).Err()
		}
		if err != nil {
			fail(c.i, unavailable(ctx, "settle", err))
		}
	}
	return errs
}

// Peek implements Limiter.
func (r *Redis) Peek(ctx context.Context, ws []Window, now time.Time) ([]int64, error) {
	if len(ws) == 0 {
		return nil, nil
	}
	res, err := peekScript.Run(ctx, r.c, r.keys(ws), ms(now), r.hashPrefix).Int64Slice()
	if err != nil {
		return nil, unavailable(ctx, "peek", err)
	}
	return res, nil
}
