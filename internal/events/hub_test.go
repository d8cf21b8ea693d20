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
	publish(7)
	for _, r := range []*Receiver[int]{a, b} {
		<-r.Ready()
		if v, missed, ok := r.Take(); !ok || v != 7 || missed != 0 {
			t.Fatalf("took %d (missed %d, ok %v), want 7", v, missed, ok)
		}
	}
	a.Close()
	if stopped.Load() != 0 {
		t.Fatal("the feed stopped while a subscriber remains")
	}
	b.Close()
	b.Close() // twice is harmless
	if stopped.Load() != 1 || h.Topics() != 0 {
		t.Fatalf("after the last subscriber left: %d stops, %d topics", stopped.Load(), h.Topics())
	}
}

func TestASlowReceiverLosesItsOldestPayloadsAndIsToldHowMany(t *testing.T) {
	var h Hub[int]
	slow := h.Join("q", 3, nil)
	fast := h.Join("q", 3, nil)
	done := make(chan struct{})
	go func() {
		for i := 1; i <= 10; i++ {
			h.Publish("q", i)
			if v, _, ok := fast.Take(); !ok || v != i {
				t.Errorf("fast receiver took %d, want %d", v, i)
			}
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("Publish blocked on a receiver that does not read")
	}
	// The slow one keeps the newest three, and the first it takes says
	// seven were dropped before it.
	want := []struct{ v, missed int }{{8, 7}, {9, 0}, {10, 0}}
	for _, w := range want {
		v, missed, ok := slow.Take()
		if !ok || v != w.v || missed != w.missed {
			t.Fatalf("took %d with %d missed (ok %v), want %d with %d missed", v, missed, ok, w.v, w.missed)
		}
	}
	if _, _, ok := slow.Take(); ok {
		t.Fatal("took more than the buffer holds")
	}
	if h.Dropped() != 7 {
		t.Fatalf("the hub counts %d dropped, want 7", h.Dropped())
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
