package mcp

import (
	"context"
	"strings"

	"github.com/klique-ai/klique/internal/platform"
)

// A team lead's queue tools (issue 32): ordering the team's projects and
// moving a waiting task. The platform checks that the caller leads the
// task's group (or is an admin); the tools only shape the arguments.

type moveArgs struct {
	ID      string `json:"id" jsonschema:"the waiting task to move"`
	Before  string `json:"before,omitempty" jsonschema:"put it ahead of this waiting task of the same compute resource"`
	After   string `json:"after,omitempty" jsonschema:"put it behind this waiting task of the same compute resource"`
	ToFront bool   `json:"toFront,omitempty" jsonschema:"put it at the front of its queue"`
	ToBack  bool   `json:"toBack,omitempty" jsonschema:"put it at the back of its queue"`
}

type movedView struct {
	Task *taskView `json:"task"`
	From int       `json:"from" jsonschema:"its position in line before the move, from 1"`
	To   int       `json:"to" jsonschema:"its position in line after the move"`
}

type priorityArgs struct {
	Group    string   `json:"group" jsonschema:"the team (group) whose projects are ordered"`
	Projects []string `json:"projects" jsonschema:"the team's projects (names or ids), first the one whose waiting tasks go first; empty clears the order"`
}

type priorityView struct {
	Group    string   `json:"group"`
	Projects []string `json:"projects" jsonschema:"the projects in priority order; tasks of projects not listed wait behind theirs"`
}

func (s *Server) addQueueTools() {
	addTool(s, toolDef{name: "move_queued_task", title: "Move a waiting task in its queue", writes: true, audited: true,
		description: "Reorder a queue: put a waiting task ahead of (before) or behind (after) another waiting task of the same compute resource, " +
			"or at its front or back; give exactly one. Only a lead of the task's group or an admin may. Answers its position before and after."}, s.moveQueuedTask)
	addTool(s, toolDef{name: "set_project_priorities", title: "Order a team's projects", writes: true, audited: true, idempotent: true,
		description: "Set the priority order of a team's projects (a lead of the group or an admin): in the team's compute resources, " +
			"a waiting task of an earlier project is placed before one of a later project; tasks of projects not listed wait behind."}, s.setProjectPriorities)
}

func (s *Server) moveQueuedTask(ctx context.Context, in *moveArgs) (*movedView, string, error) {
	if err := need(in.ID, "id", "the id of the waiting task to move"); err != nil {
		return nil, "", err
	}
	m, err := s.svc.Tasks.MoveQueuedTask(ctx, platform.QueueMove{Task: strings.TrimSpace(in.ID), Before: strings.TrimSpace(in.Before),
		After: strings.TrimSpace(in.After), ToFront: in.ToFront, ToBack: in.ToBack})
	if err != nil {
		return nil, "", err
	}
	v, err := s.view(ctx, m.Task, false)
	if err != nil {
		return nil, "", err
	}
	return &movedView{Task: v, From: m.From, To: m.To}, "", nil
}

func (s *Server) setProjectPriorities(ctx context.Context, in *priorityArgs) (*priorityView, string, error) {
	if err := need(in.Group, "group", "the name of the team whose projects you order"); err != nil {
		return nil, "", err
	}
	pp, err := s.svc.Tasks.SetProjectPriorities(ctx, strings.TrimSpace(in.Group), in.Projects)
	if err != nil {
		return nil, "", err
	}
	out := &priorityView{Group: pp.Group.Name, Projects: []string{}}
	for _, p := range pp.Projects {
		out.Projects = append(out.Projects, p.Name)
	}
	return out, "", nil
}
