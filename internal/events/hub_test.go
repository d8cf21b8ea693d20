package events

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/redistest"
)

func TestAHubStartsOneFeedPerTopicAndStopsItWithTheLastSubscriber(t *testing.T) {
	var h Hub[int]
	var started, stopped atomic.Int32
	var publish func(int)
	feed := func(p func(int)) func() {
		started.Add(1)
		publish = p
		return func() { stopped.Add(1) }
	}
	a := h.Join("q", 4, feed)
	b := h.Join("q", 4, feed)
	if started.Load() != 1 || h.Subscribers("q") != 2 || h.Topics() != 1 {
		t.Fatalf("started %d feeds for %d subscribers of %d topics, want 1 feed, 2 subscribers, 1 topic", started.Load(), h.Subscribers("q"), h.Topics())
	}
	var closed atomic.Int32
	for _, r := range []*Receiver[int]{a, b} {
		r.Start([]int{0}, nil, func() { closed.Add(1) })
	}
	publish(7)
	for _, r := range []*Receiver[int]{a, b} {
		if got := []int{<-r.C(), <-r.C()}; got[0] != 0 || got[1] != 7 {
			t.Fatalf("took %v, want the snapshot 0, then 7", got)
		}
	}
	a.Close()
	if stopped.Load() != 0 {
		t.Fatal("the feed stopped while a subscriber remains")
	}
	if _, ok := <-a.C(); ok || closed.Load() != 1 {
		t.Fatalf("a closed receiver's channel is open, or its onClose ran %d times, want once", closed.Load())
	}
	b.Close()
	b.Close() // twice is harmless
	if stopped.Load() != 1 || h.Topics() != 0 || closed.Load() != 2 {
		t.Fatalf("after the last subscriber left: %d stops, %d topics, %d onClose", stopped.Load(), h.Topics(), closed.Load())
	}
}

func TestWhatIsPublishedBeforeStartComesAfterTheSnapshot(t *testing.T) {
	var h Hub[int]
	r := h.Join("q", 2, nil)
	for i := 1; i <= 3; i++ {
		h.Publish("q", i) // held: the newest two are kept
	}
	r.Start([]int{100}, func(v, missed int) (int, bool, bool) { return v + 10*missed, true, false })
	got := []int{<-r.C(), <-r.C(), <-r.C()}
	// The snapshot first, then 2 told (by the filter) of the one dropped
	// before it, then 3.
	if got[0] != 100 || got[1] != 12 || got[2] != 3 {
		t.Fatalf("took %v, want [100 12 3]", got)
	}
}

func TestASlowReceiverGetsTheNewestPayloadAndIsToldHowManyItMissed(t *testing.T) {
	var h Hub[int]
	slow := h.Join("q", 3, nil)
	fast := h.Join("q", 3, nil)
	type got struct{ v, missed int }
	missedIn := func(v, missed int) (int, bool, bool) { return v*100 + missed, true, false }
	slow.Start(nil, missedIn)
	fast.Start(nil, missedIn)
	done := make(chan struct{})
	go func() {
		for i := 1; i <= 10; i++ {
			h.Publish("q", i)
			if v := <-fast.C(); v != i*100 {
				t.Errorf("fast receiver took %d, want %d", v, i*100)
			}
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("Publish blocked on a receiver that does not read")
	}
	// The slow one's channel (room for 3) filled with 1, 2 and 3; 4 found
	// it full, dropped those three and came in their place, told of
	// them; 5 and 6 followed; 7 dropped 4, 5 and 6 (and told of what 4
	// told), 8 and 9 followed, and 10 dropped 7, 8 and 9: it holds 10
	// alone, told of all 9 before it.
	var all []got
	for len(slow.C()) > 0 {
		v := <-slow.C()
		all = append(all, got{v / 100, v % 100})
	}
	if len(all) != 1 || all[0] != (got{10, 9}) {
		t.Fatalf("took %v, want only 10, told of 9 missed", all)
	}
	if h.Dropped() != 9 {
		t.Fatalf("the hub counts %d dropped, want 9", h.Dropped())
	}
}

func TestAFilterHidesPayloadsAndEndsTheSubscription(t *testing.T) {
	var h Hub[int]
	r := h.Join("q", 4, nil)
	var released atomic.Int32
	r.Start(nil, func(v, missed int) (int, bool, bool) {
		return v, v%2 == 0, v == 5
	}, func() { released.Add(1) })
	for i := 1; i <= 6; i++ {
		h.Publish("q", i)
	}
	var got []int
	for v := range r.C() {
		got = append(got, v)
	}
	if len(got) != 2 || got[0] != 2 || got[1] != 4 {
		t.Fatalf("took %v, want only the even payloads before the end at 5", got)
	}
	if released.Load() != 1 || h.Subscribers("q") != 0 {
		t.Fatalf("after the filter ended it: onClose ran %d times, %d subscribers left", released.Load(), h.Subscribers("q"))
	}
}

func TestABridgeCarriesEventsBetweenReplicasOnce(t *testing.T) {
	client, prefix := redistest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	channel := prefix + "events"
	one, two := NewBus(), NewBus()
	b1, err := BridgeRedis(ctx, one, client, channel, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b1.Close()
	b2, err := BridgeRedis(ctx, two, client, channel, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	onOne, onTwo := one.Subscribe(8, nil), two.Subscribe(8, nil)

	one.Publish(Event{TenantID: "t", Kind: "task.placed", ObjectID: "x", At: time.Now().UTC()})
	for name, s := range map[string]*Subscription{"the publishing replica": onOne, "the other replica": onTwo} {
		select {
		case e := <-s.C:
			if e.Kind != "task.placed" || e.ObjectID != "x" || e.TenantID != "t" {
				t.Fatalf("%s got %+v", name, e)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s got nothing", name)
		}
	}
	// The publishing replica does not get its own event back from Redis.
	select {
	case e := <-onOne.C:
		t.Fatalf("the publishing replica got its event twice: %+v", e)
	case <-time.After(300 * time.Millisecond):
	}
}

// TestAReceiverReadingDuringADropIsToldOfEveryPayloadItMissed: a reader
// that takes payloads while a publish is dropping the unread ones (the
// two take from the same channel, interleaved) must still account for
// every payload, read or told of. Counting the drained payloads as the
// newest sent lost what a payload taken in the middle had told (seen as
// a dashboard reader told of 234 of 251 updates on a loaded machine).
func TestAReceiverReadingDuringADropIsToldOfEveryPayloadItMissed(t *testing.T) {
	const published = 20000
	type payload struct{ seq, missed int }
	for round := 0; round < 20; round++ {
		var h Hub[*payload]
		r := h.Join("q", 4, nil)
		r.ToldBy(func(p *payload) int { return p.missed })
		r.Start(nil, func(p *payload, missed int) (*payload, bool, bool) {
			return &payload{seq: p.seq, missed: missed}, true, false
		})
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := 1; i <= published; i++ {
				h.Publish("q", &payload{seq: i})
			}
		}()
		got, told, last := 0, 0, 0
		for last < published {
			p := <-r.C()
			if p.seq <= last {
				t.Fatalf("round %d: took %d after %d", round, p.seq, last)
			}
			got, told, last = got+1, told+p.missed, p.seq
		}
		<-done
		if got+told != published {
			t.Fatalf("round %d: took %d and was told of %d missed: %d in all, of %d published", round, got, told, got+told, published)
		}
	}
}
