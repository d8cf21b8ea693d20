package flatref

import (
	"fmt"
	"slices"
	"time"

	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/model"
)

// Work placed where no worker is (docs/engine.md, "Work placed where no
// worker is"). A placed task waits in its pool's hidden queue until a worker
// of the pool claims it. The fleet knows whether any worker of a pool is
// online; the loop puts that in the snapshot (PoolWorkers) and the pass
// decides from it, with the snapshot's Now: a pool is unattended when it
// has a claim timeout, no worker is online, and none has been for that
// long. Work placed on an unattended pool and not claimed within the claim
// timeout goes back to the front of its compute resource, and no work is
// placed on an unattended pool until a worker of it is online again, so
// the next pool of the profile takes it.

// CauseUnclaimed: no worker of the pool claimed the task within the pool's
// claim timeout, and none is online.
const CauseUnclaimed Cause = "unclaimed"

// HeldByNoWorker: the pools that could take the head have no worker online
// (for their claim timeout), and the others are full.
const HeldByNoWorker Constraint = "no_worker"

// PoolWorkers is what a pass needs to know of one pool's workers.
type PoolWorkers struct {
	// ClaimTimeout is how long placed work may wait while no worker of
	// the pool is online (0: for ever). The loop gives 0 while it is in
	// its grace period, when heartbeats say nothing.
	ClaimTimeout time.Duration
	// Online: a worker of the pool heartbeats within its lease.
	Online bool
	// LastSeen is the last heartbeat of any worker of the pool; zero when
	// none has registered.
	LastSeen time.Time
}

// SetPoolWorkers gives the snapshot's pools what the fleet knows of their
// workers, by pool id; a pool left out has no claim timeout. The pools are
// copied first: a snapshot shares its model's pools.
func (s *Snapshot) SetPoolWorkers(byID map[string]PoolWorkers) {
	s.Pools = append([]Pool(nil), s.Pools...)
	for i := range s.Pools {
		p := &s.Pools[i]
		p.Workers = byID[p.ID]
	}
}

// unattended reports whether no work should wait on the pool at now: it
// has a claim timeout, no worker is online, and none has been for the
// claim timeout (counted from the pool's creation when none ever was).
func (p *Pool) unattended(now time.Time) bool {
	w := p.Workers
	if w.ClaimTimeout <= 0 || w.Online {
		return false
	}
	since := w.LastSeen
	if since.IsZero() || since.Before(p.CreatedAt) {
		since = p.CreatedAt
	}
	return now.Sub(since) >= w.ClaimTimeout
}

// PlacedNoWorkerReason is why a placed task waits when no worker of its
// pool is online.
func PlacedNoWorkerReason(pool string, lastSeen time.Time) string {
	return "placed on pool " + pool + "; " + NoWorkerSentence(pool, lastSeen)
}

// expireClaims sends back to the front of their queues the tasks placed on
// an unattended pool that no worker claimed within its claim timeout.
func (st *state) expireClaims() {
	if !slices.Contains(st.unattended, true) {
		// The common case: every pool is attended, and no claim expires.
		return
	}
	now := st.s.Now
	for i := range st.placements {
		pl := st.running(i)
		pool := &st.s.Pools[pl.Pool]
		if pl.Claimed || !st.unattended[pl.Pool] || now.Sub(pl.PlacedAt) < pool.Workers.ClaimTimeout {
			continue
		}
		st.preempt(i, CauseUnclaimed, -1, fmt.Sprintf("not claimed within %s: %s",
			estate.FormatClaimTimeout(pool.Workers.ClaimTimeout), PlacedNoWorkerReason(pool.Name, pool.Workers.LastSeen)))
	}
}

// noWorker reports whether the head of a queue of profile pr, of size
// shape, waits because the pools that could take it are unattended and the
// rest are full; if so, it gives w the sentence that says so.
func (st *state) noWorker(pr *Profile, shape model.Size, w *sentence) bool {
	size := int64(shape.Total())
	// fits: the pool could take the head were it attended and empty.
	fits := func(pool *Pool) bool { return int64(pool.Capacity) >= size && pool.Kind.CanRun(shape) }
	idle := false
	for _, p := range pr.Pools {
		pool := &st.s.Pools[p]
		if !fits(pool) {
			continue
		}
		if st.unattended[p] {
			idle = true
		} else if int64(st.poolUsed[p])+size <= int64(pool.Capacity) {
			return false
		}
	}
	if !idle {
		return false
	}
	first := true
	for _, p := range pr.Pools {
		if pool := &st.s.Pools[p]; fits(pool) && st.unattended[p] {
			if !first {
				w.text("; ")
			}
			first = false
			noWorkerParts(w, pool.Name, pool.Workers.LastSeen)
		}
	}
	w.text(", so no work is placed there until a worker is online")
	first = true
	for _, p := range pr.Pools {
		if pool := &st.s.Pools[p]; fits(pool) && !st.unattended[p] {
			if first {
				w.text("; the other pools of profile ").text(pr.Name).text(" are full (")
			} else {
				w.text(", ")
			}
			first = false
			w.text(pool.Name).text(" ").gpus(st.poolUsed[p]).text("/").gpus(pool.Capacity)
		}
	}
	if !first {
		w.text(" GPUs used)")
	}
	return true
}

// noWorkerParts gives w the parts of NoWorkerSentence.
func noWorkerParts(w *sentence, pool string, lastSeen time.Time) {
	w.text("no worker of pool ").text(pool)
	if lastSeen.IsZero() {
		w.text(" is online (none has registered)")
		return
	}
	w.text(" is online (last seen ").seen(lastSeen).text(")")
}

// NoWorkerSentence says that no worker of a pool is online, and since
// when: "no worker of pool onprem is online (last seen 2026-12-01 22:03:04
// UTC)". The task view and the pass share it.
func NoWorkerSentence(pool string, lastSeen time.Time) string {
	var w sentence
	noWorkerParts(&w, pool, lastSeen)
	return w.render()
}
