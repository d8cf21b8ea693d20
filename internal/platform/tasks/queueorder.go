package tasks

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/events"
	"github.com/klique-ai/klique/internal/identity"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/kernel"
	"github.com/klique-ai/klique/internal/store"
)

// A team lead's rights over the team's queues (issue 32): the priority
// order of the team's projects, which orders queuing among them, and
// moving a waiting task ahead of or behind another in its queue. Both are
// the lead's or an admin's, never a member's or a viewer's; a
// project-scoped credential has neither. The queue order itself lives on
// the task (model.Task's QueueRank and QueueOrder), so the engine reads it
// from the same index walk it always did.

// OrdersQueue reports whether p may set a group's project priority and
// reorder its queues: a lead of the group or the head of a department
// above it (e is the tenant's whole estate), who may write, or an admin,
// with a credential not scoped to one project.
func OrdersQueue(p *identity.Principal, e *estate.Estate, groupID string) bool {
	if p.ProjectID != "" || !p.CanWrite() {
		return false
	}
	return p.IsAdmin() || p.LeadOf(groupID) || kernel.HeadAbove(p, e, groupID) != nil
}

// orderedBy names who ordered a group's queue in its audit entry: a
// department head says so, as the head of which department.
func orderedBy(p *identity.Principal, e *estate.Estate, groupID string) string {
	if p.IsAdmin() || p.LeadOf(groupID) {
		return ""
	}
	if d := kernel.HeadAbove(p, e, groupID); d != nil {
		return fmt.Sprintf(" (by %s, head of department %s)", p.UserName, d.Name)
	}
	return ""
}

// ProjectPriority is a team's project priority: its projects in the order
// their waiting tasks are placed.
type ProjectPriority struct {
	Group    *model.Group
	Projects []*model.Project
}

// ProjectPriorities reads a group's project priority; the group's members
// and admins see it.
func (s *Tasks) ProjectPriorities(ctx context.Context, groupRef string) (*ProjectPriority, error) {
	p, err := kernel.Caller(ctx)
	if err != nil {
		return nil, err
	}
	e, err := s.k.CurrentEstate(ctx, s.k.Store, p.TenantID)
	if err != nil {
		return nil, s.k.Internal(ctx, err)
	}
	g, err := visibleGroup(p, e, groupRef)
	if err != nil {
		return nil, err
	}
	ids, err := s.k.Store.ProjectPriorities(ctx, p.TenantID, g.ID)
	if err != nil {
		return nil, s.k.Internal(ctx, err)
	}
	return &ProjectPriority{Group: g, Projects: projectsOf(e, ids)}, nil
}

// SetProjectPriorities sets the priority order of a group's projects: a
// waiting task of a project earlier in the list is placed before one of a
// later project in the group's compute resources, and the tasks of
// projects not listed (or of none) wait behind the listed ones, in queue
// order. The list replaces the one before (an empty list clears it), and
// the group's waiting tasks are ranked again at once, so the next pass
// places by it.
func (s *Tasks) SetProjectPriorities(ctx context.Context, groupRef string, projectRefs []string) (*ProjectPriority, error) {
	return kernel.Run(ctx, s.k, kernel.Op[*ProjectPriority]{Name: "setProjectPriorities", Right: kernel.RightWrite, What: "set project priorities",
		Check: func(*identity.Principal) error {
			if len(projectRefs) > model.MaxProjectPriorities {
				return kernel.Invalid("%d projects are listed; a project priority lists at most %d", len(projectRefs), model.MaxProjectPriorities)
			}
			return nil
		},
		Body: func(t *kernel.Txn) (*ProjectPriority, kernel.Audit, error) {
			e, err := s.k.CurrentEstate(t.Ctx, t.Q, t.P.TenantID)
			if err != nil {
				return nil, kernel.Audit{}, err
			}
			g, err := visibleGroup(t.P, e, groupRef)
			if err != nil {
				return nil, kernel.Audit{}, err
			}
			if !OrdersQueue(t.P, e, g.ID) {
				return nil, kernel.Audit{}, kernel.Forbidden("only a lead of group %s or an admin can set its project priority (or the head of a department above it)", g.Name)
			}
			projects, err := teamProjects(t.P, e, g, projectRefs)
			if err != nil {
				return nil, kernel.Audit{}, err
			}
			before, err := t.Q.ProjectPriorities(t.Ctx, t.P.TenantID, g.ID)
			if err != nil {
				return nil, kernel.Audit{}, err
			}
			ids := make([]string, len(projects))
			for i, pr := range projects {
				ids[i] = pr.ID
			}
			if err := t.Q.SetProjectPriorities(t.Ctx, t.P.TenantID, g.ID, ids); err != nil {
				return nil, kernel.Audit{}, err
			}
			if pol := e.PolicyOfGroup(g.ID); pol != nil {
				for _, cr := range e.ComputeResourcesOfPolicy(pol.ID) {
					t.Publish(events.Event{TenantID: t.P.TenantID, Kind: "queue.changed", ObjectKind: "compute_resource",
						ObjectID: cr.ID, ObjectName: cr.Name, GroupID: g.ID, At: t.Now})
				}
			}
			detail := fmt.Sprintf("project priority of group %s: %s (was: %s)%s", g.Name,
				projectNames(projects), projectNames(projectsOf(e, before)), orderedBy(t.P, e, g.ID))
			return &ProjectPriority{Group: g, Projects: projects},
				kernel.Audit{Action: "group.project_priority_set", Kind: "group", ID: g.ID, Name: g.Name, GroupID: g.ID, Detail: detail}, nil
		}})
}

// visibleGroup finds a group p sees (a member, or the head of a
// department above it); another's is not found, as access.md says of
// groups.
func visibleGroup(p *identity.Principal, e *estate.Estate, ref string) (*model.Group, error) {
	g, err := kernel.FindGroup(e, ref)
	if err != nil || !kernel.OverseesGroup(p, e, g.ID) {
		return nil, kernel.NotFound("no group %s", kernel.Quote(ref))
	}
	return g, nil
}

// teamProjects resolves a priority list: each project must be the group's
// own or open to the whole tenant, and listed once. Another group's
// project is named as such only to a caller who may see it.
func teamProjects(p *identity.Principal, e *estate.Estate, g *model.Group, refs []string) ([]*model.Project, error) {
	out := make([]*model.Project, 0, len(refs))
	seen := map[string]bool{}
	for _, ref := range refs {
		pr, err := kernel.FindProject(e, strings.TrimSpace(ref))
		if err != nil || pr.GroupID != "" && !kernel.OverseesGroup(p, e, pr.GroupID) {
			return nil, kernel.NotFound("no project %s", kernel.Quote(ref))
		}
		if pr.GroupID != "" && pr.GroupID != g.ID {
			return nil, kernel.Invalid("project %s belongs to group %s: group %s's priority lists its own projects and those open to the whole tenant",
				pr.Name, e.GroupName(pr.GroupID), g.Name)
		}
		if seen[pr.ID] {
			return nil, kernel.Invalid("project %s is listed twice: list each project once, first the one whose tasks go first", pr.Name)
		}
		seen[pr.ID] = true
		out = append(out, pr)
	}
	return out, nil
}

// projectsOf finds the projects of ids in e, leaving out any deleted since.
func projectsOf(e *estate.Estate, ids []string) []*model.Project {
	out := make([]*model.Project, 0, len(ids))
	for _, id := range ids {
		if pr := e.Project(id); pr != nil {
			out = append(out, pr)
		}
	}
	return out
}

func projectNames(ps []*model.Project) string {
	if len(ps) == 0 {
		return "none"
	}
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.Name
	}
	return strings.Join(names, ", ")
}

// QueueMove says where a waiting task goes: ahead of (Before) or behind
// (After) another waiting task of its compute resource, or to the front
// or the back of the queue. Exactly one is given.
type QueueMove struct {
	Task    string
	Before  string
	After   string
	ToFront bool
	ToBack  bool
}

// where checks that m says one place, and returns the store's move.
func (m QueueMove) where() (store.QueueMove, error) {
	n := 0
	for _, set := range []bool{m.Before != "", m.After != "", m.ToFront, m.ToBack} {
		if set {
			n++
		}
	}
	if n != 1 {
		return store.QueueMove{}, kernel.Invalid("say where the task goes: before or after another waiting task, or to the front or the back of its queue (exactly one of them)")
	}
	return store.QueueMove{AnchorID: m.Before + m.After, Ahead: m.Before != "" || m.ToFront}, nil
}

// MovedTask is a task a lead moved, with its place in line before and after.
type MovedTask struct {
	Task     *model.Task
	From, To int
}

// MoveQueuedTask moves a waiting task in its compute resource's queue: the
// lead of its group or an admin may put it ahead of or behind another
// waiting task of the same compute resource, or at the front or the back.
// The move is one atomic change of the task's queue order, audited with
// the places before and after; the next pass places in the new order.
// Moved ahead of a task of a higher-priority project, it takes that
// project's rank until the lead next sets the project priority.
func (s *Tasks) MoveQueuedTask(ctx context.Context, in QueueMove) (*MovedTask, error) {
	var mv store.QueueMove
	return kernel.Run(ctx, s.k, kernel.Op[*MovedTask]{Name: "moveQueuedTask", Right: kernel.RightWrite, What: "reorder queues",
		Check: func(*identity.Principal) (err error) {
			mv, err = in.where()
			return err
		},
		Body: func(t *kernel.Txn) (*MovedTask, kernel.Audit, error) {
			task, err := s.waitingTask(t, in.Task, "", true)
			if err != nil {
				return nil, kernel.Audit{}, err
			}
			mv.TaskID = task.ID
			anchor := ""
			if mv.AnchorID != "" {
				// The anchor needs no right of its own: it must wait in
				// the task's compute resource, so in the same group.
				a, err := s.waitingTask(t, mv.AnchorID, "move it next to a waiting task", false)
				if err != nil {
					return nil, kernel.Audit{}, err
				}
				if a.ID == task.ID {
					return nil, kernel.Audit{}, kernel.Invalid("task %s cannot move next to itself", kernel.Quote(task.Name))
				}
				if a.ComputeResourceID != task.ComputeResourceID {
					return nil, kernel.Audit{}, kernel.Invalid("task %s waits in another compute resource than task %s: a task moves only within its own queue",
						kernel.Quote(a.Name), kernel.Quote(task.Name))
				}
				mv.AnchorID, anchor = a.ID, a.Name
			}
			from, to, err := t.Q.MoveQueuedTask(t.Ctx, t.P.TenantID, mv)
			if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound) {
				return nil, kernel.Audit{}, kernel.Conflict("the queue changed while task %s was moving (a task was placed or aborted); read it again and retry", kernel.Quote(task.Name))
			}
			if err != nil {
				return nil, kernel.Audit{}, err
			}
			moved, err := t.Q.GetTask(t.Ctx, t.P.TenantID, task.ID)
			if err != nil {
				return nil, kernel.Audit{}, err
			}
			if !kernel.SeesTask(t.P, moved) {
				moved = kernel.QueuePlace(moved)
			}
			where := "to the back"
			switch {
			case in.Before != "":
				where = "ahead of task " + anchor
			case in.After != "":
				where = "behind task " + anchor
			case in.ToFront:
				where = "to the front"
			}
			crName, by := task.ComputeResourceID, ""
			if e, err := s.k.CurrentEstate(t.Ctx, t.Q, t.P.TenantID); err == nil {
				if cr := e.ComputeResource(task.ComputeResourceID); cr != nil {
					crName = cr.Name
				}
				by = orderedBy(t.P, e, task.GroupID)
			}
			t.Publish(events.Event{TenantID: t.P.TenantID, Kind: "queue.changed", ObjectKind: "compute_resource",
				ObjectID: task.ComputeResourceID, ObjectName: crName, GroupID: task.GroupID, At: t.Now})
			return &MovedTask{Task: moved, From: from, To: to}, kernel.Audit{Action: "task.moved", Kind: "task", ID: task.ID, Name: task.Name,
				GroupID: task.GroupID, Detail: fmt.Sprintf("moved %s in compute resource %s: from position %d to %d%s", where, crName, from, to, by)}, nil
		}})
}

// waitingTask reads a waiting task p sees (else not found) and, when
// reorders is set, that p may reorder: of a group p leads or heads a
// department above, or p is an admin. A head who is not a member of the
// task's group finds its waiting tasks by id (the queue shows their
// places) without seeing their contents. hint completes the refusal of a
// task that is not waiting.
func (s *Tasks) waitingTask(t *kernel.Txn, id, hint string, reorders bool) (*model.Task, error) {
	task, err := t.Q.GetTask(t.Ctx, t.P.TenantID, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, kernel.NotFound("no task %s", kernel.Quote(id))
	}
	if err != nil {
		return nil, err
	}
	e, err := s.k.CurrentEstate(t.Ctx, t.Q, t.P.TenantID)
	if err != nil {
		return nil, err
	}
	if !kernel.SeesTask(t.P, task) && (task.Status != model.TaskQueued || kernel.HeadAbove(t.P, e, task.GroupID) == nil) {
		return nil, kernel.NotFound("no task %s", kernel.Quote(id))
	}
	if reorders && !OrdersQueue(t.P, e, task.GroupID) {
		return nil, kernel.Forbidden("only a lead of the task's group or an admin can reorder its queue (or the head of a department above it); task %s is not yours to move", kernel.Quote(task.Name))
	}
	if task.Status != model.TaskQueued {
		if hint == "" {
			hint = "only a waiting task moves in its queue"
		}
		return nil, kernel.Invalid("task %s is %s, not waiting: %s", kernel.Quote(task.Name), task.Status, hint)
	}
	return task, nil
}
