package gateway

import (
	"context"
	"log/slog"
	"runtime"
	"sync"
	"time"

	"github.com/klique-ai/klique/gateway/journal"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
)

// meter writes calls to the ledger by group commit: a call's row is
// written before its answer's last bytes go out (record waits for it), and
// the rows of calls that end while a write is under way go together in the
// next one. An idle gateway writes each row alone, at once; a busy one
// writes many rows in one statement, and the wait for the ledger is one
// write whatever the load. So a gateway killed at any moment (kill -9)
// has every call it answered on the ledger, refusals included. A write
// that fails is tried again with the next; the ledger keeps a call once
// however often it is written (its id is the request id).
//
// With a journal (Options.Journal), a row is appended to it as it is
// buffered, and the answer waits for that write instead of the ledger's:
// the guarantee is the journal's (see package journal), the group commit follows.
type meter struct {
	svc Authority
	log *slog.Logger
	// wait bounds how long a call waits for its row (see Options.LedgerWait).
	wait time.Duration
	mu   sync.Mutex
	buf  []*model.ModelCall
	// j is the write-ahead journal (nil: answers wait for the ledger).
	j *journal.Journal
	// journalFailed is set once a journal write failed: from then on
	// answers wait for the ledger, and the failure is logged once.
	journalFailed bool
	// queued counts the rows ever buffered, and durable those written: a
	// row's ticket is queued after it was buffered, and it is on the
	// ledger once durable reaches it (rows are written in order, a batch
	// that failed going first in the next). written is closed and
	// replaced at every write that succeeds.
	queued, durable uint64
	// rows and writes count the rows written and the writes that wrote
	// them: their ratio is the batch size the benchmarks report.
	rows, writes uint64
	// lastWrite is when the last write began (see spaceOut).
	lastWrite time.Time
	written   chan struct{}
	kick      chan struct{}
	done      chan struct{}
	stop      sync.Once
	wg        sync.WaitGroup
}

const (
	// maxPending bounds what is kept while the store refuses writes.
	maxPending = 100_000
	// maxBatch bounds the rows written in one statement.
	maxBatch = 1000
	// maxGather bounds the yields before a write (see gather).
	maxGather = 8
	// journaledGap is the least time between the starts of two ledger
	// writes while rows are journaled (see spaceOut).
	journaledGap = 20 * time.Millisecond
	// retryEvery spaces the writes of a store that refuses them.
	retryEvery = 100 * time.Millisecond
)

// newMeter starts the ledger's writer. With journalDir set it opens the
// journal there and queues the rows an earlier process left in it (see
// recover); a journal that cannot be opened leaves the meter without one,
// said in the log: answers then wait for the ledger.
func newMeter(svc Authority, log *slog.Logger, wait time.Duration, journalDir string) *meter {
	m := &meter{svc: svc, log: log, wait: wait, written: make(chan struct{}), kick: make(chan struct{}, 1), done: make(chan struct{})}
	if journalDir != "" {
		j, found, err := journal.Open(journalDir)
		if err != nil {
			log.Warn("gateway: running without a ledger journal; answers wait for the ledger's write", "err", err)
		} else {
			m.j = j
			m.recover(found)
		}
	}
	m.wg.Add(1)
	go m.run()
	if len(m.buf) > 0 {
		m.kick <- struct{}{}
	}
	return m
}

// recover queues the rows the journal's segments held when it was opened,
// in order, and tells the journal each segment's last ticket, so that a
// segment goes once its rows are on the ledger.
func (m *meter) recover(found [][]*model.ModelCall) {
	lasts := make([]uint64, len(found))
	for i, rows := range found {
		m.buf = append(m.buf, rows...)
		m.queued += uint64(len(rows))
		lasts[i] = m.queued
	}
	m.j.Recovered(lasts)
	if n := len(m.buf); n > 0 {
		m.log.Info("gateway: writing the calls an earlier process journaled but had not written to the ledger", "calls", n)
	}
}

// record buffers a call's row for the next write and returns the ticket to
// wait on before the answer ends: 0 when the row is in the journal (or
// could not be kept at all).
func (m *meter) record(c *model.ModelCall) uint64 {
	m.mu.Lock()
	if len(m.buf) >= maxPending {
		m.mu.Unlock()
		m.log.Error("gateway: the ledger is not taking writes; a call was not recorded", "call", c.ID)
		return 0
	}
	m.buf = append(m.buf, c)
	m.queued++
	ticket := m.queued
	if m.j != nil && !m.journalFailed {
		if err := m.j.Append(c, ticket); err != nil {
			m.journalFailed = true
			m.log.Error("gateway: the ledger journal failed; answers wait for the ledger's write from now on", "err", err)
		} else {
			ticket = 0
		}
	}
	m.mu.Unlock()
	select {
	case m.kick <- struct{}{}:
	default:
	}
	return ticket
}

// drain waits until every row buffered so far is on the ledger (or await
// gives up, see there). A budget counter is seeded from the ledger's sum:
// a row still buffered would be missing from it while its call's spend was
// settled on a limiter the counter never hears from (the in-process one
// while Redis was out of reach), so the seed reads the ledger only after
// the rows before it are written.
func (m *meter) drain(ctx context.Context) bool {
	m.mu.Lock()
	ticket := m.queued
	m.mu.Unlock()
	if ticket == 0 {
		return true
	}
	return m.await(ctx, ticket)
}

// await waits until the row of ticket is on the ledger, the caller goes
// away, or the meter's wait runs out (the store refuses writes: the row
// stays buffered and is written when it takes them again). It reports
// whether the row is on the ledger.
func (m *meter) await(ctx context.Context, ticket uint64) bool {
	if ticket == 0 {
		return false
	}
	var timeout <-chan time.Time
	for {
		m.mu.Lock()
		durable, written := m.durable, m.written
		m.mu.Unlock()
		if durable >= ticket {
			return true
		}
		if timeout == nil {
			t := time.NewTimer(m.wait)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-written:
		case <-ctx.Done():
			return false
		case <-timeout:
			m.log.Warn("gateway: the ledger did not take a call's row in time; answering before it is written", "wait", m.wait)
			return false
		}
	}
}

func (m *meter) run() {
	defer m.wg.Done()
	for {
		select {
		case <-m.kick:
		case <-m.done:
			return
		}
		// Write until nothing is left: what came in during a write goes in
		// the next, at once (or, journaled, once the gap is over).
		for {
			if !m.spaceOut() {
				return
			}
			m.gather()
			more, err := m.flush(context.Background())
			if err != nil {
				select {
				case <-time.After(retryEvery):
				case <-m.done:
					return
				}
				continue
			}
			if !more {
				break
			}
		}
	}
}

// spaceOut waits, when the rows are journaled, until journaledGap has
// passed since the last write began, so that a busy gateway writes the
// ledger at most every journaledGap with all the rows gathered since: a
// write's cost is mostly its commit, whatever its rows. An idle gateway's
// row is written at once (the last write is long past), and nothing waits
// on a journaled row's write but readers of the ledger, a gap later. It
// reports false when the meter is stopping (close writes what is left).
func (m *meter) spaceOut() bool {
	m.mu.Lock()
	journaled := m.j != nil && !m.journalFailed
	wait := journaledGap - time.Since(m.lastWrite)
	m.mu.Unlock()
	if !journaled || wait <= 0 {
		return true
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-m.done:
		return false
	}
}

// gather lets the goroutines that are ready to run go first, while they
// add rows, before a write. A write's cost is mostly its commit (SQLite
// writes the table's and both indexes' pages to the WAL whatever the number
// of rows), and on a busy gateway the rows of calls ending come faster than
// one a write but slower than a write takes: written at once, most batches
// held a row or two (1.85 rows a write at 3,000 calls a second). Yielding
// waits for no clock, only for work already runnable, so an idle gateway
// still writes a call's row at once; it stops when a yield brings no row.
func (m *meter) gather() {
	m.mu.Lock()
	n := len(m.buf)
	m.mu.Unlock()
	for range maxGather {
		runtime.Gosched()
		m.mu.Lock()
		k := len(m.buf)
		m.mu.Unlock()
		if k == n || k >= maxBatch {
			return
		}
		n = k
	}
}

// flush writes what is buffered (at most maxBatch rows); on failure it is
// kept for the next. It reports whether rows are left.
func (m *meter) flush(ctx context.Context) (bool, error) {
	m.mu.Lock()
	batch := m.buf
	if len(batch) > maxBatch {
		batch = batch[:maxBatch:maxBatch]
		m.buf = m.buf[maxBatch:]
	} else {
		m.buf = nil
	}
	// The tickets are in order: the last row of batch has this one.
	last := m.queued - uint64(len(m.buf))
	m.mu.Unlock()
	if len(batch) == 0 {
		return false, nil
	}
	m.mu.Lock()
	m.lastWrite = time.Now()
	m.mu.Unlock()
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// The ledger takes model calls from the gateway's own context only
	// (llm.RecordModelCalls): no user's principal, channel gateway.
	wctx = identity.WithChannel(wctx, identity.ChannelGateway)
	if err := m.svc.RecordModelCalls(wctx, batch); err != nil {
		m.log.Warn("gateway: writing calls to the ledger failed; will try again", "calls", len(batch), "err", err)
		m.mu.Lock()
		m.buf = append(batch, m.buf...)
		m.mu.Unlock()
		return true, err
	}
	m.mu.Lock()
	m.durable = max(m.durable, last)
	if m.j != nil {
		if err := m.j.Durable(m.durable, false); err != nil {
			m.log.Warn("gateway: removing a ledger journal segment whose rows are on the ledger failed", "err", err)
		}
	}
	m.rows += uint64(len(batch))
	m.writes++
	close(m.written)
	m.written = make(chan struct{})
	more := len(m.buf) > 0
	m.mu.Unlock()
	return more, nil
}

// close stops the writer and writes what is left; it may be called again
// (a second shutdown) and writes again.
// The journal is given up once the ledger has every row, its segments
// removed; while rows remain unwritten, it keeps them for the next start.
func (m *meter) close(ctx context.Context) error {
	m.stop.Do(func() { close(m.done) })
	m.wg.Wait()
	for {
		more, err := m.flush(ctx)
		if err != nil || !more {
			m.closeJournal(err == nil)
			return err
		}
	}
}

// closeJournal removes the journal's segments when every row is on the
// ledger (written), and unlocks its directory.
func (m *meter) closeJournal(written bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.j == nil {
		return
	}
	if written && m.durable == m.queued {
		if err := m.j.Durable(m.durable, true); err != nil {
			m.log.Warn("gateway: removing the ledger journal failed", "err", err)
		}
	}
	m.j.Close()
	m.j = nil
}

// batches reports the rows written and the writes that wrote them.
func (m *meter) batches() (rows, writes uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.rows, m.writes
}
