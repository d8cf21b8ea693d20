package appnet

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"
)

type fakeTunnels struct {
	holds  bool
	opened int
}

func (f *fakeTunnels) Holds(string) bool { return f.holds }
func (f *fakeTunnels) Open(context.Context, Target) (net.Conn, error) {
	f.opened++
	a, b := net.Pipe()
	_ = b.Close()
	return a, nil
}

func listen(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	return l.Addr().String()
}

func TestAutoPrefersTheTunnelAtTheControlPlane(t *testing.T) {
	ctx := context.Background()
	tun := &fakeTunnels{holds: true}
	a := &Auto{Tunnels: tun}
	c, err := a.Reach(ctx, Target{TaskID: "t1", WorkerID: "w1", Address: listen(t), Allow: Allow{Any: true}}) // a local pool: loopback is allowed
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	if tun.opened != 1 {
		t.Fatalf("the tunnel opened %d streams, want 1", tun.opened)
	}

	tun.holds = false
	c, err = a.Reach(ctx, Target{TaskID: "t1", WorkerID: "w1", Address: listen(t), Allow: Allow{Any: true}}) // a local pool: loopback is allowed
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	if tun.opened != 1 {
		t.Fatalf("with no tunnel held the instance was reached through one (%d streams)", tun.opened)
	}
}

func TestAutoAtASiteDialsDirectlyFirst(t *testing.T) {
	ctx := context.Background()
	tun := &fakeTunnels{holds: true}
	a := &Auto{Tunnels: tun, PreferDirect: true}
	c, err := a.Reach(ctx, Target{TaskID: "t1", WorkerID: "w1", Address: listen(t), Allow: Allow{Any: true}}) // a local pool: loopback is allowed
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	if tun.opened != 0 {
		t.Fatal("a reachable address went through the tunnel")
	}
	// Nothing listens on a closed listener's port: the tunnel takes over.
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := l.Addr().String()
	_ = l.Close()
	c, err = a.Reach(ctx, Target{TaskID: "t1", WorkerID: "w1", Address: dead, Allow: Allow{Any: true}}) // a local pool: loopback is allowed
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	if tun.opened != 1 {
		t.Fatal("an unreachable address did not fall back to the tunnel")
	}
}

func TestDirectRefusesAnInstanceThatIsNotReady(t *testing.T) {
	if _, err := (&Direct{}).Reach(context.Background(), Target{TaskID: "t1"}); !errors.Is(err, ErrNotReady) {
		t.Fatalf("err = %v, want ErrNotReady", err)
	}
}

func TestActivityKeepsTheLastUseAndTheBytes(t *testing.T) {
	now := time.Unix(1000, 0)
	a := NewActivity(func() time.Time { return now })
	a.Used("t1", 10)
	now = now.Add(time.Minute)
	a.Used("t1", 5)
	n := a.Of("t1")
	if !n.Last.Equal(now) || n.Bytes != 15 {
		t.Fatalf("note = %+v, want last %v and 15 bytes", n, now)
	}
	a.Forget("t1")
	if n := a.Of("t1"); n.Bytes != 0 {
		t.Fatalf("a forgotten instance still has %+v", n)
	}
}
