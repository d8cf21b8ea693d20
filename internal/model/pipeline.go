package model

import "time"

// PipelineRunState is where a run of a pipeline is in its life.
type PipelineRunState string

// The states of a pipeline run. A run is pending until its first step is
// enqueued, running while any step may still run, and ends completed
// (every step completed or cached), failed (a step failed for good) or
// aborted.
const (
	PipelineRunPending   PipelineRunState = "pending"
	PipelineRunRunning   PipelineRunState = "running"
	PipelineRunCompleted PipelineRunState = "completed"
	PipelineRunFailed    PipelineRunState = "failed"
	PipelineRunAborted   PipelineRunState = "aborted"
)

// Final reports whether the run has ended.
func (s PipelineRunState) Final() bool {
	return s == PipelineRunCompleted || s == PipelineRunFailed || s == PipelineRunAborted
}

// Valid reports whether s is a known state.
func (s PipelineRunState) Valid() bool {
	switch s {
	case PipelineRunPending, PipelineRunRunning, PipelineRunCompleted, PipelineRunFailed, PipelineRunAborted:
		return true
	}
	return false
}

// PipelineStepState is where one step of a pipeline run is.
type PipelineStepState string

// The states of a step. Queued and running follow the step's current
// task; cached means an earlier run's task is reused; skipped means the
// step will not run (a dependency failed, or the run stopped).
const (
	StepPending   PipelineStepState = "pending"
	StepQueued    PipelineStepState = "queued"
	StepRunning   PipelineStepState = "running"
	StepCompleted PipelineStepState = "completed"
	StepFailed    PipelineStepState = "failed"
	StepSkipped   PipelineStepState = "skipped"
	StepCached    PipelineStepState = "cached"
	StepAborted   PipelineStepState = "aborted"
)

// Final reports whether the step has ended.
func (s PipelineStepState) Final() bool {
	switch s {
	case StepCompleted, StepFailed, StepSkipped, StepCached, StepAborted:
		return true
	}
	return false
}

// Succeeded reports whether the step's outputs are there for its
// dependants: it completed, or an earlier run's were reused.
func (s PipelineStepState) Succeeded() bool { return s == StepCompleted || s == StepCached }

// Failure policies of a step.
const (
	// FailureStop aborts the run's other running steps and fails the run.
	FailureStop = "stop"
	// FailureContinue lets independent branches go on; the step's
	// dependants are skipped and the run fails once nothing runs.
	FailureContinue = "continue"
)

// PipelineDefinition is a pipeline as written (YAML or GraphQL input): its
// parameters with defaults and its steps. A run keeps the definition it
// ran, so a run can be read and rerun as it was.
type PipelineDefinition struct {
	Name string `json:"name"`
	// Project is the project (id or name) the steps' tasks belong to.
	Project string `json:"project,omitempty"`
	// Params are the pipeline's parameters with their defaults; a run's
	// values override them.
	Params map[string]string `json:"params,omitempty"`
	Steps  []PipelineStepDef `json:"steps"`
}

// PipelineStepDef is one step: a task spec on a compute resource, its
// dependencies, and what to do when it fails.
type PipelineStepDef struct {
	Name            string `json:"name"`
	ComputeResource string `json:"computeResource"`
	Group           string `json:"group,omitempty"`
	// DependsOn names steps that must succeed first. References in the
	// step's templates to other steps add to it.
	DependsOn []string `json:"dependsOn,omitempty"`
	Spec      TaskSpec `json:"spec"`
	// Inputs name earlier steps' artifacts ({{steps.S.artifacts.A}}),
	// passed by reference as TaskSpec.Inputs.
	Inputs map[string]string `json:"inputs,omitempty"`
	// OnFailure is FailureStop (the default) or FailureContinue.
	OnFailure string `json:"onFailure,omitempty"`
	// Retry is how many times a failed task is enqueued again before the
	// step fails.
	Retry int `json:"retry,omitempty"`
	// Cache false turns step caching off for the step (nil: on).
	Cache *bool `json:"cache,omitempty"`
}

// CacheOn reports whether the step may reuse an earlier run's result.
func (d *PipelineStepDef) CacheOn() bool { return d.Cache == nil || *d.Cache }

// PipelineRun is one run of a pipeline.
type PipelineRun struct {
	ID        string
	TenantID  string
	ProjectID string
	// GroupID is the group whose members see the run: the project's, or
	// else the group of the first step's compute resource.
	GroupID string
	OwnerID string
	// Name is the pipeline's name; runs of one name in one project are
	// runs of one pipeline (and share a step cache).
	Name       string
	Definition PipelineDefinition
	// Params are the run's parameter values, defaults filled.
	Params     map[string]string
	State      PipelineRunState
	Reason     string
	CreatedAt  time.Time
	UpdatedAt  time.Time
	FinishedAt *time.Time
	// Steps are in definition order.
	Steps []*PipelineStep
}

// Step returns the run's step of a name, or nil.
func (r *PipelineRun) Step(name string) *PipelineStep {
	for _, s := range r.Steps {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// PipelineStep is one step of a run.
type PipelineStep struct {
	RunID string
	Name  string
	// Position is the step's place in the definition.
	Position int
	State    PipelineStepState
	// ComputeResourceID is the compute resource the step's tasks go to.
	ComputeResourceID string
	// TaskID is the step's current (or last) task; TaskIDs every task of
	// it, one per attempt. A cached step's TaskID is the earlier run's
	// task it reuses (CachedFrom says so).
	TaskID  string
	TaskIDs []string
	// Attempts counts the tasks enqueued for the step.
	Attempts int
	// CacheKey is the digest of the step's code state, templated
	// parameters and inputs, set when it is enqueued.
	CacheKey string
	// CachedFromRunID is the run whose step this one reused.
	CachedFromRunID string
	Reason          string
	StartedAt       *time.Time
	FinishedAt      *time.Time
	UpdatedAt       time.Time
}

// PipelineTaskLink says which pipeline run's step (and attempt) made a
// task.
type PipelineTaskLink struct {
	TenantID string
	TaskID   string
	RunID    string
	Step     string
	Attempt  int
}
