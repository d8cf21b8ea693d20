package gateway

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/klique-ai/klique/internal/model"
)

// meter writes calls to the ledger in batches, off the request path: a
// batch every flushEvery or every flushAt calls, whichever comes first.
// A batch that fails is tried again with the next; the ledger keeps a call
// once however often it is written (its id is the request id).
type meter struct {
	svc  Authority
	log  *slog.Logger
	mu   sync.Mutex
	buf  []*model.ModelCall
	kick chan struct{}
	done chan struct{}
	stop sync.Once
	wg   sync.WaitGroup
}

const (
	flushEvery = 25 * time.Millisecond
	flushAt    = 250
	// maxPending bounds what is kept while the store refuses writes.
	maxPending = 100_000
)

func newMeter(svc Authority, log *slog.Logger) *meter {
	m := &meter{svc: svc, log: log, kick: make(chan struct{}, 1), done: make(chan struct{})}
	m.wg.Add(1)
	go m.run()
	return m
}

func (m *meter) record(c *model.ModelCall) {
	m.mu.Lock()
	if len(m.buf) >= maxPending {
		m.mu.Unlock()
		m.log.Error("gateway: the ledger is not taking writes; a call was not recorded", "call", c.ID)
		return
	}
	m.buf = append(m.buf, c)
	n := len(m.buf)
	m.mu.Unlock()
	if n >= flushAt {
		select {
		case m.kick <- struct{}{}:
		default:
		}
	}
}

func (m *meter) run() {
	defer m.wg.Done()
	t := time.NewTicker(flushEvery)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-m.kick:
		case <-m.done:
			return
		}
		m.flush(context.Background())
	}
}

// flush writes what is buffered; on failure it is kept for the next.
func (m *meter) flush(ctx context.Context) error {
	m.mu.Lock()
	batch := m.buf
	m.buf = nil
	m.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := m.svc.RecordModelCalls(wctx, batch); err != nil {
		m.log.Warn("gateway: writing calls to the ledger failed; will try again", "calls", len(batch), "err", err)
		m.mu.Lock()
		m.buf = append(batch, m.buf...)
		m.mu.Unlock()
		return err
	}
	return nil
}

// close stops the flusher and writes what is left; it may be called
// again (a second shutdown) and flushes again.
func (m *meter) close(ctx context.Context) error {
	m.stop.Do(func() { close(m.done) })
	m.wg.Wait()
	return m.flush(ctx)
}
