package events

import (
	"testing"
	"time"
)

func TestPublishReachesMatchingSubscribersOnly(t *testing.T) {
	b := NewBus()
	all := b.Subscribe(4, nil)
	defer all.Close()
	tenantA := b.Subscribe(4, func(e Event) bool { return e.TenantID == "a" })
	defer tenantA.Close()

	b.Publish(Event{TenantID: "b", Kind: "task.enqueued"})
	b.Publish(Event{TenantID: "a", Kind: "pool.created"})

	if got := (<-all.C).TenantID; got != "b" {
		t.Fatalf("first event to the unfiltered subscriber is of tenant %q, want b", got)
	}
	if got := (<-all.C).TenantID; got != "a" {
		t.Fatalf("second event to the unfiltered subscriber is of tenant %q, want a", got)
	}
	select {
	case e := <-tenantA.C:
		if e.TenantID != "a" || e.Kind != "pool.created" {
			t.Fatalf("filtered subscriber got %+v", e)
		}
	case <-time.After(time.Second):
		t.Fatal("filtered subscriber got nothing")
	}
	select {
	case e := <-tenantA.C:
		t.Fatalf("filtered subscriber got a second event %+v", e)
	default:
	}
}

func TestAFullSubscriberDropsInsteadOfBlocking(t *testing.T) {
	b := NewBus()
	slow := b.Subscribe(2, nil)
	defer slow.Close()
	done := make(chan struct{})
	go func() {
		for i := 0; i < 10; i++ {
			b.Publish(Event{Kind: "x"})
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("Publish blocked on a subscriber that does not read")
	}
	if got := slow.Dropped(); got != 8 {
		t.Fatalf("dropped %d events, want 8", got)
	}
}

func TestCloseStopsDeliveryAndClosesTheChannel(t *testing.T) {
	b := NewBus()
	s := b.Subscribe(1, nil)
	s.Close()
	s.Close() // twice is harmless
	b.Publish(Event{Kind: "x"})
	if _, ok := <-s.C; ok {
		t.Fatal("channel still open after Close")
	}
}
