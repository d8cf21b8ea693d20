package limits_test

import (
	"testing"
	"time"

	"github.com/klique-ai/klique/gateway/limits"
)

// TestHoldingsSayWhatABudgetHolds reads a budget window as the budgets
// people see read it: unseeded it is not counted; seeded and reserved in,
// its count holds the ledger's spend plus the reservation, and Reserved
// the reservation alone; settled, the reservation leaves Reserved and its
// actual amount stays in the count; a reservation that lapses leaves both.
func TestHoldingsSayWhatABudgetHolds(t *testing.T) {
	forEachLimiter(t, func(t *testing.T, l limits.Limiter, key func(string) string) {
		h, ok := l.(limits.Holder)
		if !ok {
			t.Fatalf("%T reads no holdings", l)
		}
		now := time.Now()
		month := limits.Window{Key: key("budget"), Limit: 1000, Amount: 300, Ends: now.Add(24 * time.Hour), Seeded: true}
		read := func(what string, want limits.Holding) {
			t.Helper()
			got, err := h.Holdings(ctx, []limits.Window{month}, now)
			must(t, err)
			if len(got) != 1 || got[0] != want {
				t.Fatalf("%s: %+v, want %+v", what, got, want)
			}
		}
		read("unseeded", limits.Holding{})

		call := limits.Request{ID: "a", Windows: []limits.Window{month}, Expires: now.Add(time.Minute)}
		d, err := l.Reserve(ctx, call, now)
		must(t, err)
		if len(d.Unseeded) != 1 {
			t.Fatalf("a new budget window is not reported unseeded: %+v", d)
		}
		must(t, l.Seed(ctx, month, 50, d.Epoch))
		read("seeded", limits.Holding{Count: 50, Counted: true})
		if d, err = l.Reserve(ctx, call, now); err != nil || !d.Allowed {
			t.Fatalf("reserve: %+v, %v", d, err)
		}
		read("a call in flight", limits.Holding{Count: 350, Reserved: 300, Counted: true})
		must(t, l.Settle(ctx, call, []int64{120}))
		read("the call settled", limits.Holding{Count: 170, Counted: true})

		lapsing := limits.Request{ID: "b", Windows: []limits.Window{month}, Expires: now.Add(time.Second)}
		if d, err = l.Reserve(ctx, lapsing, now); err != nil || !d.Allowed {
			t.Fatalf("reserve: %+v, %v", d, err)
		}
		read("a second call in flight", limits.Holding{Count: 470, Reserved: 300, Counted: true})
		now = now.Add(2 * time.Second)
		read("its reservation lapsed", limits.Holding{Count: 170, Counted: true})
	})
}
