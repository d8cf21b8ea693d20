package limits

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Holding is what a budget window holds as the limiter enforces it: the
// count a reservation is checked against, and the part of it that live
// reservations (calls in flight) hold. Counted is false when the limiter
// has no trusted counter for the window (never used, or due to be seeded
// from the ledger again): its next call starts from the ledger's sum.
type Holding struct {
	Count, Reserved int64
	Counted         bool
}

// Holder is a Limiter that can say what its budget windows hold, without
// reserving: the read behind the budgets people are shown, so that what
// they see is what the gateway enforces.
type Holder interface {
	Holdings(ctx context.Context, ws []Window, now time.Time) ([]Holding, error)
}

// Holdings implements Holder. Lapsed reservations are given back first, as
// a reserve would.
func (m *Memory) Holdings(_ context.Context, ws []Window, now time.Time) ([]Holding, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Holding, len(ws))
	for i, win := range ws {
		w := m.window(win.Key, now)
		if w == nil {
			continue
		}
		w.purge(now)
		h := Holding{Count: w.used, Counted: !w.stale && !(m.reseed > 0 && !w.seededAt.IsZero() && now.Sub(w.seededAt) >= m.reseed)}
		for _, e := range w.held {
			h.Reserved += e.amount
		}
		out[i] = h
	}
	return out, nil
}

// holdingsScript: KEYS are n counters, then the lapse set, then the epoch;
// ARGV: now (ms), the hash key prefix of earlier versions' reservations,
// the highest epoch the caller has seen. It gives back lapsed reservations
// first, then answers, per counter, its count, the reservations the lapse
// set holds in it, and 1 when it exists and is reconciled at the current
// epoch, and that epoch is not below the caller's (a Redis rolled back, to
// be reconciled at the next reserve; see Redis), else 0.
var holdingsScript = redis.NewScript(giveBackLua + `
local n = #KEYS - 2
local lapse = KEYS[n + 1]
giveBack(lapse, redis.call('ZRANGEBYSCORE', lapse, '-inf', tonumber(ARGV[1]), 'LIMIT', 0, 1000), ARGV[2])
local epoch = redis.call('GET', KEYS[n + 2]) or '0'
local current = tonumber(epoch) >= tonumber(ARGV[3])
local held = {}
for _, m in ipairs(redis.call('ZRANGE', lapse, 0, -1)) do
  local parts = {}
  for p in string.gmatch(m, '[^%z]+') do parts[#parts + 1] = p end
  if #parts == 1 then
    for i = 1, n do
      held[i] = (held[i] or 0) + tonumber(redis.call('HGET', ARGV[2] .. m, KEYS[i]) or '0')
    end
  else
    for j = 2, #parts - 1, 2 do
      for i = 1, n do
        if parts[j] == KEYS[i] then held[i] = (held[i] or 0) + tonumber(parts[j + 1]) end
      end
    end
  end
end
local out = {}
for i = 1, n do
  local cur = redis.call('GET', KEYS[i])
  local counted = 0
  if current and cur ~= false and (redis.call('GET', KEYS[i] .. '#r') or '0') == epoch then counted = 1 end
  out[#out + 1] = tonumber(cur or '0')
  out[#out + 1] = held[i] or 0
  out[#out + 1] = counted
end
return out
`)

// Holdings implements Holder. It reads the whole lapse set (the budget
// reservations in flight across the replicas): a page load, not a call.
func (r *Redis) Holdings(ctx context.Context, ws []Window, now time.Time) ([]Holding, error) {
	if len(ws) == 0 {
		return nil, nil
	}
	res, err := holdingsScript.Run(ctx, r.c, append(r.keys(ws), r.epoch), ms(now), r.hashPrefix, r.seen.Load()).Int64Slice()
	if err != nil {
		return nil, unavailable(ctx, "read budgets", err)
	}
	if len(res) != 3*len(ws) {
		return nil, fmt.Errorf("read budgets: %d numbers for %d windows", len(res), len(ws))
	}
	out := make([]Holding, len(ws))
	for i := range out {
		out[i] = Holding{Count: res[3*i], Reserved: res[3*i+1], Counted: res[3*i+2] == 1}
	}
	return out, nil
}

// Holdings implements Holder: the limiter the next call would use.
func (f *Failover) Holdings(ctx context.Context, ws []Window, now time.Time) ([]Holding, error) {
	if l, primary := f.pick(ctx); primary {
		if h, ok := l.(Holder); ok {
			out, err := h.Holdings(ctx, ws, now)
			if f.result(err) {
				return out, err
			}
		}
	}
	h, ok := f.Fallback.(Holder)
	if !ok {
		return make([]Holding, len(ws)), nil
	}
	return h.Holdings(ctx, ws, now)
}
