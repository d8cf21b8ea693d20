package appnet

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The router's address rule (issue 39, defect 7). An app instance's
// address comes from its worker's report, that is from whoever holds a
// pool's worker credential; dialled as it is, it would let that holder
// reach anything the control plane can (a service on its loopback, a cloud
// metadata endpoint, the control plane's own private listeners). So a
// direct dial reaches only:
//
//   - the network the report came from (the worker's, or an HPC job's
//     compute node's, own address), or a CIDR the estate declares for the
//     pool (appNetworks);
//   - never a loopback, link-local, metadata, unspecified or multicast
//     address, nor one of the control plane's own listeners,
//
// unless the pool is declared local (one machine, tests), when any address
// goes. The platform checks the rule when the address is reported and
// records what it decided on the instance (an Allow, or a refusal); the
// dialer checks the IP it actually connects to against that Allow, so a
// name that resolves elsewhere later (DNS rebinding) is refused too. A
// worker's tunnel is not affected: it dials only its own instances.

// AllowAny is the Allow of a pool declared local.
const AllowAny = "*"

// Allow is the networks a direct dial to an instance may reach.
type Allow struct {
	Any      bool
	Networks []netip.Prefix
}

// String is the Allow as stored (model.TaskRun.AppAllow).
func (a Allow) String() string {
	if a.Any {
		return AllowAny
	}
	parts := make([]string, len(a.Networks))
	for i, n := range a.Networks {
		parts[i] = n.String()
	}
	return strings.Join(parts, ",")
}

// ParseAllow reads a stored Allow; "" allows nothing (an address reported
// before the rule, or never checked), and a part that does not parse is
// skipped, so a bad row narrows the rule rather than widening it.
func ParseAllow(s string) Allow {
	if s == AllowAny {
		return Allow{Any: true}
	}
	var a Allow
	for _, part := range strings.Split(s, ",") {
		if p, err := netip.ParsePrefix(strings.TrimSpace(part)); err == nil {
			a.Networks = append(a.Networks, p.Masked())
		}
	}
	return a
}

// NewAllow is the Allow of an address reported from peer (invalid when not
// known) on a pool with the given appNetworks, or any address for a local
// pool. Networks that do not parse are left out (the estate refuses them).
func NewAllow(local bool, peer netip.Addr, networks []string) Allow {
	if local {
		return Allow{Any: true}
	}
	var a Allow
	if peer.IsValid() {
		peer = peer.Unmap()
		a.Networks = append(a.Networks, netip.PrefixFrom(peer, peer.BitLen()))
	}
	for _, n := range networks {
		if p, err := netip.ParsePrefix(n); err == nil {
			a.Networks = append(a.Networks, p.Masked())
		}
	}
	return a
}

// metadata are the cloud metadata endpoints outside the link-local range
// (169.254.169.254 and fe80::/10 are link-local already).
var metadata = []netip.Addr{
	netip.MustParseAddr("100.100.100.200"), // Alibaba Cloud
	netip.MustParseAddr("fd00:ec2::254"),   // AWS over IPv6
	netip.MustParseAddr("192.0.0.192"),     // Oracle Cloud (classic)
}

// Own are the control plane's (or a router's) own listeners: an
// instance's address may never be one of them.
type Own struct {
	mu    sync.RWMutex
	addrs []netip.AddrPort
	// local lists the machine's own addresses, for a listener on an
	// unspecified address (0.0.0.0:8080 answers on every one of them).
	local func() []netip.Addr
}

// NewOwn returns an empty set of listeners.
func NewOwn() *Own { return &Own{local: localAddrs} }

// Add notes a listener's address (host:port, as net.Listener.Addr gives).
func (o *Own) Add(addr string) {
	if o == nil {
		return
	}
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return
	}
	o.mu.Lock()
	o.addrs = append(o.addrs, netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()))
	o.mu.Unlock()
}

// Is reports whether ip:port is one of the listeners.
func (o *Own) Is(ip netip.Addr, port uint16) bool {
	if o == nil {
		return false
	}
	o.mu.RLock()
	addrs := slices.Clone(o.addrs)
	o.mu.RUnlock()
	var local []netip.Addr
	for _, a := range addrs {
		if a.Port() != port {
			continue
		}
		if a.Addr() == ip {
			return true
		}
		if a.Addr().IsUnspecified() {
			if local == nil {
				local = o.local()
			}
			if ip.IsLoopback() || slices.Contains(local, ip) {
				return true
			}
		}
	}
	return false
}

func localAddrs() []netip.Addr {
	var out []netip.Addr
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			out = append(out, p.Addr().Unmap())
		}
	}
	return out
}

// Check applies the rule to one IP and port an instance would be dialled
// at: nil when allowed, else an error whose text says why and what to do.
func Check(a Allow, own *Own, ip netip.Addr, port uint16) error {
	ip = ip.Unmap()
	if a.Any {
		return nil
	}
	ap := netip.AddrPortFrom(ip, port).String()
	switch {
	case own.Is(ip, port):
		return fmt.Errorf("%s is one of the control plane's own listeners", ap)
	case ip.IsLoopback():
		return fmt.Errorf("%s is a loopback address", ap)
	case slices.Contains(metadata, ip) || ip == netip.MustParseAddr("169.254.169.254"):
		return fmt.Errorf("%s is a cloud metadata address", ap)
	case ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast():
		return fmt.Errorf("%s is a link-local address", ap)
	case ip.IsUnspecified() || ip.IsMulticast() || ip.IsInterfaceLocalMulticast():
		return fmt.Errorf("%s is not a unicast address", ap)
	}
	for _, n := range a.Networks {
		if n.Contains(ip) {
			return nil
		}
	}
	nets := a.String()
	if nets == "" {
		nets = "none known"
	}
	return fmt.Errorf("%s is outside the network its worker reports from and the pool's appNetworks (%s)", ap, nets)
}

// Hint is what a refusal tells the admin to do.
const Hint = "declare the instances' network in the pool's appNetworks in the estate, or report an address on the worker's own network (klique worker --app-host)"

// Resolver looks names up; net.DefaultResolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// CheckAddress applies the rule to a reported host:port: an IP is checked
// as it is, a name by every address it resolves to now (a name that does
// not resolve here is left to the dialer, which checks the IP it
// connects to). It returns why the address is refused, or "".
func CheckAddress(ctx context.Context, r Resolver, a Allow, own *Own, address string) string {
	host, portText, err := net.SplitHostPort(address)
	port, perr := strconv.ParseUint(portText, 10, 16)
	if err != nil || perr != nil {
		return fmt.Sprintf("address %q is not host:port", address)
	}
	var ips []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		ips = []netip.Addr{ip}
	} else if !a.Any {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		ips, _ = r.LookupNetIP(ctx, "ip", host)
	}
	for _, ip := range ips {
		if err := Check(a, own, ip, uint16(port)); err != nil {
			if ip.String() != host {
				return fmt.Sprintf("%s (%s resolves to it): %s", err, host, Hint)
			}
			return err.Error() + ": " + Hint
		}
	}
	return ""
}

// control is a net.Dialer Control func that applies the rule to the
// address a connection is actually about to be made to: after name
// resolution, so a name cannot be rebound past it.
func control(a Allow, own *Own) func(network, address string, _ syscall.RawConn) error {
	return func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return fmt.Errorf("the router's address rule: cannot read %q: %w", address, err)
		}
		if err := Check(a, own, ap.Addr(), ap.Port()); err != nil {
			return &RefusedError{Reason: err.Error() + ": " + Hint}
		}
		return nil
	}
}

// RefusedError is a dial the address rule refused.
type RefusedError struct{ Reason string }

func (e *RefusedError) Error() string { return "the router's address rule refused it: " + e.Reason }
