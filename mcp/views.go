package mcp

import (
	"context"
	"math"

	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
)

// What the tools answer. Every id comes with a name, and times are RFC
// 3339 in UTC.

// taskRef names a task.
type taskRef struct {
	ID   string `json:"id" jsonschema:"the task's id, for the other task tools"`
	Name string `json:"name"`
}

// taskView is a task as get_task, enqueue_task, clone_task and abort_task
// answer it.
type taskView struct {
	ID     string `json:"id" jsonschema:"the task's id, for the other task tools"`
	Name   string `json:"name"`
	Status string `json:"status" jsonschema:"queued, placed, running, completed, failed or aborted; local for a run on its owner's machine recorded by the SDK, which no worker runs and the engine never places or charges"`
	Reason string `json:"reason,omitempty" jsonschema:"why the task is where it is: why it waits, why it was preempted, who aborted it"`
	// Position is the place in line while queued.
	Position        int    `json:"position,omitempty" jsonschema:"its place in its compute resource's queue while it waits (1 is next)"`
	ComputeResource string `json:"computeResource" jsonschema:"the compute resource it was sent to (empty for a local run)"`
	Group           string `json:"group" jsonschema:"the group whose policy governs it"`
	Project         string `json:"project"`
	Owner           string `json:"owner" jsonschema:"the user it runs for"`
	Size            string `json:"size" jsonschema:"GPUs it holds: 0.5, 1, 8, or nodes x GPUs per node such as 2x8"`
	Pool            string `json:"pool,omitempty" jsonschema:"the pool it was placed on, once placed"`
	Worker          string `json:"worker,omitempty" jsonschema:"the worker running it, once claimed"`
	Attempt         int    `json:"attempt,omitempty" jsonschema:"how many times a worker has claimed it"`
	ExitCode        *int   `json:"exitCode,omitempty"`
	// What it runs.
	Command    []string          `json:"command,omitempty"`
	Repository string            `json:"repository,omitempty"`
	Commit     string            `json:"commit,omitempty"`
	EntryPoint string            `json:"entryPoint,omitempty"`
	Image      string            `json:"image,omitempty"`
	Parameters map[string]string `json:"parameters,omitempty"`
	Tags       []string          `json:"tags,omitempty"`
	Outputs    []string          `json:"outputs,omitempty" jsonschema:"where the task wrote its outputs"`
	ClonedFrom *taskRef          `json:"clonedFrom,omitempty" jsonschema:"the task it was cloned from"`
	CreatedAt  string            `json:"createdAt"`
	PlacedAt   string            `json:"placedAt,omitempty"`
	StartedAt  string            `json:"startedAt,omitempty"`
	FinishedAt string            `json:"finishedAt,omitempty"`
}

// namer resolves the names of the objects tasks point to, once per call.
type namer struct {
	s        *Server
	e        *estate.Estate
	owners   map[string]string
	projects map[string]string
}

func (s *Server) namer(ctx context.Context) (*namer, error) {
	e, err := s.svc.Allocation.Estate(ctx)
	if err != nil {
		return nil, err
	}
	return &namer{s: s, e: e, owners: map[string]string{}, projects: map[string]string{}}, nil
}

func (n *namer) owner(ctx context.Context, t *model.Task) (string, error) {
	if name, ok := n.owners[t.OwnerID]; ok {
		return name, nil
	}
	u, err := n.s.svc.Tasks.TaskOwner(ctx, t)
	if err != nil {
		return "", err
	}
	n.owners[t.OwnerID] = u.Name
	return u.Name, nil
}

func (n *namer) project(ctx context.Context, t *model.Task) (string, error) {
	if name, ok := n.projects[t.ProjectID]; ok {
		return name, nil
	}
	pr, err := n.s.svc.Tasks.TaskProject(ctx, t)
	if err != nil {
		return "", err
	}
	n.projects[t.ProjectID] = pr.Name
	return pr.Name, nil
}

func (n *namer) computeResource(t *model.Task) string {
	if cr := n.e.ComputeResource(t.ComputeResourceID); cr != nil {
		return cr.Name
	}
	return ""
}

func (n *namer) pool(id string) string {
	if p := n.e.Pool(id); id != "" && p != nil {
		return p.Name
	}
	return ""
}

// task builds the view of a task the caller sees: its waiting reason and
// place in line, the names of what it points to, and (with detail) the
// worker running it and the task it was cloned from.
func (n *namer) task(ctx context.Context, t *model.Task, detail bool) (*taskView, error) {
	svc := n.s.svc
	v := &taskView{ID: t.ID, Name: t.Name, Status: string(t.Status), Group: n.e.GroupName(t.GroupID),
		ComputeResource: n.computeResource(t), Size: t.Size.String(), Pool: n.pool(t.PoolID), Attempt: t.Run.Attempt,
		ExitCode: t.Run.ExitCode, Command: t.Spec.Command, Repository: t.Spec.Repository, Commit: t.Spec.Commit,
		EntryPoint: t.Spec.EntryPoint, Image: t.Spec.Image, Parameters: t.Spec.Parameters, Tags: t.Tags, Outputs: t.Run.Outputs,
		CreatedAt: stamp(t.CreatedAt), PlacedAt: stampPtr(t.PlacedAt), StartedAt: stampPtr(t.Run.StartedAt), FinishedAt: stampPtr(t.FinishedAt)}
	var err error
	if v.Reason, err = svc.Tasks.TaskReason(ctx, t); err != nil {
		return nil, err
	}
	if v.Position, err = svc.Tasks.TaskPosition(ctx, t); err != nil {
		return nil, err
	}
	if v.Owner, err = n.owner(ctx, t); err != nil {
		return nil, err
	}
	if v.Project, err = n.project(ctx, t); err != nil {
		return nil, err
	}
	if !detail {
		return v, nil
	}
	if t.Run.WorkerID != "" {
		w, err := svc.Fleet.Worker(ctx, t.Run.WorkerID)
		switch {
		case err == nil:
			v.Worker = w.Hostname
		case platform.ErrorCode(err) != platform.CodeNotFound:
			return nil, err
		}
	}
	if t.ClonedFromID != "" {
		orig, err := svc.Tasks.Task(ctx, t.ClonedFromID)
		switch {
		case err == nil:
			v.ClonedFrom = &taskRef{ID: orig.ID, Name: orig.Name}
		case platform.ErrorCode(err) != platform.CodeNotFound:
			return nil, err
		}
	}
	return v, nil
}

// hours turns millionths of an hour into hours, to four decimals.
func hours(micro int64) float64 { return math.Round(float64(micro)/100) / 1e4 }

// money turns millionths of a currency into the currency, to four
// decimals.
func money(micros int64) float64 { return math.Round(float64(micros)/100) / 1e4 }
