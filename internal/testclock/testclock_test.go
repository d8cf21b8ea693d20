package testclock

import (
	"testing"
	"time"
)

func TestClockMovesOnlyWhenMoved(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	c := New(start)
	if !c.Now().Equal(start) {
		t.Fatalf("a new clock reads %s, want %s", c.Now(), start)
	}
	c.Add(90 * time.Second)
	if want := start.Add(90 * time.Second); !c.Now().Equal(want) {
		t.Fatalf("after Add it reads %s, want %s", c.Now(), want)
	}
	c.Set(start)
	if !c.Now().Equal(start) {
		t.Fatalf("after Set it reads %s, want %s", c.Now(), start)
	}
}
