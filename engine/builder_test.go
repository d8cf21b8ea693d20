package engine

import (
	"fmt"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/model"
)

// estateBuilder builds snapshots for tests in the fluent style of Kueue's
// test wrappers: pools, profiles, groups and queues by name, then waiting
// and running tasks.
type estateBuilder struct {
	t    testing.TB
	now  time.Time
	snap Snapshot
	seq  int64
}

var t0 = time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC) // a Wednesday

func newEstate(t testing.TB) *estateBuilder {
	return &estateBuilder{t: t, now: t0, snap: Snapshot{Now: t0}}
}

func (b *estateBuilder) pool(name string, gpus int) *estateBuilder {
	b.snap.Pools = append(b.snap.Pools, Pool{ID: "pool-" + name, Name: name, Capacity: model.GPUs(gpus)})
	return b
}

// profile adds a profile with a time weight and its pools in order; it is
// appended to each pool's execution priority.
func (b *estateBuilder) profile(name string, weight float64, pools ...string) *estateBuilder {
	pr := Profile{ID: "profile-" + name, Name: name, WeightMilli: int64(weight * 1000)}
	idx := len(b.snap.Profiles)
	for _, p := range pools {
		pi := b.poolIdx(p)
		pr.Pools = append(pr.Pools, pi)
		b.snap.Pools[pi].Profiles = append(b.snap.Pools[pi].Profiles, idx)
	}
	b.snap.Profiles = append(b.snap.Profiles, pr)
	return b
}

// executionPriority sets a pool's profile order.
func (b *estateBuilder) executionPriority(pool string, profiles ...string) *estateBuilder {
	var order []int
	for _, p := range profiles {
		order = append(order, b.profileIdx(p))
	}
	b.snap.Pools[b.poolIdx(pool)].Profiles = order
	return b
}

func (b *estateBuilder) group(name string, reservation, limit int) *estateBuilder {
	b.snap.Groups = append(b.snap.Groups, Group{ID: "group-" + name, Name: name, Reservation: model.GPUs(reservation), Limit: model.GPUs(limit)})
	return b
}

// budget gives the last group a weekly budget of total hours with used
// already spent, and a low watermark.
func (b *estateBuilder) budget(total, used float64, watermark time.Duration) *estateBuilder {
	g := &b.snap.Groups[len(b.snap.Groups)-1]
	g.Budget = &Budget{Total: int64(total * 1e6), Used: int64(used * 1e6), LowWatermark: watermark,
		Period: model.PeriodWeek, ResetAt: time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)}
	return b
}

// queue connects a group to a profile; queues are appended to the
// profile's queuing priority in the order they are added.
func (b *estateBuilder) queue(group, profile string) *estateBuilder {
	q := Queue{ID: group + "/" + profile, Name: profile, Group: b.groupIdx(group), Profile: b.profileIdx(profile)}
	b.snap.Queues = append(b.snap.Queues, q)
	pr := &b.snap.Profiles[q.Profile]
	pr.Queues = append(pr.Queues, len(b.snap.Queues)-1)
	return b
}

// wait adds n tasks of a size to the back of a queue.
func (b *estateBuilder) wait(queue string, n int, size string) *estateBuilder {
	qi := b.queueIdx(queue)
	q := &b.snap.Queues[qi]
	for i := 0; i < n; i++ {
		b.seq++
		q.Waiting = append(q.Waiting, Task{ID: fmt.Sprintf("%s#%d", queue, b.seq), Size: mustSize(b.t, size), Seq: b.seq})
	}
	return b
}

// run adds n tasks of a size already placed on a pool, placed at placedAt.
func (b *estateBuilder) run(queue, pool string, n int, size string, placedAt time.Time) *estateBuilder {
	qi := b.queueIdx(queue)
	for i := 0; i < n; i++ {
		b.seq++
		b.snap.Running = append(b.snap.Running, Placement{TaskID: fmt.Sprintf("%s#%d", queue, b.seq), Queue: qi, Pool: b.poolIdx(pool),
			Size: mustSize(b.t, size).Total(), PlacedAt: placedAt, Seq: b.seq})
	}
	return b
}

func (b *estateBuilder) build() *Snapshot { s := b.snap; return &s }

func (b *estateBuilder) poolIdx(name string) int {
	for i, p := range b.snap.Pools {
		if p.Name == name {
			return i
		}
	}
	b.t.Fatalf("no pool %s", name)
	return -1
}

func (b *estateBuilder) profileIdx(name string) int {
	for i, p := range b.snap.Profiles {
		if p.Name == name {
			return i
		}
	}
	b.t.Fatalf("no profile %s", name)
	return -1
}

func (b *estateBuilder) groupIdx(name string) int {
	for i, g := range b.snap.Groups {
		if g.Name == name {
			return i
		}
	}
	b.t.Fatalf("no group %s", name)
	return -1
}

func (b *estateBuilder) queueIdx(id string) int {
	for i, q := range b.snap.Queues {
		if q.ID == id {
			return i
		}
	}
	b.t.Fatalf("no queue %s", id)
	return -1
}

func mustSize(t testing.TB, s string) model.Size {
	t.Helper()
	size, err := model.ParseSize(s)
	if err != nil {
		t.Fatal(err)
	}
	return size
}

// placedOn returns, per pool name, the ids of tasks the decisions placed
// there, in order.
func placedOn(s *Snapshot, d *Decisions) map[string][]string {
	out := map[string][]string{}
	for _, p := range d.Placements {
		out[s.Pools[p.Pool].Name] = append(out[s.Pools[p.Pool].Name], p.TaskID)
	}
	return out
}

func preemptedIDs(d *Decisions) []string {
	var out []string
	for _, p := range d.Preemptions {
		out = append(out, p.TaskID)
	}
	return out
}

func blockedOf(s *Snapshot, d *Decisions, queue string) *Blocked {
	for i := range d.Blocked {
		if s.Queues[d.Blocked[i].Queue].ID == queue {
			return &d.Blocked[i]
		}
	}
	return nil
}
