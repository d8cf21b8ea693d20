package server_test

import (
	"bufio"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/eventually"
)

// renderCounts reads the shared-render metrics from /metrics.
func renderCounts(t *testing.T, ts *testServer) (rendered, shared, held int) {
	t.Helper()
	_, body := ts.get(t, "/metrics", metricsToken)
	sc := bufio.NewScanner(strings.NewReader(body))
	found := 0
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		var into *int
		switch name {
		case "klique_subscription_updates_rendered_total":
			into = &rendered
		case "klique_subscription_updates_shared_total":
			into = &shared
		case "klique_subscription_updates_held":
			into = &held
		default:
			continue
		}
		f, err := strconv.ParseFloat(value, 64)
		if err != nil {
			t.Fatalf("%s: %v", sc.Text(), err)
		}
		*into = int(f)
		found++
	}
	if found != 3 {
		t.Fatalf("/metrics has %d of the 3 shared-render metrics", found)
	}
	return rendered, shared, held
}

// One update followed by many subscribers with the same operation is
// rendered once; a subscriber whose operation differs, whose selection
// reaches a resolver (which runs as the caller), or who may see less of
// the update gets a rendering of its own.
func TestOneRenderingServesEverySubscriberOfAnUpdate(t *testing.T) {
	t.Parallel()
	ts := startServer(t, withSubscriptionCaps(10, 10))
	f := newFixture(t, ts)
	crML := f.id(t, "cr ml-research/1 GPU")
	d := ts.mustGQL(t, f.admin, `mutation { createAPIKey(input: {name: "eval only", user: "alice", project: "shared-eval"}) { secret } }`, nil)
	scoped := str(d, "createAPIKey", "secret")
	vars := map[string]any{"cr": crML}

	// Two of alice's connections with one operation; the same operation
	// from a key that sees only project shared-eval; and an operation whose
	// selection reaches Task.reason, a resolver, twice.
	perCaller := `subscription($cr: ID!) { queueChanged(computeResource: $cr) { kind task { id reason } } }`
	var conns []*wsClient
	sub := func(cred, query string) <-chan wsEvent {
		c, ch := subscribeWS(t, ts, cred, query, vars)
		conns = append(conns, c)
		return ch
	}
	subs := []<-chan wsEvent{sub(f.alice, queueSub), sub(f.alice, queueSub), sub(scoped, queueSub), sub(f.alice, perCaller), sub(f.alice, perCaller)}
	for _, ch := range subs {
		nextUpdate(t, ch, 10*time.Second) // the snapshot: one per subscriber
	}
	rendered0, shared0, _ := renderCounts(t, ts)

	id := enqueueAs(t, ts, f.alice, "shared-render", "fraud-models")
	var got [5]*wsUpdate
	for i, ch := range subs {
		got[i] = waitUpdate(t, ch, 10*time.Second, "task.enqueued", func(u *wsUpdate) bool { return kindOf(u, "queueChanged") == "task.enqueued" })
	}
	for _, ch := range subs {
		expectQuiet(t, ch, 300*time.Millisecond, "one enqueue is one update")
	}

	if got[0].Raw != got[1].Raw || !strings.Contains(got[0].Raw, id) {
		t.Errorf("alice's two subscribers got different updates, or not her task:\n%s\n%s", got[0].Raw, got[1].Raw)
	}
	if strings.Contains(got[2].Raw, id) {
		t.Errorf("the key scoped to shared-eval was sent fraud-models' task: %s", got[2].Raw)
	}
	for _, u := range got[3:] {
		if !strings.Contains(u.Raw, id) || str(u.Data, "queueChanged", "task", "reason") == "" {
			t.Errorf("the per-caller operation's update lacks the task or its reason: %s", u.Raw)
		}
	}
	rendered, shared, held := renderCounts(t, ts)
	// Rendered: one for alice's pair, one for the scoped key's copy, one for
	// each per-caller subscriber. Shared: the other of alice's pair.
	if rendered-rendered0 != 4 || shared-shared0 != 1 {
		t.Errorf("the enqueue was rendered %d times and shared %d times, want 4 and 1", rendered-rendered0, shared-shared0)
	}
	if held == 0 {
		t.Errorf("no update's rendering is held while its subscribers are open")
	}

	// What is kept for an update goes with the update: once the
	// subscribers have closed, nothing is held.
	for _, c := range conns {
		c.close()
	}
	if !eventually.Poll(20*time.Second, func() bool {
		runtime.GC()
		_, _, held = renderCounts(t, ts)
		return held == 0
	}) {
		t.Fatalf("%d updates' renderings still held 20 s after their subscribers closed", held)
	}
}
