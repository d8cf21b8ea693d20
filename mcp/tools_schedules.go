package mcp

import (
	"context"
	"strings"
	"time"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
)

type createScheduleArgs struct {
	Name string `json:"name" jsonschema:"a name for the schedule, unique among yours"`
	// What it starts: exactly one of task, pipeline and study.
	Task       string            `json:"task,omitempty" jsonschema:"the id of a task to run again (a clone of it) each time the schedule fires"`
	Pipeline   string            `json:"pipeline,omitempty" jsonschema:"or the id of a pipeline run whose definition is run again each time"`
	Study      string            `json:"study,omitempty" jsonschema:"or the id of a study whose definition (base task, space, strategy, objective, limits) starts a new study each time"`
	Parameters map[string]string `json:"parameters,omitempty" jsonschema:"parameters set over the target's on every run (a study's: over its base task's fixed parameters, never a searched one)"`
	Cron       string            `json:"cron,omitempty" jsonschema:"when it fires: 5 cron fields in UTC (minute hour day-of-month month day-of-week), such as 0 3 * * *, or @daily; or give a trigger"`
	// A trigger: a task of a project completes with a tag (triggerProject
	// and triggerTag), an artifact of a name is published
	// (triggerArtifact), or a run of a pipeline ends (triggerProject and
	// triggerPipeline).
	TriggerProject  string `json:"triggerProject,omitempty" jsonschema:"the project the trigger watches (required with triggerTag or triggerPipeline; optional with triggerArtifact)"`
	TriggerTag      string `json:"triggerTag,omitempty" jsonschema:"fire when a task of triggerProject completes with this tag"`
	TriggerArtifact string `json:"triggerArtifact,omitempty" jsonschema:"fire when an artifact of this name is published on a run you may see"`
	TriggerPipeline string `json:"triggerPipeline,omitempty" jsonschema:"fire when a run of the pipeline of this name in triggerProject ends"`
	TriggerState    string `json:"triggerState,omitempty" jsonschema:"with triggerPipeline: fire only when the run ends completed, failed or aborted (default: any end)"`
	MissedRuns      string `json:"missedRuns,omitempty" jsonschema:"run-once (default: one run on start for all the runs missed while the control plane was down) or skip"`
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
	addTool(s, toolDef{name: "create_schedule", title: "Schedule a task, pipeline or study", writes: true, audited: true,
		description: "Run a task again (a clone of it), a pipeline run's definition or a study's definition on a cron schedule (UTC), " +
			"or each time a task of a project completes with a tag, an artifact of a name is published, or a run of a pipeline ends. " +
			"Every run is made as you, under your group's policy and quota; if you lose access the schedule pauses and says why.",
		enums: map[string][]string{"missedRuns": {model.MissedRunOnce, model.MissedSkip}}}, s.createSchedule)
	addTool(s, toolDef{name: "list_schedules", title: "List schedules",
		description: "Your schedules: what each starts, when it fires, its next and last run, and why it is paused if it is."}, s.listSchedules)
}

func (s *Server) createSchedule(ctx context.Context, in *createScheduleArgs) (*scheduleView, string, error) {
	if err := need(in.Name, "name", "a name for the schedule"); err != nil {
		return nil, "", err
	}
	var kind, target string
	for k, id := range map[string]string{model.ScheduleTargetTask: in.Task, model.ScheduleTargetPipeline: in.Pipeline, model.ScheduleTargetStudy: in.Study} {
		if strings.TrimSpace(id) != "" {
			if kind != "" {
				return nil, "", badArg("give one of task, pipeline or study: what the schedule starts")
			}
			kind, target = k, id
		}
	}
	if kind == "" {
		return nil, "", badArg("argument %s is missing: give the id of the task to run again (as enqueue_task or list_tasks gave it), or a pipeline run's or study's id",
			quoteArg("task"))
	}
	si := platform.ScheduleInput{Name: &in.Name, TargetKind: &kind, TargetID: &target, Parameters: in.Parameters}
	if in.Cron != "" {
		si.Cron = &in.Cron
	}
	trig, err := scheduleTrigger(in)
	if err != nil {
		return nil, "", err
	}
	si.Trigger = trig
	if in.MissedRuns != "" {
		si.MissedRuns = &in.MissedRuns
	}
	sc, err := s.svc.Schedules.CreateSchedule(ctx, si)
	if err != nil {
		return nil, "", err
	}
	v := s.scheduleView(sc)
	return &v, "", nil
}

// scheduleTrigger reads the trigger arguments: the event is the one
// whose own argument is given (triggerArtifact, triggerPipeline, or
// triggerTag and triggerProject for a task's completion).
func scheduleTrigger(in *createScheduleArgs) (*model.ScheduleTrigger, error) {
	trig := &model.ScheduleTrigger{ProjectID: in.TriggerProject, Tag: in.TriggerTag, Artifact: in.TriggerArtifact,
		Pipeline: in.TriggerPipeline, State: in.TriggerState}
	switch {
	case in.TriggerArtifact != "" && in.TriggerPipeline != "":
		return nil, badArg("give triggerArtifact or triggerPipeline, not both: a schedule waits for one event")
	case in.TriggerArtifact != "":
		trig.Event = model.TriggerArtifactPublished
	case in.TriggerPipeline != "":
		trig.Event = model.TriggerPipelineFinished
	case in.TriggerProject != "" || in.TriggerTag != "" || in.TriggerState != "":
		trig.Event = model.TriggerTaskCompleted
	default:
		return nil, nil
	}
	return trig, nil
}

func (s *Server) listSchedules(ctx context.Context, _ *listSchedulesArgs) (*schedulesView, string, error) {
	all, err := s.svc.Schedules.Schedules(ctx)
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
		When: s.svc.Schedules.ScheduleWhen(sc), MissedRuns: sc.MissedRuns, Paused: sc.Paused, PausedReason: sc.PausedReason,
		NextRunAt: at(sc.NextRunAt), LastRunAt: at(sc.LastRunAt), LastRun: sc.LastRunID, LastResult: sc.LastResult, LastError: sc.LastError}
}
