package model

import "time"

// Schedule target kinds: what a schedule starts.
const (
	ScheduleTargetTask     = "task"
	ScheduleTargetPipeline = "pipeline"
	ScheduleTargetStudy    = "study"
)

// Missed-run policies: what a schedule does with the firings it missed
// while no control plane ran its pass.
const (
	// MissedRunOnce fires once on start for all the firings missed.
	MissedRunOnce = "run-once"
	// MissedSkip fires none of them and waits for the next one.
	MissedSkip = "skip"
)

// Trigger events: what a trigger schedule waits for.
const (
	// TriggerTaskCompleted: a task of a project completed with a tag.
	TriggerTaskCompleted = "task.completed"
	// TriggerArtifactPublished: an artifact of a name was published.
	TriggerArtifactPublished = "artifact.published"
	// TriggerPipelineFinished: a run of a pipeline finished.
	TriggerPipelineFinished = "pipeline.finished"
)

// Schedule starts a task, pipeline or study, as its owner, on a cron
// expression (UTC) or when an event happens.
type Schedule struct {
	ID       string
	TenantID string
	// OwnerID is the user every run is made as, under their policies.
	OwnerID string
	Name    string
	// TargetKind is ScheduleTarget*; TargetID the task to clone, or the
	// pipeline or study to start.
	TargetKind string
	TargetID   string
	// ProjectID is the project of the target, which the cap on schedules
	// per project counts; empty for a schedule saved before it was kept,
	// until it is next changed.
	ProjectID string
	// Parameters override the target's (a task's parameters, a pipeline's
	// or study's own).
	Parameters map[string]string
	// Cron is a standard 5-field expression or a descriptor (@daily), in
	// UTC; empty for a trigger schedule.
	Cron    string
	Trigger *ScheduleTrigger
	// MissedRuns is MissedRunOnce or MissedSkip.
	MissedRuns string
	// Paused stops firings; PausedReason says why (a person paused it, or
	// its owner lost access).
	Paused       bool
	PausedReason string
	// NextRunAt is the next firing of a cron schedule; nil for a trigger
	// or a paused schedule.
	NextRunAt *time.Time
	// LastRunAt, LastRunID and LastResult describe the last firing: when,
	// what it started (a task, pipeline run or study id), and what
	// became of it ("started", or the refusal). LastError is the last
	// firing that failed, cleared by a success.
	LastRunAt  *time.Time
	LastRunID  string
	LastResult string
	LastError  string
	// CheckedAt is how far a trigger schedule has looked for its events:
	// events at or before it have been matched.
	CheckedAt *time.Time
	CreatedAt time.Time
	UpdatedAt time.Time
}

// ScheduleTrigger is the event a trigger schedule waits for. Only the
// fields of its Event apply.
type ScheduleTrigger struct {
	Event string `json:"event"`
	// ProjectID is the project (id) whose events fire it: required for
	// TriggerTaskCompleted and TriggerPipelineFinished, optional for
	// TriggerArtifactPublished (empty: any project's).
	ProjectID string `json:"projectId,omitempty"`
	// Tag: TriggerTaskCompleted (a task of the project that completed
	// with the tag).
	Tag string `json:"tag,omitempty"`
	// Artifact: TriggerArtifactPublished (an artifact of this name).
	Artifact string `json:"artifact,omitempty"`
	// Pipeline and State: TriggerPipelineFinished (a run of the pipeline
	// of this name in the project ended, in State when set: completed,
	// failed or aborted).
	Pipeline string `json:"pipeline,omitempty"`
	State    string `json:"state,omitempty"`
}

// TriggerMatch is one event a trigger schedule fires for. Key names the
// event uniquely among those of its kind (artifact:<id>,
// pipeline_run:<id>); At orders matches and moves the schedule's check on.
// It lives here so that each domain's trigger source returns it without
// importing the schedules domain.
type TriggerMatch struct {
	Key string
	At  time.Time
}

// ScheduleRun is one firing of a schedule: Key names the firing (the due
// time of a cron firing, the event of a trigger) and is unique in the
// schedule, so a firing is recorded once however many replicas made it.
type ScheduleRun struct {
	TenantID   string
	ScheduleID string
	Key        string
	// TargetKind and RunID: what the firing started (a task id, a
	// pipeline run id, a study id).
	TargetKind string
	RunID      string
	At         time.Time
}
