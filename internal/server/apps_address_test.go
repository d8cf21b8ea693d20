package server_test

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/klique-ai/klique/internal/agentapi"
	"github.com/klique-ai/klique/internal/citest"
)

// TestAppAddressRule reproduces the SSRF of issue 39 (defect 7): a holder
// of a pool's worker credential claims an app instance and reports it
// ready at an address of their choosing, which the router would dial from
// the control plane's network. A loopback service, a cloud metadata
// address, a link-local one, the control plane's own listener, and a name
// that resolves to loopback are each refused, with the reason recorded on
// the instance (GraphQL addressRefused) and in the router's answer, and
// the service behind them is never reached; an address inside the pool's
// declared appNetworks is served, and so is loopback once the pool is
// declared local.
func TestAppAddressRule(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	alice := dashboardMember(t, ts)
	w := onpremWorker(t, ts) // registers, and heartbeats, from 127.0.0.1
	ts.mustGQL(t, adminKey, `mutation($in: AppInput!) { putApp(input: $in) { app { name } } }`, map[string]any{"in": map[string]any{
		"name": "echo", "kind": "session", "port": 8000, "run": map[string]any{"process": "python3 -m http.server {port}"}}})

	// A private service on the control plane's loopback: what the
	// attacker wants to read.
	var hits atomic.Int64
	private := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		_, _ = io.WriteString(w, "PRIVATE-MODEL-LIST")
	}))
	t.Cleanup(private.Close)
	privateAddr := strings.TrimPrefix(private.URL, "http://")
	own := strings.TrimPrefix(ts.url, "http://")
	_, privatePort, _ := net.SplitHostPort(privateAddr)

	launch := func(t *testing.T) (string, *agentapi.Assignment) {
		t.Helper()
		d := ts.mustGQL(t, alice, launchMutation, map[string]any{"in": map[string]any{"app": "echo", "computeResource": "1 GPU", "project": "fraud-models"}})
		id := str(d, "launchApp", "id")
		place(t, ts)
		return id, w.claim(id)
	}
	instance := func(t *testing.T, id string) map[string]any {
		t.Helper()
		d := ts.mustGQL(t, alice, `query($id: ID!) { appInstance(id: $id) { state address addressRefused addressNetworks } }`, map[string]any{"id": id})
		return d["appInstance"].(map[string]any)
	}
	open := func(t *testing.T, id string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, ts.url+"/apps/"+id+"/", nil)
		req.Header.Set("Authorization", "Bearer "+alice)
		resp, err := ts.http.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	id, a := launch(t)
	for _, c := range []struct{ name, addr, why string }{
		{"a loopback service", privateAddr, "is a loopback address"},
		{"a name that resolves to loopback", "localhost:" + privatePort, "localhost resolves to it"},
		{"the cloud metadata address", "169.254.169.254:80", "cloud metadata address"},
		{"a link-local address", "[fe80::1]:80", "link-local address"},
		{"the control plane's own listener", own, "the control plane's own listeners"},
		{"an address outside the worker's network", "198.51.100.7:8000", "outside the network its worker reports from"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w.heartbeatApp(a, c.addr)
			in := instance(t, id)
			refused, _ := in["addressRefused"].(string)
			if in["state"] != "ready" || in["address"] != c.addr || !strings.Contains(refused, c.why) || !strings.Contains(refused, "appNetworks") {
				t.Fatalf("reported at %s, the instance reads %v: want it refused (%q), saying what to do", c.addr, in, c.why)
			}
			code, body := open(t, id)
			if code != http.StatusBadGateway || !strings.Contains(body, c.why) || strings.Contains(body, "PRIVATE") {
				t.Fatalf("opening it answered %d %s: want 502 with the rule's reason", code, body)
			}
		})
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the private service was reached %d times", n)
	}

	// An address inside the pool's declared appNetworks is served: the
	// instance listens on this machine's own non-loopback address, which
	// the worker (on loopback) is not on.
	ip := nonLoopbackIP(t)
	declare := func(t *testing.T, extra string) { declareOnprem(t, ts, extra) }
	t.Run("an address in the declared appNetworks is served", func(t *testing.T) {
		if !ip.IsValid() {
			citest.Missing(t, "this machine has no non-loopback IPv4 address to serve an instance on")
		}
		declare(t, "    appNetworks: ["+netip.PrefixFrom(ip, 32).String()+"]\n")
		ln, err := net.Listen("tcp", netip.AddrPortFrom(ip, 0).String())
		if err != nil {
			t.Fatal(err)
		}
		inst := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "hello from the instance") })}
		go func() { _ = inst.Serve(ln) }()
		t.Cleanup(func() { _ = inst.Close() })
		id, a := launch(t)
		w.heartbeatApp(a, ln.Addr().String())
		if in := instance(t, id); in["addressRefused"] != "" || !strings.Contains(strings.Join(strs(in["addressNetworks"]), ","), ip.String()+"/32") {
			t.Fatalf("an address in the declared network reads %v", in)
		}
		if code, body := open(t, id); code != http.StatusOK || body != "hello from the instance" {
			t.Fatalf("opening it answered %d %s", code, body)
		}
	})

	t.Run("a pool declared local may report loopback", func(t *testing.T) {
		declare(t, "    local: true\n")
		id, a := launch(t)
		w.heartbeatApp(a, privateAddr)
		if in := instance(t, id); in["addressRefused"] != "" || strings.Join(strs(in["addressNetworks"]), ",") != "*" {
			t.Fatalf("a local pool's loopback instance reads %v", in)
		}
		if code, body := open(t, id); code != http.StatusOK || body != "PRIVATE-MODEL-LIST" {
			t.Fatalf("opening it answered %d %s", code, body)
		}
	})
}

// declareOnprem applies the example estate with fields added to its
// onprem-k8s pool ("    local: true\n"): a test whose instances listen on
// loopback declares the pool local (the router's address rule).
func declareOnprem(t *testing.T, ts *testServer, fields string) {
	t.Helper()
	doc := strings.Replace(readExample(t, "estate.yaml"), "  - name: onprem-k8s\n", "  - name: onprem-k8s\n"+fields, 1)
	ts.mustGQL(t, adminKey, `mutation($doc: String!) { applyEstate(document: $doc) { summary } }`, map[string]any{"doc": doc})
}

// nonLoopbackIP is one of this machine's IPv4 addresses that is neither
// loopback nor link-local (invalid when it has none).
func nonLoopbackIP(t *testing.T) netip.Addr {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			if ip := p.Addr(); ip.Is4() && !ip.IsLoopback() && !ip.IsLinkLocalUnicast() {
				return ip
			}
		}
	}
	return netip.Addr{}
}

func strs(v any) []string {
	var out []string
	list, _ := v.([]any)
	for _, x := range list {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}
