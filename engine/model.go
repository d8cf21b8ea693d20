package engine

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/model"
)

// Model is an estate laid out the way a snapshot indexes it. Pools and
// profiles are in name order, policies in their groups' name order (then,
// in snapshot.Groups only, the departments without a policy, by name:
// treeNodes), compute resources by group name then name, so a snapshot (and with it a pass)
// never depends on the order objects were created or loaded in. The index
// maps lead from object ids to snapshot indices.
type Model struct {
	Estate *estate.Estate

	Pools    []*model.Pool
	Profiles []*model.Profile
	Policies []*model.ResourcePolicy
	Queues   []*model.ComputeResource

	PoolIndex    map[string]int // pool id → index in Pools and snapshot.Pools
	ProfileIndex map[string]int // profile id → index
	PolicyIndex  map[string]int // policy id → index in Policies and snapshot.Groups
	QueueIndex   map[string]int // compute resource id → index in Queues and snapshot.Queues

	// groupOf are the ids of the departments without a policy whose nodes
	// follow the policies' in snapshot.Groups (treeNodes).
	groupOf []string

	// base is the snapshot without tasks, budgets use or time.
	base Snapshot
}

// NewModel lays out e. The estate must be valid (estate.Validate): compute
// resources whose policy or profile is missing are left out.
func NewModel(e *estate.Estate) *Model {
	m := &Model{Estate: e, PoolIndex: map[string]int{}, ProfileIndex: map[string]int{}, PolicyIndex: map[string]int{}, QueueIndex: map[string]int{}}

	m.Pools = append(m.Pools, e.Pools...)
	sort.SliceStable(m.Pools, func(i, j int) bool { return m.Pools[i].Name < m.Pools[j].Name })
	for i, p := range m.Pools {
		m.PoolIndex[p.ID] = i
		m.base.Pools = append(m.base.Pools, Pool{ID: p.ID, Name: p.Name, Kind: p.Kind, Capacity: model.GPUs(p.CapacityGPUs), CreatedAt: p.CreatedAt})
	}

	m.Profiles = append(m.Profiles, e.Profiles...)
	sort.SliceStable(m.Profiles, func(i, j int) bool { return m.Profiles[i].Name < m.Profiles[j].Name })
	for i, pr := range m.Profiles {
		m.ProfileIndex[pr.ID] = i
		sp := Profile{ID: pr.ID, Name: pr.Name, WeightMilli: pr.TimeWeightMilli}
		for _, id := range pr.Pools {
			if p, ok := m.PoolIndex[id]; ok {
				sp.Pools = append(sp.Pools, p)
			}
		}
		m.base.Profiles = append(m.base.Profiles, sp)
	}
	// Execution priority: the order of profiles on each pool.
	for i, p := range m.Pools {
		for _, pr := range e.ProfilesOnPool(p.ID) {
			m.base.Pools[i].Profiles = append(m.base.Pools[i].Profiles, m.ProfileIndex[pr.ID])
		}
	}

	m.Policies = append(m.Policies, e.Policies...)
	sort.SliceStable(m.Policies, func(i, j int) bool {
		return e.GroupName(m.Policies[i].GroupID) < e.GroupName(m.Policies[j].GroupID)
	})
	for i, pol := range m.Policies {
		m.PolicyIndex[pol.ID] = i
		g := Group{ID: pol.ID, Name: e.GroupName(pol.GroupID),
			Reservation: model.GPUs(pol.ReservationGPUs), Limit: model.GPUs(pol.LimitGPUs)}
		// The default weight stays 0, which the engine counts as 1, so that
		// a flat estate's snapshot is what it was before weights.
		if pol.EffectiveWeight() != model.DefaultWeight {
			g.Weight = int64(pol.Weight)
		}
		if gr := e.Group(pol.GroupID); gr != nil {
			g.Department = gr.IsDepartment()
		}
		m.base.Groups = append(m.base.Groups, g)
	}
	m.treeNodes(e)

	for _, cr := range e.ComputeResources {
		_, pok := m.PolicyIndex[cr.PolicyID]
		_, rok := m.ProfileIndex[cr.ProfileID]
		if pok && rok {
			m.Queues = append(m.Queues, cr)
		}
	}
	sort.SliceStable(m.Queues, func(i, j int) bool {
		gi, gj := e.PolicyGroupName(m.Queues[i].PolicyID), e.PolicyGroupName(m.Queues[j].PolicyID)
		if gi != gj {
			return gi < gj
		}
		return m.Queues[i].Name < m.Queues[j].Name
	})
	for i, cr := range m.Queues {
		m.QueueIndex[cr.ID] = i
		m.base.Queues = append(m.base.Queues, Queue{ID: cr.ID, Name: cr.Name,
			Group: m.PolicyIndex[cr.PolicyID], Profile: m.ProfileIndex[cr.ProfileID]})
	}
	// Queuing priority: the order of compute resources on each profile.
	for i, pr := range m.Profiles {
		for _, cr := range e.ComputeResourcesOfProfile(pr.ID) {
			if q, ok := m.QueueIndex[cr.ID]; ok {
				m.base.Profiles[i].Queues = append(m.base.Profiles[i].Queues, q)
			}
		}
	}
	return m
}

// NoLimit is the limit of a department node that has no policy of its own:
// it holds its children back by nothing but their own limits and those
// above it. It is not 0, which would pause the subtree (Group.Paused).
const NoLimit model.MilliGPU = math.MaxInt64

// treeNodes completes the organisation tree in the snapshot's groups. The
// groups with a policy come first, one a policy, in Policies' order (their
// indices are PolicyIndex's); then comes a node for each department on
// the path of one of them that has no policy of its own, by name, so that
// every node's parent is a node. Such a department reserves what its
// children reserve (estate.EffectiveReservation: it only gathers them) and
// has no limit (NoLimit). Last, each node's Parent is set. A flat estate
// has no departments: its groups are what they were, every Parent 0.
func (m *Model) treeNodes(e *estate.Estate) {
	node := map[string]int{} // group id → index in base.Groups
	for i, pol := range m.Policies {
		node[pol.GroupID] = i
	}
	var bare []*model.Group
	for _, pol := range m.Policies {
		for _, a := range e.Ancestors(pol.GroupID) {
			if _, ok := node[a.ID]; !ok {
				node[a.ID] = -1
				bare = append(bare, a)
			}
		}
	}
	sort.SliceStable(bare, func(i, j int) bool { return bare[i].Name < bare[j].Name })
	for _, d := range bare {
		node[d.ID] = len(m.base.Groups)
		m.groupOf = append(m.groupOf, d.ID)
		m.base.Groups = append(m.base.Groups, Group{ID: d.ID, Name: d.Name, Department: true,
			Reservation: model.GPUs(e.EffectiveReservation(d.ID)), Limit: NoLimit})
	}
	for i := range m.base.Groups {
		var groupID string
		if i < len(m.Policies) {
			groupID = m.Policies[i].GroupID
		} else {
			groupID = m.groupOf[i-len(m.Policies)]
		}
		if g := e.Group(groupID); g != nil && g.ParentID != "" {
			if p, ok := node[g.ParentID]; ok && p >= 0 {
				m.base.Groups[i].Parent = p + 1
			}
		}
	}
}

// TaskState is a task as a snapshot needs it: waiting in its compute
// resource when PoolID is empty, holding capacity on PoolID since PlacedAt
// otherwise. Seq is its place in queue order: model.QueueKey of its queue
// rank (its project's priority in its team) and queue order, so that a
// waiting task of a higher-priority project sorts ahead.
type TaskState struct {
	ID                string
	ComputeResourceID string
	PoolID            string
	Size              model.Size
	Seq               int64
	PlacedAt          time.Time
	// Claimed: a worker has claimed the placed task.
	Claimed bool
}

// Snapshot builds the snapshot of the estate at now with the given tasks.
// budgetUsed is, per policy id, the micro budget-hours the group has been
// charged in its current period up to now; budgets follow the UTC calendar
// (PeriodEnd gives the reset). Waiting tasks are put in queue order
// by Seq. A task of an unknown compute resource or pool is an error.
// Snapshots share the model's pools and profiles: treat them as read-only,
// as Pass does.
func (m *Model) Snapshot(now time.Time, tasks []TaskState, budgetUsed map[string]int64) (*Snapshot, error) {
	s := m.Empty(now, budgetUsed)
	for _, t := range tasks {
		q, ok := m.QueueIndex[t.ComputeResourceID]
		if !ok {
			return nil, fmt.Errorf("task %s: compute resource %s is not in the estate", t.ID, t.ComputeResourceID)
		}
		if t.PoolID == "" {
			s.Queues[q].Waiting = append(s.Queues[q].Waiting, Task{ID: t.ID, Size: t.Size, Seq: t.Seq})
			continue
		}
		p, ok := m.PoolIndex[t.PoolID]
		if !ok {
			return nil, fmt.Errorf("task %s: pool %s is not in the estate", t.ID, t.PoolID)
		}
		s.Running = append(s.Running, Placement{TaskID: t.ID, Queue: q, Pool: p, Size: t.Size.Total(), Shape: t.Size, PlacedAt: t.PlacedAt, Seq: t.Seq, Claimed: t.Claimed})
	}
	for q := range s.Queues {
		w := s.Queues[q].Waiting
		sort.SliceStable(w, func(i, j int) bool { return w[i].Seq < w[j].Seq })
	}
	s.SumUpWaiting()
	return s, nil
}

// Empty is the snapshot of the estate at now with no tasks: the caller
// fills each queue's Waiting (in queue order) and Running. budgetUsed is as
// for Snapshot.
func (m *Model) Empty(now time.Time, budgetUsed map[string]int64) *Snapshot {
	s := &Snapshot{Now: now, Pools: m.base.Pools, Profiles: m.base.Profiles}
	s.Groups = append([]Group(nil), m.base.Groups...)
	for i, pol := range m.Policies {
		if b := pol.Budget; b != nil {
			s.Groups[i].Budget = &Budget{Total: b.MilliHours * 1000, Used: budgetUsed[pol.ID],
				LowWatermark: pol.LowWatermark, Period: b.Period, ResetAt: PeriodEnd(b.Period, now)}
		}
	}
	s.Queues = append([]Queue(nil), m.base.Queues...)
	return s
}
