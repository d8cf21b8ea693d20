//go:build faults

package faults

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"

	"github.com/klique-ai/klique/internal/eventually"
)

// engineLeaseTTL is how long the engine lease outlives a replica that
// stops renewing it (engine/loop: leaseTTL): the time a survivor may take
// to take over.
const engineLeaseTTL = 10 * time.Second

// subscription is a graphql-transport-ws subscription whose updates are
// kept with the time they arrived.
type subscription struct {
	mu      sync.Mutex
	kinds   []string
	times   []time.Time
	err     error
	conn    *websocket.Conn
	closedc chan struct{}
}

// subscribe opens a WebSocket to /graphql with cred in connection_init and
// subscribes to query; the field's "kind" of every update is recorded.
func subscribe(t *testing.T, url, cred, query string, vars map[string]any, field string) *subscription {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(url, "http")+"/graphql", &websocket.DialOptions{Subprotocols: []string{"graphql-transport-ws"}})
	if err != nil {
		t.Fatalf("dial the subscription endpoint: %v", err)
	}
	c.SetReadLimit(16 << 20)
	if err := wsjson.Write(ctx, c, map[string]any{"type": "connection_init", "payload": map[string]any{"Authorization": "Bearer " + cred}}); err != nil {
		t.Fatal(err)
	}
	for {
		var m map[string]any
		if err := wsjson.Read(ctx, c, &m); err != nil {
			t.Fatalf("waiting for connection_ack: %v", err)
		}
		if m["type"] == "connection_ack" {
			break
		}
	}
	if err := wsjson.Write(ctx, c, map[string]any{"id": "1", "type": "subscribe", "payload": map[string]any{"query": query, "variables": vars}}); err != nil {
		t.Fatal(err)
	}
	s := &subscription{conn: c, closedc: make(chan struct{})}
	go func() {
		defer close(s.closedc)
		for {
			var m struct {
				Type    string          `json:"type"`
				Payload json.RawMessage `json:"payload"`
			}
			if err := wsjson.Read(context.Background(), c, &m); err != nil {
				s.mu.Lock()
				s.err = err
				s.mu.Unlock()
				return
			}
			switch m.Type {
			case "ping":
				_ = wsjson.Write(context.Background(), c, map[string]any{"type": "pong"})
			case "next":
				var p struct {
					Data map[string]any `json:"data"`
				}
				_ = json.Unmarshal(m.Payload, &p)
				s.mu.Lock()
				s.kinds = append(s.kinds, str(p.Data, field, "kind"))
				s.times = append(s.times, time.Now())
				s.mu.Unlock()
			case "error", "complete":
				s.mu.Lock()
				s.err = fmt.Errorf("subscription ended: %s %s", m.Type, m.Payload)
				s.mu.Unlock()
				return
			}
		}
	}()
	t.Cleanup(func() { _ = c.CloseNow(); <-s.closedc })
	return s
}

// since counts the updates of a kind (any when "") that arrived after at.
func (s *subscription) since(at time.Time, kind string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for i, k := range s.kinds {
		if s.times[i].After(at) && (kind == "" || k == kind) {
			n++
		}
	}
	return n
}

// leaseHolder is the replica holding the engine lease, as the leases
// table says (its holder is host-pid-nanoseconds), or nil.
func leaseHolder(db *sql.DB, replicas ...*server) *server {
	var holder string
	var expires int64
	if err := db.QueryRow(`SELECT holder, expires_at FROM leases WHERE name = 'engine'`).Scan(&holder, &expires); err != nil {
		return nil
	}
	if time.UnixMicro(expires).Before(time.Now()) {
		return nil
	}
	for _, r := range replicas {
		if !r.p.exited() && strings.Contains(holder, fmt.Sprintf("-%d-", r.p.pid())) {
			return r
		}
	}
	return nil
}

// TestTwoReplicas runs two replicas of `klique serve` on one PostgreSQL
// and one Redis, with producers, gateway callers and a subscription spread
// over both, and kills the engine's lease holder with SIGKILL: the other
// must take the lease over and place work within the lease's lifetime, its
// subscription must keep delivering, nothing acknowledged may be lost or
// run twice, and the gateway budget must hold across both.
func TestTwoReplicas(t *testing.T) {
	dbURL := pgDatabase(t)
	rd := startRedis(t)
	a := startServer(t, serveOpts{name: "serve-a", databaseURL: dbURL, redisURL: rd.url})
	tn := setupTenant(t, a)
	up := fakeUpstream(t)
	const budget = 1500 * callTokens
	applyGateway(t, a.url, up.URL, budget)
	b := startServer(t, serveOpts{name: "serve-b", databaseURL: dbURL, redisURL: rd.url})
	db := openDB(t, a)

	var leader, survivor *server
	eventually.Within(t, 2*engineLeaseTTL, "a replica to hold the engine lease", func() bool { leader = leaseHolder(db, a, b); return leader != nil })
	survivor = b
	if leader == b {
		survivor = a
	}
	marker := filepath.Join(t.TempDir(), "runs")
	t.Cleanup(func() { killRuns(readMarkers(t, marker)) })
	// A worker connects to one control-plane address; here the
	// survivor's (behind a load balancer it would be either).
	w := startWorker(t, survivor.url, tn, "w1", "0-7")
	sub := subscribe(t, survivor.url, tn.alice, `subscription($cr: ID!) { queueChanged(computeResource: $cr) { kind } }`,
		map[string]any{"cr": tn.crID}, "queueChanged")
	urls := []string{a.url, b.url}
	prod := startProducer(urls, tn.alice, marker, 5, 150*time.Millisecond)
	calls := startCallers(100, urls, tn.alice, "fraud-models")
	// The leader's engine places the tasks; the survivor's subscriber
	// sees those placements through Redis.
	start := time.Now()
	if !eventually.Poll(30*time.Second, func() bool { return sub.since(start, "task.placed") >= 3 }) {
		t.Fatalf("the survivor's subscription saw %d placements by the leader's engine in 30 s (%d updates)", sub.since(start, "task.placed"), sub.since(start, ""))
	}

	leader.kill9()
	killed := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	probe, err := enqueue(ctx, survivor.url, tn.alice, "probe", taskScript(marker, 1))
	cancel()
	if err != nil {
		t.Fatalf("enqueue on the survivor after the kill: %v", err)
	}
	if !eventually.Poll(3*engineLeaseTTL-time.Since(killed), func() bool {
		d, err := gql(context.Background(), survivor.url, tn.alice, `query($id: ID!) { task(id: $id) { status } }`, map[string]any{"id": probe})
		return err == nil && str(d, "task", "status") != "QUEUED"
	}) {
		t.Fatalf("a task enqueued on the survivor was not placed %v after the leader was killed", time.Since(killed))
	}
	takeover := time.Since(killed)
	if h := leaseHolder(db, a, b); h != survivor {
		t.Errorf("after the takeover the engine lease is not the survivor's")
	}
	// The load goes on with the survivor alone before it stops.
	prod.waitAcked(t, 10, 30*time.Second)
	acked, failures := prod.stop()
	calls.waitRefusing(2*time.Second, 30*time.Second)
	calls.stop()
	placedAfter := sub.since(killed, "task.placed")
	sub.mu.Lock()
	subErr := sub.err
	sub.mu.Unlock()
	waitDrained(t, survivor.url, tn.alice, 60*time.Second)
	w.p.stop(20 * time.Second)
	survivor.p.stop(20 * time.Second)

	f := readFacts(t, db)
	v := judge(append(acked, probe), readMarkers(t, marker), f)
	rows := ledgerSpend(t, db, "fraud-models")
	total, over, _ := overspendBound(rows, budget, nil)
	report(t, "scenario=replicas store=postgres replicas=2 kills=1 takeover=%s lease=%s tasks=%d acked=%d refused_during_faults=%d lost=%d doubled=%d overlapping_runs=%d open_intervals=%d placements_seen_after_kill=%d budget=%d spent=%d overspend=%d",
		takeover.Round(10*time.Millisecond), engineLeaseTTL, v.tasks, v.acked, failures, v.lost, v.doubled, v.overlapping, f.open, placedAfter, budget, total, over)
	for _, p := range v.problems {
		t.Error(p)
	}
	if takeover > engineLeaseTTL+2*time.Second {
		t.Errorf("the survivor took over %v after the kill; the lease lasts %v", takeover, engineLeaseTTL)
	}
	if placedAfter == 0 || subErr != nil {
		t.Errorf("the survivor's subscription delivered %d placements after the kill (error: %v)", placedAfter, subErr)
	}
	if f.open != 0 || f.overlapping != 0 {
		t.Errorf("the ledger has %d open and %d overlapping intervals after every task ended", f.open, f.overlapping)
	}
	if calls.refused.Load() == 0 {
		t.Errorf("no gateway call was refused: the budget was never used up, so the scenario proves nothing")
	}
	if over > 0 {
		t.Errorf("the budget of %d tokens was overspent by %d across two replicas with Redis up", budget, over)
	}
}
