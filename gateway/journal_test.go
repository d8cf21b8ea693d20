package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/model"
)

// downLedger is a ledger that refuses every write while down is set, as a
// database that has gone away does.
type downLedger struct {
	stageAuthority
	down atomic.Bool
}

func (l *downLedger) RecordModelCalls(ctx context.Context, calls []*model.ModelCall) error {
	if l.down.Load() {
		return errors.New("database is unreachable")
	}
	return l.stageAuthority.RecordModelCalls(ctx, calls)
}

func (l *downLedger) ids() []string {
	var ids []string
	for _, c := range l.recorded() {
		ids = append(ids, c.ID)
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

func journalCall(i int) *model.ModelCall {
	return &model.ModelCall{ID: fmt.Sprintf("call-%03d", i), TenantID: "t1", At: time.Unix(1_700_000_000, 0).UTC(), UserName: "vic",
		Alias: "chat", Model: "gpt", InputTokens: int64(10 + i), OutputTokens: 7, CostMicros: 42, Currency: "USD", Status: 200, Outcome: model.CallOK}
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// kill stops m as kill -9 would: its writer goes without writing what it
// holds, and its process's descriptors (the journal's lock) are closed.
func kill(m *meter) {
	m.stop.Do(func() { close(m.done) })
	m.wg.Wait()
	m.mu.Lock()
	m.j.Close()
	m.mu.Unlock()
}

func segments(t *testing.T, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "calls-*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// TestAJournaledCallIsWrittenToTheLedgerByTheNextStart: with a journal, a
// call's answer waits for no ledger write (record gives nothing to wait
// on), even while the database refuses writes; a process killed then
// leaves the rows in the journal, and the next start writes them to the
// ledger before it serves (a torn last line, a call whose answer had not
// ended, is left out), then removes the segments whose rows are all on the
// ledger.
func TestAJournaledCallIsWrittenToTheLedgerByTheNextStart(t *testing.T) {
	dir := t.TempDir()
	first := &downLedger{}
	first.down.Store(true)
	m := newMeter(first, quiet, 10*time.Second, dir)
	for i := range 5 {
		if ticket := m.record(journalCall(i)); ticket != 0 {
			t.Fatalf("call %d: record gave ticket %d to wait on, want 0: the row is journaled", i, ticket)
		}
	}
	kill(m)
	if got := first.ids(); len(got) != 0 {
		t.Fatalf("the ledger that was down holds %v", got)
	}
	segs := segments(t, dir)
	if len(segs) != 1 {
		t.Fatalf("segments after the kill: %v, want one", segs)
	}
	// The kill came in the middle of a sixth row's write.
	f, err := os.OpenFile(segs[0], os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`{"ID":"call-torn","TenantID":"t1","At":"2026-`); err != nil {
		t.Fatal(err)
	}
	f.Close()

	second := &downLedger{}
	g := &Gateway{meter: newMeter(second, quiet, 10*time.Second, dir)}
	g.meter.drain(context.Background())
	if got, want := second.ids(), []string{"call-000", "call-001", "call-002", "call-003", "call-004"}; !slices.Equal(got, want) {
		t.Fatalf("the ledger after the restart holds %v, want %v", got, want)
	}
	rec := second.recorded()
	if want := journalCall(3); *rec[3] != *want {
		t.Fatalf("the recovered row is %+v, want %+v", *rec[3], *want)
	}
	// The segment the first process wrote goes once its rows are on the
	// ledger; the second's own stays open for its calls.
	if segs := segments(t, dir); len(segs) != 1 || segs[0] == filepath.Join(dir, "calls-00000001.jsonl") {
		t.Fatalf("segments once the rows are on the ledger: %v, want only the new process's", segs)
	}
	if ticket := g.meter.record(journalCall(9)); ticket != 0 {
		t.Fatalf("the restarted meter gave ticket %d to wait on", ticket)
	}
	// A close once the ledger has every row leaves no segment behind.
	if err := g.meter.close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := second.ids(); !slices.Contains(got, "call-009") {
		t.Fatalf("the ledger after a close lacks the last call: %v", got)
	}
	if segs := segments(t, dir); len(segs) != 0 {
		t.Fatalf("segments after a close with every row on the ledger: %v", segs)
	}
}

// TestAClosedGatewayKeepsInItsJournalWhatTheLedgerRefused: a close while
// the database refuses writes keeps the rows for the next start.
func TestAClosedGatewayKeepsInItsJournalWhatTheLedgerRefused(t *testing.T) {
	dir := t.TempDir()
	l := &downLedger{}
	l.down.Store(true)
	m := newMeter(l, quiet, 10*time.Second, dir)
	m.record(journalCall(1))
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := m.close(ctx); err == nil {
		t.Fatal("a close while the ledger refuses writes reported no error")
	}
	l.down.Store(false)
	m = newMeter(l, quiet, 10*time.Second, dir)
	m.drain(context.Background())
	if got := l.ids(); !slices.Equal(got, []string{"call-001"}) {
		t.Fatalf("the ledger after the next start holds %v", got)
	}
	must(t, m.close(context.Background()))
}

// TestWithoutAJournalAnAnswerWaitsForTheLedger: without a journal, or when
// another process holds the journal's directory, record gives the ticket
// the answer waits on until the row is on the ledger.
func TestWithoutAJournalAnAnswerWaitsForTheLedger(t *testing.T) {
	l := &downLedger{}
	plain := newMeter(l, quiet, 10*time.Second, "")
	defer plain.close(context.Background())
	ticket := plain.record(journalCall(1))
	if ticket == 0 {
		t.Fatal("a meter without a journal gave no ticket to wait on")
	}
	if !plain.await(context.Background(), ticket) {
		t.Fatal("the row did not reach the ledger")
	}

	dir := t.TempDir()
	holder := newMeter(l, quiet, 10*time.Second, dir)
	defer holder.close(context.Background())
	other := newMeter(l, quiet, 10*time.Second, dir)
	defer other.close(context.Background())
	if other.j != nil {
		t.Fatal("a second meter opened a journal another holds")
	}
	if other.record(journalCall(2)) == 0 {
		t.Fatal("the meter without the journal gave no ticket to wait on")
	}
}

// TestJournaledCallsGoToTheLedgerInFewWrites: with a journal, the ledger
// is written at most once a journaledGap, so calls that end a millisecond
// apart go in a few writes rather than a write each (a write's cost is
// mostly its commit), and every row is still written.
func TestJournaledCallsGoToTheLedgerInFewWrites(t *testing.T) {
	l := &downLedger{}
	m := newMeter(l, quiet, 10*time.Second, t.TempDir())
	defer func() { _ = m.close(context.Background()) }()
	const calls = 100
	start := time.Now()
	for i := range calls {
		if ticket := m.record(journalCall(i)); ticket != 0 {
			t.Fatalf("call %d: a journaled row gave ticket %d to wait on", i, ticket)
		}
		time.Sleep(time.Millisecond)
	}
	if !m.drain(context.Background()) {
		t.Fatal("the calls' rows were not all written")
	}
	elapsed := time.Since(start)
	if got := len(l.ids()); got != calls {
		t.Fatalf("%d rows on the ledger, want %d", got, calls)
	}
	// A write at once, then one a gap at most: written at once, each call
	// would be a write of its own.
	most := uint64(elapsed/journaledGap) + 2
	if rows, writes := m.batches(); rows != calls || writes > most || writes >= calls/2 {
		t.Fatalf("%d rows in %d writes over %v, want %d rows in at most %d writes", rows, writes, elapsed, calls, most)
	}
}
