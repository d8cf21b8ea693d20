package appnet

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
)

// TestAddressRule checks the router's address rule on its own: what a
// reported address may be, for a pool with and without declared networks,
// and for one declared local.
func TestAddressRule(t *testing.T) {
	own := NewOwn()
	own.Add("10.0.0.1:8080")
	own.Add("0.0.0.0:9090")
	own.local = func() []netip.Addr {
		return []netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.9.9.9")}
	}
	worker := netip.MustParseAddr("10.0.0.5")
	plain := NewAllow(false, worker, nil)
	declared := NewAllow(false, worker, []string{"10.20.0.0/16"})
	local := NewAllow(true, worker, nil)
	if plain.String() != "10.0.0.5/32" || declared.String() != "10.0.0.5/32,10.20.0.0/16" || local.String() != "*" {
		t.Fatalf("allows: %q %q %q", plain, declared, local)
	}
	if ParseAllow(declared.String()).String() != declared.String() || !ParseAllow("*").Any || len(ParseAllow("").Networks) != 0 ||
		ParseAllow("not a cidr,10.1.0.0/16").String() != "10.1.0.0/16" {
		t.Fatal("ParseAllow does not read back what String writes, or widens a bad row")
	}
	for _, c := range []struct {
		allow Allow
		addr  string
		want  string // "" allowed
	}{
		{plain, "10.0.0.5:41234", ""},
		{plain, "10.0.0.6:41234", "outside the network its worker reports from"},
		{declared, "10.20.3.4:8000", ""},
		{declared, "10.21.3.4:8000", "outside the network"},
		{plain, "127.0.0.1:8000", "loopback"},
		{declared, "[::1]:8000", "loopback"},
		{plain, "169.254.169.254:80", "cloud metadata"},
		{plain, "100.100.100.200:80", "cloud metadata"},
		{plain, "[fd00:ec2::254]:80", "cloud metadata"},
		{plain, "169.254.10.1:80", "link-local"},
		{plain, "[fe80::1]:80", "link-local"},
		{plain, "[::ffff:127.0.0.1]:80", "loopback"},
		{plain, "0.0.0.0:80", "not a unicast"},
		{plain, "224.0.0.1:80", "link-local"},
		{plain, "239.1.1.1:80", "not a unicast"},
		{NewAllow(false, netip.MustParseAddr("10.0.0.1"), nil), "10.0.0.1:8080", "the control plane's own listeners"},
		{NewAllow(false, netip.MustParseAddr("10.9.9.9"), nil), "10.9.9.9:9090", "the control plane's own listeners"},
		{NewAllow(false, netip.MustParseAddr("10.9.9.9"), nil), "10.9.9.9:9091", ""},
		{NewAllow(false, netip.Addr{}, nil), "10.0.0.5:80", "none known"},
		{local, "127.0.0.1:8000", ""},
		{local, "169.254.169.254:80", ""},
		{local, "10.0.0.1:8080", ""},
	} {
		ap := netip.MustParseAddrPort(c.addr)
		err := Check(c.allow, own, ap.Addr(), ap.Port())
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s under %q: refused (%v), want allowed", c.addr, c.allow, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s under %q: %v, want a refusal saying %q", c.addr, c.allow, err, c.want)
		}
	}
}

// fakeResolver answers every name with the same addresses.
type fakeResolver []netip.Addr

func (f fakeResolver) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	return f, nil
}

// TestCheckAddressResolvesNames: a name is judged by what it resolves to;
// one that does not parse as host:port is refused.
func TestCheckAddressResolvesNames(t *testing.T) {
	allow := NewAllow(false, netip.MustParseAddr("10.0.0.5"), []string{"10.20.0.0/16"})
	ctx := context.Background()
	if why := CheckAddress(ctx, fakeResolver{netip.MustParseAddr("10.20.0.9")}, allow, nil, "node17:41234"); why != "" {
		t.Fatalf("a name in the declared network: %s", why)
	}
	why := CheckAddress(ctx, fakeResolver{netip.MustParseAddr("10.20.0.9"), netip.MustParseAddr("127.0.0.1")}, allow, nil, "node17:41234")
	if !strings.Contains(why, "loopback") || !strings.Contains(why, "node17 resolves to it") || !strings.Contains(why, "appNetworks") {
		t.Fatalf("a name that also resolves to loopback: %q", why)
	}
	if why := CheckAddress(ctx, fakeResolver{}, allow, nil, "no-port"); !strings.Contains(why, "not host:port") {
		t.Fatalf("no port: %q", why)
	}
}

// TestDirectChecksTheIPItDials: the dialer applies the rule to the IP it
// connects to, after resolution, so a name accepted when it was reported
// cannot later be resolved (rebound) to a loopback service; a refused
// address is never dialled.
func TestDirectChecksTheIPItDials(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan struct{}, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- struct{}{}
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	d := &Direct{}
	ctx := context.Background()
	var refused *RefusedError
	// "localhost" stands for a name that now resolves to loopback.
	for _, addr := range []string{"localhost:" + itoa(port), ln.Addr().String()} {
		_, err = d.Reach(ctx, Target{TaskID: "t1", Address: addr, Allow: ParseAllow("10.0.0.0/8")})
		if !errors.As(err, &refused) || !strings.Contains(err.Error(), "loopback") {
			t.Fatalf("dial %s outside the rule: %v, want the rule's refusal", addr, err)
		}
	}
	_, err = d.Reach(ctx, Target{TaskID: "t1", Address: ln.Addr().String(), Allow: ParseAllow("*"), Refused: "the address was refused: a reason"})
	if !errors.As(err, &refused) || !strings.Contains(err.Error(), "a reason") {
		t.Fatalf("a refused address: %v", err)
	}
	select {
	case <-accepted:
		t.Fatal("a refused dial reached the listener")
	default:
	}
	c, err := d.Reach(ctx, Target{TaskID: "t1", Address: ln.Addr().String(), Allow: ParseAllow("*")})
	if err != nil {
		t.Fatalf("a local pool's loopback instance: %v", err)
	}
	c.Close()
	<-accepted
}

func itoa(n int) string { return strconv.Itoa(n) }
