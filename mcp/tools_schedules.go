package mcp

import (
	"context"
	"time"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
)

type createScheduleArgs struct {
	Name       string            `json:"name" jsonschema:"a name for the schedule, unique among yours"`
	Task       string            `json:"task" jsonschema:"the id of the task to run again (a clone of it) each time the schedule fires"`
	Parameters map[string]string `json:"parameters,omitempty" jsonschema:"parameters set over the task's on every run"`
	Cron       string            `json:"cron,omitempty" jsonschema:"when it fires: 5 cron fields in UTC (minute hour day-of-month month day-of-week), such as 0 3 * * *, or @daily; or give triggerProject and triggerTag"`
	// A trigger: when a task of a project completes with a tag.
	TriggerProject string `json:"triggerProject,omitempty" jsonschema:"fire when a task of this project completes with triggerTag"`
	TriggerTag     string `json:"triggerTag,omitempty" jsonschema:"the tag the completed task must have"`
	MissedRuns     string `json:"missedRuns,omitempty" jsonschema:"run-once (default: one run on start for all the runs missed while the control plane was down) or skip"`
}

// scheduleView is what the tools show of a schedule.
type scheduleView struct {
	ID           string            `json:"id"`
	Name         string            `json:"name"`
	Target       string            `json:"target" jsonschema:"what it starts: task <id> (a clone), pipeline <id> or study <id>"`
	Parameters   map[string]string `json:"parameters,omitempty"`
	When         string            `json:"when" jsonschema:"when it fires"`
	MissedRuns   string            `json:"missedRuns"`
	Paused       bool              `json:"paused"`
	PausedReason string            `json:"pausedReason,omitempty" jsonschema:"who paused it, or why its owner can no longer start it"`
	NextRunAt    string            `json:"nextRunAt,omitempty"`
	LastRunAt    string            `json:"lastRunAt,omitempty"`
	LastRun      string            `json:"lastRun,omitempty" jsonschema:"the id of what the last firing started"`
	LastResult   string            `json:"lastResult,omitempty"`
	LastError    string            `json:"lastError,omitempty"`
}

type listSchedulesArgs struct{}

type schedulesView struct {
	Schedules []scheduleView `json:"schedules"`
}

func (s *Server) addScheduleTools() {
	addTool(s, toolDef{name: "create_schedule", title: "Schedule a task", writes: true, audited: true,
		description: "Run a task again on a cron schedule (UTC) or each time a task of a project completes with a tag. " +
			"Every run is a clone of the task, made as you, under your group's policy and quota; if you lose access the schedule pauses and says why.",
		enums: map[string][]string{"missedRuns": {model.MissedRunOnce, model.MissedSkip}}}, s.createSchedule)
	addTool(s, toolDef{name: "list_schedules", title: "List schedules",
		description: "Your schedules: what each starts, when it fires, its next and last run, and why it is paused if it is."}, s.listSchedules)
}

func (s *Server) createSchedule(ctx context.Context, in *createScheduleArgs) (*scheduleView, string, error) {
	if err := need(in.Name, "name", "a name for the schedule"); err != nil {
		return nil, "", err
	}
	if err := need(in.Task, "task", "the id of the task to run again, as enqueue_task or list_tasks gave it"); err != nil {
		return nil, "", err
	}
	kind := model.ScheduleTargetTask
	si := platform.ScheduleInput{Name: &in.Name, TargetKind: &kind, TargetID: &in.Task, Parameters: in.Parameters}
	if in.Cron != "" {
		si.Cron = &in.Cron
	}
	if in.TriggerProject != "" || in.TriggerTag != "" {
		si.Trigger = &model.ScheduleTrigger{Event: model.TriggerTaskCompleted, ProjectID: in.TriggerProject, Tag: in.TriggerTag}
	}
	if in.MissedRuns != "" {
		si.MissedRuns = &in.MissedRuns
	}
	sc, err := s.o.Service.CreateSchedule(ctx, si)
	if err != nil {
		return nil, "", err
	}
	v := s.scheduleView(sc)
	return &v, "", nil
}

func (s *Server) listSchedules(ctx context.Context, _ *listSchedulesArgs) (*schedulesView, string, error) {
	all, err := s.o.Service.Schedules(ctx)
	if err != nil {
		return nil, "", err
	}
	out := &schedulesView{Schedules: []scheduleView{}}
	for _, sc := range all {
		out.Schedules = append(out.Schedules, s.scheduleView(sc))
	}
	return out, "", nil
}

func (s *Server) scheduleView(sc *model.Schedule) scheduleView {
	at := func(t *time.Time) string {
		if t == nil {
			return ""
		}
		return t.UTC().Format(time.RFC3339)
	}
	return scheduleView{ID: sc.ID, Name: sc.Name, Target: sc.TargetKind + " " + sc.TargetID, Parameters: sc.Parameters,
		When: s.o.Service.ScheduleWhen(sc), MissedRuns: sc.MissedRuns, Paused: sc.Paused, PausedReason: sc.PausedReason,
		NextRunAt: at(sc.NextRunAt), LastRunAt: at(sc.LastRunAt), LastRun: sc.LastRunID, LastResult: sc.LastResult, LastError: sc.LastError}
}
