package limits

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// Reconciliation of Redis's budget counters with the ledger (see Redis and
// Reconciler): the seed, the calls it counts itself, the reservations given
// back after a partition, and the epoch.

// seedScript: KEYS[1] the counter, KEYS[2] the lapse set, KEYS[3] the
// epoch; ARGV: used (the ledger's), keep until (ms), the epoch, the hash
// key prefix of earlier versions' reservations. It sets the counter to
// used plus every reservation the lapse set holds in it (each is taken
// back when it settles or lapses, so the counter must hold it) plus what
// settled into it since it was last reconciled (its side key, "#q", see
// Redis), and marks it reconciled at the epoch. It sets it in both
// directions: the ledger is the truth, and a count above it (spend
// counted twice while Redis was out of reach, say) would refuse the
// budget early for the rest of its period.
//
// A counter already reconciled at this epoch is left alone: concurrent
// callers that all found it due seed it once, since a later reading of
// the ledger holds calls that ended since the first, whose reservations
// the lapse set may still hold until their settlements arrive, and would
// count them twice. A seed at an epoch older than the current one is not
// made at all: its reading of the ledger may be older than calls that
// settled into the counter since it was reconciled at the current epoch,
// and setting the counter from it would lose them; the counter's side
// key stays for the next seed.
var seedScript = redis.NewScript(`
local c = KEYS[1]
if redis.call('GET', c .. '#r') == ARGV[3] and redis.call('EXISTS', c) == 1 then return 1 end
if tonumber(ARGV[3]) < tonumber(redis.call('GET', KEYS[3]) or '0') then return 0 end
local target = tonumber(ARGV[1]) + tonumber(redis.call('GET', c .. '#p') or '0')
for _, v in ipairs(redis.call('HVALS', c .. '#q')) do target = target + tonumber(v) end
for _, m in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
  local parts = {}
  for p in string.gmatch(m, '[^%z]+') do parts[#parts + 1] = p end
  if #parts == 1 then
    target = target + tonumber(redis.call('HGET', ARGV[4] .. m, c) or '0')
  else
    for j = 2, #parts - 1, 2 do
      if parts[j] == c then target = target + tonumber(parts[j + 1]) end
    end
  end
end
redis.call('SET', c, target)
redis.call('PEXPIREAT', c, ARGV[2])
redis.call('SET', c .. '#r', ARGV[3])
redis.call('PEXPIREAT', c .. '#r', ARGV[2])
if (redis.call('GET', KEYS[3]) or '0') == ARGV[3] then redis.call('DEL', c .. '#p', c .. '#q') end
return 1
`)

// outstandingScript: KEYS[1] the counter, KEYS[2] the lapse set; ARGV[1]
// the hash key prefix of earlier versions' reservations. It returns the
// ids of the calls the counter's seed counts from Redis: those that
// settled into it since it was last reconciled (its side key), and those
// whose reservations the lapse set holds in it.
var outstandingScript = redis.NewScript(`
local c = KEYS[1]
local out = redis.call('HKEYS', c .. '#q')
for _, m in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
  local parts = {}
  for p in string.gmatch(m, '[^%z]+') do parts[#parts + 1] = p end
  if #parts == 1 then
    if redis.call('HEXISTS', ARGV[1] .. m, c) == 1 then out[#out + 1] = m end
  else
    for j = 2, #parts - 1, 2 do
      if parts[j] == c then out[#out + 1] = parts[1] end
    end
  end
end
return out
`)

// cancelScript: KEYS[1] the lapse set; ARGV the members of reservations
// to give back. A member still in the set is removed and its amounts
// taken back from its counters (those still there); one that is gone
// (settled, lapsed, or never written) changes nothing. It returns how
// many it gave back.
var cancelScript = redis.NewScript(`
local n = 0
for _, m in ipairs(ARGV) do
  if redis.call('ZREM', KEYS[1], m) == 1 then
    n = n + 1
    local parts = {}
    for p in string.gmatch(m, '[^%z]+') do parts[#parts + 1] = p end
    for j = 2, #parts - 1, 2 do
      if redis.call('EXISTS', parts[j]) == 1 then redis.call('DECRBY', parts[j], parts[j + 1]) end
    end
  end
end
return n
`)

// reconcileScript: KEYS[1] the epoch; ARGV[1] the highest epoch the
// caller has seen. It starts a new one, past both (see Redis), and
// returns it.
var reconcileScript = redis.NewScript(`
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
local seen = tonumber(ARGV[1])
local step = 1
if seen > cur then step = seen - cur + 1 end
return redis.call('INCRBY', KEYS[1], step)
`)

// Seed implements Limiter.
func (r *Redis) Seed(ctx context.Context, w Window, used, epoch int64) error {
	if err := seedScript.Run(ctx, r.c, []string{r.counter(w.Key), r.lapse, r.epoch}, used, ms(w.Ends.Add(keep)), epoch, r.hashPrefix).Err(); err != nil {
		return unavailable(ctx, "seed", err)
	}
	return nil
}

// cancelChunk bounds the members one cancel script gives back, so that
// a long partition's many do not hold Redis in one script.
const cancelChunk = 512

// Cancel implements Canceller.
func (r *Redis) Cancel(ctx context.Context, reqs []Request) error {
	members := make([]any, 0, min(len(reqs), cancelChunk))
	flush := func() error {
		if len(members) == 0 {
			return nil
		}
		err := cancelScript.Run(ctx, r.c, []string{r.lapse}, members...).Err()
		members = members[:0]
		if err != nil {
			return unavailable(ctx, "give back reservations", err)
		}
		return nil
	}
	for _, req := range reqs {
		if m := r.member(req); m != "" {
			members = append(members, m)
		}
		if len(members) == cancelChunk {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}

// Outstanding implements Outstanding.
func (r *Redis) Outstanding(ctx context.Context, w Window) ([]string, error) {
	ids, err := outstandingScript.Run(ctx, r.c, []string{r.counter(w.Key), r.lapse}, r.hashPrefix).StringSlice()
	if err != nil {
		return nil, unavailable(ctx, "read a counter's calls", err)
	}
	return ids, nil
}

// Reconcile implements Reconciler: a new epoch, after which every budget
// counter is seeded again (raised to the ledger's count) before it is
// used.
func (r *Redis) Reconcile(ctx context.Context) error {
	epoch, err := reconcileScript.Run(ctx, r.c, []string{r.epoch}, r.seen.Load()).Int64()
	if err != nil {
		return unavailable(ctx, "reconcile", err)
	}
	r.saw(epoch)
	return nil
}

// saw records an epoch found in Redis: the highest is kept.
func (r *Redis) saw(epoch int64) {
	for {
		cur := r.seen.Load()
		if epoch <= cur || r.seen.CompareAndSwap(cur, epoch) {
			return
		}
	}
}
