// Package enginetest builds engine snapshots for tests, in the fluent style
// of Kueue's pkg/util/testing/wrappers.go: pools, profiles, groups and
// queues by name, then waiting and running tasks, so that a scenario reads
// as the estate it describes rather than as index arithmetic.
//
//	s := enginetest.NewEstate(t).Pool("p", 8).Profile("one", 1, "p").
//		Group("A", 4, 8).Queue("A", "one").Wait("A/one", 2, "1").Build()
//	d := engine.Pass(s)
//	got := enginetest.PlacedOn(s, d)["p"]
//
// It lives in its own package, rather than in the engine's test files, so
// that every package testing against the engine (the engine's own external
// tests, the loop, the simulator) builds snapshots the same way. It imports
// the engine, so only tests in package engine_test (not package engine) can
// use it. Import it from tests only.
package enginetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/klique-ai/klique/engine"
	"github.com/klique-ai/klique/internal/model"
)

// T0 is the instant every built snapshot decides at: a Wednesday, inside
// the weekly budget period that Budget renews on Monday 2026-11-30 00:00
// UTC.
var T0 = time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)

// EstateBuilder builds one snapshot. Its methods name objects rather than
// indexing them and fail the test on a name that does not exist; each
// returns the builder so that a scenario is one expression.
//
// Names and ids follow one scheme that tests assert on: a pool "p" has id
// "pool-p", a profile "one" id "profile-one", a group "A" id "group-A",
// and the queue joining group A to profile one has id (and the name tests
// refer to it by) "A/one". Tasks, waiting or running, are numbered in the
// order they are added across the whole estate: the first task added to
// queue A/one is "A/one#1", the next task added anywhere is "<queue>#2",
// and the number is also the task's Seq (its queue order).
type EstateBuilder struct {
	t    testing.TB
	snap engine.Snapshot
	seq  int64
}

// NewEstate starts an empty estate whose snapshot decides at T0.
func NewEstate(t testing.TB) *EstateBuilder {
	return &EstateBuilder{t: t, snap: engine.Snapshot{Now: T0}}
}

// Pool adds a Kubernetes pool of gpus GPUs of declared capacity
// (PoolKind gives it another kind).
func (b *EstateBuilder) Pool(name string, gpus int) *EstateBuilder {
	b.snap.Pools = append(b.snap.Pools, engine.Pool{ID: "pool-" + name, Name: name, Kind: model.PoolKubernetes, Capacity: model.GPUs(gpus)})
	return b
}

// PoolKind sets a pool's kind, which says what sizes it can run.
func (b *EstateBuilder) PoolKind(pool string, kind model.PoolKind) *EstateBuilder {
	b.t.Helper()
	b.snap.Pools[b.poolIdx(pool)].Kind = kind
	return b
}

// Profile adds a profile with a time weight (budget hours per task hour)
// and its pools in order, first pool first. The profile is appended to
// each of those pools' execution priority; ExecutionPriority reorders it.
func (b *EstateBuilder) Profile(name string, weight float64, pools ...string) *EstateBuilder {
	b.t.Helper()
	pr := engine.Profile{ID: "profile-" + name, Name: name, WeightMilli: int64(weight * 1000)}
	idx := len(b.snap.Profiles)
	for _, p := range pools {
		pi := b.poolIdx(p)
		pr.Pools = append(pr.Pools, pi)
		b.snap.Pools[pi].Profiles = append(b.snap.Pools[pi].Profiles, idx)
	}
	b.snap.Profiles = append(b.snap.Profiles, pr)
	return b
}

// ExecutionPriority replaces a pool's profile order.
func (b *EstateBuilder) ExecutionPriority(pool string, profiles ...string) *EstateBuilder {
	b.t.Helper()
	var order []int
	for _, p := range profiles {
		order = append(order, b.profileIdx(p))
	}
	b.snap.Pools[b.poolIdx(pool)].Profiles = order
	return b
}

// Group adds a group (one resource policy) with a reservation and a limit
// in GPUs.
func (b *EstateBuilder) Group(name string, reservation, limit int) *EstateBuilder {
	b.snap.Groups = append(b.snap.Groups, engine.Group{ID: "group-" + name, Name: name, Reservation: model.GPUs(reservation), Limit: model.GPUs(limit)})
	return b
}

// Department adds a department of the organisation tree: a node with a
// reservation and a limit in GPUs that covers its children's work and has
// no queues of its own. Put it, and groups, in it with In.
func (b *EstateBuilder) Department(name string, reservation, limit int) *EstateBuilder {
	b.snap.Groups = append(b.snap.Groups, engine.Group{ID: "department-" + name, Name: name, Department: true,
		Reservation: model.GPUs(reservation), Limit: model.GPUs(limit)})
	return b
}

// In puts the group or department added last in a department added
// before it.
func (b *EstateBuilder) In(department string) *EstateBuilder {
	b.t.Helper()
	b.snap.Groups[len(b.snap.Groups)-1].Parent = b.groupIdx(department) + 1
	return b
}

// Weight gives the group or department added last its weight among its
// siblings.
func (b *EstateBuilder) Weight(w int64) *EstateBuilder {
	b.snap.Groups[len(b.snap.Groups)-1].Weight = w
	return b
}

// Budget gives the group added last a weekly time budget of total budget
// hours with used already spent this week, and a low watermark. The week
// renews on Monday 2026-11-30 00:00 UTC, the first Monday after T0.
func (b *EstateBuilder) Budget(total, used float64, watermark time.Duration) *EstateBuilder {
	g := &b.snap.Groups[len(b.snap.Groups)-1]
	g.Budget = &engine.Budget{Total: int64(total * 1e6), Used: int64(used * 1e6), LowWatermark: watermark,
		Period: model.PeriodWeek, ResetAt: time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)}
	return b
}

// Queue connects a group to a profile with a queue named "group/profile".
// Queues are appended to the profile's queuing priority in the order they
// are added.
func (b *EstateBuilder) Queue(group, profile string) *EstateBuilder {
	b.t.Helper()
	q := engine.Queue{ID: group + "/" + profile, Name: profile, Group: b.groupIdx(group), Profile: b.profileIdx(profile)}
	b.snap.Queues = append(b.snap.Queues, q)
	pr := &b.snap.Profiles[q.Profile]
	pr.Queues = append(pr.Queues, len(b.snap.Queues)-1)
	return b
}

// Wait adds n tasks of a size ("1", "0.125", "2x4": see model.ParseSize)
// to the back of a queue.
func (b *EstateBuilder) Wait(queue string, n int, size string) *EstateBuilder {
	b.t.Helper()
	qi := b.queueIdx(queue)
	q := &b.snap.Queues[qi]
	for i := 0; i < n; i++ {
		b.seq++
		q.Waiting = append(q.Waiting, engine.Task{ID: fmt.Sprintf("%s#%d", queue, b.seq), Size: MustSize(b.t, size), Seq: b.seq})
	}
	return b
}

// Run adds n tasks of a size from a queue, already placed on a pool at
// placedAt (which orders them for preemption: newest first).
func (b *EstateBuilder) Run(queue, pool string, n int, size string, placedAt time.Time) *EstateBuilder {
	b.t.Helper()
	qi := b.queueIdx(queue)
	for i := 0; i < n; i++ {
		b.seq++
		b.snap.Running = append(b.snap.Running, engine.Placement{TaskID: fmt.Sprintf("%s#%d", queue, b.seq), Queue: qi, Pool: b.poolIdx(pool),
			Size: MustSize(b.t, size).Total(), Shape: MustSize(b.t, size), PlacedAt: placedAt, Seq: b.seq})
	}
	return b
}

// Workers sets what the fleet knows of a pool's workers, and when the pool
// was declared.
func (b *EstateBuilder) Workers(pool string, created time.Time, w engine.PoolWorkers) *EstateBuilder {
	b.t.Helper()
	p := &b.snap.Pools[b.poolIdx(pool)]
	p.CreatedAt, p.Workers = created, w
	return b
}

// Claimed marks running tasks as claimed by a worker.
func (b *EstateBuilder) Claimed(ids ...string) *EstateBuilder {
	b.t.Helper()
	for _, id := range ids {
		found := false
		for i := range b.snap.Running {
			if b.snap.Running[i].TaskID == id {
				b.snap.Running[i].Claimed, found = true, true
			}
		}
		if !found {
			b.t.Fatalf("no running task %s", id)
		}
	}
	return b
}

// Build returns the snapshot. It shares its slices with the builder, so
// build once per builder; build a second, equal snapshot from a second
// builder.
func (b *EstateBuilder) Build() *engine.Snapshot { s := b.snap; return &s }

func (b *EstateBuilder) poolIdx(name string) int {
	b.t.Helper()
	return index(b.t, "pool", name, b.snap.Pools, func(p engine.Pool) string { return p.Name })
}

func (b *EstateBuilder) profileIdx(name string) int {
	b.t.Helper()
	return index(b.t, "profile", name, b.snap.Profiles, func(p engine.Profile) string { return p.Name })
}

func (b *EstateBuilder) groupIdx(name string) int {
	b.t.Helper()
	return index(b.t, "group", name, b.snap.Groups, func(g engine.Group) string { return g.Name })
}

func (b *EstateBuilder) queueIdx(id string) int {
	b.t.Helper()
	return index(b.t, "queue", id, b.snap.Queues, func(q engine.Queue) string { return q.ID })
}

// index is the index of the item of items keyed key, failing the test when
// there is none: the builder refers to the snapshot's items by name.
func index[T any](t testing.TB, what, key string, items []T, keyOf func(T) string) int {
	t.Helper()
	for i, it := range items {
		if keyOf(it) == key {
			return i
		}
	}
	t.Fatalf("no %s %s", what, key)
	return -1
}

// MustSize parses a task size, failing the test on a malformed one.
func MustSize(t testing.TB, s string) model.Size {
	t.Helper()
	size, err := model.ParseSize(s)
	if err != nil {
		t.Fatal(err)
	}
	return size
}

// PlacedOn returns, per pool name, the ids of the tasks the decisions
// placed there, in the order they were placed: the shape most placement
// assertions compare against.
func PlacedOn(s *engine.Snapshot, d *engine.Decisions) map[string][]string {
	out := map[string][]string{}
	for _, p := range d.Placements {
		out[s.Pools[p.Pool].Name] = append(out[s.Pools[p.Pool].Name], p.TaskID)
	}
	return out
}

// PreemptedIDs returns the ids of the preempted tasks in the order the
// pass preempted them (nil when it preempted nothing).
func PreemptedIDs(d *engine.Decisions) []string {
	var out []string
	for _, p := range d.Preemptions {
		out = append(out, p.TaskID)
	}
	return out
}

// BlockedOf returns why the head of the queue with the given id ("A/one")
// waits, or nil when the decisions do not name the queue.
func BlockedOf(s *engine.Snapshot, d *engine.Decisions, queue string) *engine.Blocked {
	for i := range d.Blocked {
		if s.Queues[d.Blocked[i].Queue].ID == queue {
			return &d.Blocked[i]
		}
	}
	return nil
}
