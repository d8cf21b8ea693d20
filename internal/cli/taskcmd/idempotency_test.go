package taskcmd_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/client"
)

// TestEnqueueRetriesOnceWithItsKey runs `klique enqueue` through a proxy
// that loses the answer to the first enqueue (the server did it, the
// client never heard): the CLI sends it again with the same idempotency
// key and one task exists.
func TestEnqueueRetriesOnceWithItsKey(t *testing.T) {
	const key = "klique-idem-test-bootstrap-key-0123456789abcdefghijk"
	ctx, app := startControlPlane(t, key, 60*time.Second)
	target, _ := url.Parse(app.URL())
	proxy := httputil.NewSingleHostReverseProxy(target)
	var lost atomic.Int32
	var mu sync.Mutex
	var keys []string
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if !strings.Contains(string(body), "enqueueTask") {
			proxy.ServeHTTP(w, r)
			return
		}
		mu.Lock()
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		mu.Unlock()
		if lost.Add(1) > 1 {
			proxy.ServeHTTP(w, r)
			return
		}
		// The server does it; the answer never reaches the client.
		proxy.ServeHTTP(httptest.NewRecorder(), r)
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	defer front.Close()
	t.Setenv("KLIQUE_CONFIG", filepath.Join(t.TempDir(), "none.json"))
	t.Setenv("KLIQUE_SERVER", front.URL)
	t.Setenv("KLIQUE_API_KEY", key)
	t.Setenv("KLIQUE_TOKEN", "")
	klique := func(args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		if code := run(ctx, args, strings.NewReader(""), &out, &errOut); code != 0 {
			t.Fatalf("klique %s: exit %d: %s", strings.Join(args, " "), code, errOut.String())
		}
		return out.String()
	}
	klique("apply", "-f", "../../../examples/estate.yaml")
	id := strings.TrimSpace(klique("enqueue", "-q", "--resource", "1 GPU", "--project", "fraud-models", "--group", "ml-research", "--name", "once", "--", "python", "train.py"))
	if len(keys) != 2 || keys[0] == "" || keys[1] != keys[0] {
		t.Fatalf("enqueue requests with keys %q: want the first lost and one retry, with the same key", keys)
	}
	var out struct {
		Tasks struct {
			Edges []struct{ Node struct{ ID, Name string } }
		}
	}
	if err := client.New(app.URL(), key).Do(ctx, `{ tasks(first: 100) { edges { node { id name } } } }`, nil, &out); err != nil {
		t.Fatal(err)
	}
	var once []string
	for _, e := range out.Tasks.Edges {
		if e.Node.Name == "once" {
			once = append(once, e.Node.ID)
		}
	}
	if len(once) != 1 || once[0] != id {
		t.Fatalf("tasks named once: %v, want just %s", once, id)
	}
	// A second run is a new request: it gets a new key and a new task.
	if id2 := strings.TrimSpace(klique("enqueue", "-q", "--resource", "1 GPU", "--project", "fraud-models", "--group", "ml-research", "--name", "once", "--", "python", "train.py")); id2 == id || len(keys) != 3 || keys[2] == keys[0] {
		t.Fatalf("a second command run got task %s (first %s) with keys %q", id2, id, keys)
	}
}
