package limits

import (
	"strconv"
	"testing"
)

// The counter-name cache gives PREFIX+key for any key, and stays bounded
// however many windows go through it (a window's key changes with its
// period).
func TestCounterNamesAreCachedWithinBounds(t *testing.T) {
	r := NewRedis(nil, "p:")
	for i := 0; i < 3*maxCounters; i++ {
		key := "rate:user:u" + strconv.Itoa(i%(2*maxCounters))
		if got := r.counter(key); got != "p:"+key {
			t.Fatalf("counter(%q) = %q", key, got)
		}
		if n := len(r.counters); n > maxCounters {
			t.Fatalf("%d counter names cached, want at most %d", n, maxCounters)
		}
	}
	if got := r.member(Request{ID: "id", Windows: []Window{{Key: "b:proj", Amount: 1234567, Seeded: true}, {Key: "rate", Amount: 1}}}); got != "id\x00p:b:proj\x001234567" {
		t.Errorf("member = %q", got)
	}
}
