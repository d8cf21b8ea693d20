//go:build faults

package faults

import (
	"context"
	"database/sql"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/eventually"
)

// budgetCounter reads the Redis counter of project fraud-models' daily
// token budget (the only budget the suite sets): klique:{tenant}/budget/
// {project}/day/{start}/tok. It is 0 when there is none yet.
func budgetCounter(t *testing.T, rd *redisServer) int64 {
	t.Helper()
	c := rd.client()
	defer c.Close()
	keys, err := c.Keys(context.Background(), "klique:*/budget/*/day/*/tok").Result()
	if err != nil {
		t.Fatalf("read the budget counter: %v", err)
	}
	var total int64
	n := 0
	for _, k := range keys {
		if strings.Contains(k, "/u/") {
			continue
		}
		v, err := c.Get(context.Background(), k).Result()
		if err != nil {
			t.Fatalf("read %s: %v", k, err)
		}
		got, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("%s holds %q", k, v)
		}
		total += got
		n++
	}
	if n > 1 {
		t.Fatalf("%d budget counters (%v): the scenario crossed midnight UTC; run it again", n, keys)
	}
	return total
}

// heldReservations counts the budget reservations Redis holds (its lapse
// set): with nothing in flight, none should be.
// waitSettled waits, up to 10 s, until Redis holds no reservation in
// flight and the ledger has a row for each of the answered calls of the
// project: the gateway settles and writes the ledger a moment after it
// answers.
func waitSettled(t *testing.T, rd *redisServer, db *sql.DB, project string, answered int64) {
	t.Helper()
	eventually.Poll(10*time.Second, func() bool {
		var rows int64
		for _, r := range ledgerSpend(t, db, project) {
			if r.answered {
				rows++
			}
		}
		return heldReservations(t, rd) == 0 && rows >= answered
	})
}

func heldReservations(t *testing.T, rd *redisServer) int64 {
	t.Helper()
	c := rd.client()
	defer c.Close()
	n, err := c.ZCard(context.Background(), "klique:lapse").Result()
	if err != nil {
		t.Fatalf("read the lapse set: %v", err)
	}
	return n
}

// spentTokens sums the ledger's rows of a project.
func spentTokens(rows []spendRow) int64 {
	var total int64
	for _, r := range rows {
		total += int64(r.tokens)
	}
	return total
}

// TestARedisPartitionIsNotCountedTwice (issue 39 defect 8): 200 callers
// spend a token budget while Redis is cut off for 6 s (SIGSTOP: what the
// gateway sent meanwhile is still read, late), and go on for a few
// seconds once it is back.
// Once they stop, with nothing in flight, the Redis counter is what the
// ledger says was spent, within one call's estimate: the degraded spend
// is counted once. Then the project can spend up to its budget, not
// refused early.
func TestARedisPartitionIsNotCountedTwice(t *testing.T) {
	rd := startRedis(t)
	s := startServer(t, serveOpts{redisURL: rd.url})
	tn := setupTenant(t, s)
	up := fakeUpstream(t)
	applyGateway(t, s.url, up.URL, 0)

	rate := measureRate(s.url, tn.alice)
	budget := max(rate*30, 1000) * callTokens
	applyGateway(t, s.url, up.URL, budget)

	c := startCallers(200, []string{s.url}, tn.alice, "fraud-models")
	db := openDB(t, s)
	c.waitSpent(budget/4, 30*time.Second)
	w := during(6*time.Second, rd.freeze, rd.thaw)
	// Calls go on for about three seconds once Redis is back: the gateway
	// goes back to it at the first of them.
	c.waitSpent(int(c.ok.Load())*callTokens+3*rate*callTokens, 30*time.Second)
	c.stop()
	// The last settlements and ledger rows are written a moment after
	// their answers.
	first := c.ok.Load()
	waitSettled(t, rd, db, "fraud-models", first)

	spent := spentTokens(ledgerSpend(t, db, "fraud-models"))
	counter := budgetCounter(t, rd)
	held := heldReservations(t, rd)
	report(t, "scenario=redis-partition-counted-once callers=200 budget=%d spent=%d counter=%d (%.1f%% of the budget) held=%d answered=%d",
		budget, spent, counter, 100*float64(counter)/float64(budget), held, c.ok.Load())
	if d := counter - spent; d > callTokens || d < -callTokens {
		t.Errorf("after a 6 s partition and its recovery, with nothing in flight, the Redis counter reads %d but the ledger says %d were spent (%+d): want them within one call's estimate (%d)",
			counter, spent, d, callTokens)
	}

	// The rest of the budget can be spent, and no more.
	c = startCallers(200, []string{s.url}, tn.alice, "fraud-models")
	c.waitRefusing(3*time.Second, 60*time.Second)
	c.stop()
	waitSettled(t, rd, db, "fraud-models", first+c.ok.Load())
	rows := ledgerSpend(t, db, "fraud-models")
	total, over, allowed := overspendBound(rows, budget, []window{w})
	report(t, "scenario=redis-partition-spend-to-budget budget=%d spent=%d (%.1f%%) overspend=%d bound=%d", budget, total, 100*float64(total)/float64(budget), over, allowed)
	if total < budget-callTokens {
		t.Errorf("the project was refused at %d tokens of its budget of %d (%.1f%%): want it to spend up to its budget, within one call's estimate (%d)",
			total, budget, 100*float64(total)/float64(budget), callTokens)
	}
	if over > allowed {
		t.Errorf("the budget of %d tokens was overspent by %d; docs/gateway.md allows %d", budget, over, allowed)
	}
}
