package model

import "time"

// StudyState is where a study is in its life.
type StudyState string

const (
	// StudyRunning suggests and runs trials.
	StudyRunning StudyState = "running"
	// StudyCompleted ran every trial its space or budget allowed.
	StudyCompleted StudyState = "completed"
	// StudyStopped was stopped by a person (its running trials aborted) or
	// by the control plane (its owner lost access); Reason says which.
	StudyStopped StudyState = "stopped"
)

// Final reports whether a study in this state will not change again.
func (s StudyState) Final() bool { return s == StudyCompleted || s == StudyStopped }

// Strategies a study searches its space with.
const (
	StrategyGrid    = "grid"
	StrategyRandom  = "random"
	StrategyHalving = "halving"
)

// Kinds of search parameter.
const (
	ParamChoice     = "choice"
	ParamUniform    = "uniform"
	ParamLogUniform = "loguniform"
	ParamInt        = "int"
)

// Study is a hyperparameter search: trials cloned from a base task, each
// with its parameters set, ranked by an objective metric. It runs as its
// owner on its compute resource.
type Study struct {
	ID                string
	TenantID          string
	ProjectID         string
	OwnerID           string
	GroupID           string
	ComputeResourceID string
	Name              string
	// BaseTaskID is the run whose spec every trial clones.
	BaseTaskID string
	Spec       StudySpec
	State      StudyState
	// Reason says why the study ended (or "" while it runs).
	Reason string
	// BestTaskID is the best trial's task so far ("" before one ended
	// with the objective).
	BestTaskID string
	// Version counts the controller's writes: each pass changes a study
	// only from the version it read, so two replicas never both act.
	Version    int64
	CreatedAt  time.Time
	UpdatedAt  time.Time
	FinishedAt *time.Time
}

// StudySpec is what a study searches and how.
type StudySpec struct {
	Space    []SearchParam `json:"space"`
	Strategy string        `json:"strategy"`
	// Seed makes random suggestions repeatable.
	Seed int64 `json:"seed,omitempty"`
	// Objective is the metric ranked; Direction "min" or "max" (from the
	// metric's name when empty, as compare decides); Summary "final" (the
	// last value reported, the default) or "best".
	Objective string `json:"objective"`
	Direction string `json:"direction"`
	Summary   string `json:"summary,omitempty"`
	// MaxConcurrent is the most trials queued or running at once.
	MaxConcurrent int `json:"maxConcurrent"`
	// Budget bounds the study; at least one of its parts is set.
	Budget StudyBudget `json:"budget"`
	// Halving is set for the successive-halving strategy.
	Halving *Halving `json:"halving,omitempty"`
	// Parameters are set over the base task's on every trial, under the
	// trial's searched ones (which they may not name): a schedule that
	// starts a study again sets them from its overrides.
	Parameters map[string]string `json:"parameters,omitempty"`
}

// StudyBudget is how much a study may spend: a number of trials, GPU-hours
// from the ledger over all its trials, or both (the first reached ends it).
type StudyBudget struct {
	Trials   int     `json:"trials,omitempty"`
	GPUHours float64 `json:"gpuHours,omitempty"`
}

// Halving is successive halving: every trial runs with Resource (a
// parameter, e.g. epochs) set to MaxResource and reports the objective at
// each step; at the rungs MinResource·Eta^k below MaxResource, a trial
// continues only when its value is in the top 1/Eta of the values the
// trials reaching that rung reported, and is stopped early otherwise.
type Halving struct {
	Resource    string `json:"resource"`
	MinResource int    `json:"minResource"`
	MaxResource int    `json:"maxResource"`
	Eta         int    `json:"eta"`
}

// SearchParam is one dimension of a search space.
type SearchParam struct {
	Name string `json:"name"`
	// Kind is ParamChoice (Values), ParamUniform or ParamLogUniform
	// (Lo, Hi) or ParamInt (Lo, Hi, Step; both ends included).
	Kind   string   `json:"kind"`
	Values []string `json:"values,omitempty"`
	Lo     float64  `json:"lo,omitempty"`
	Hi     float64  `json:"hi,omitempty"`
	Step   int      `json:"step,omitempty"`
}

// TrialState is where a trial is in its life.
type TrialState string

const (
	// TrialPending is suggested and being enqueued (no task yet).
	TrialPending TrialState = "pending"
	// TrialRunning has a task that has not ended (queued, placed or
	// running: preemptions requeue it as any task).
	TrialRunning TrialState = "running"
	// TrialCompleted, TrialFailed and TrialAborted follow the task's end.
	TrialCompleted TrialState = "completed"
	TrialFailed    TrialState = "failed"
	TrialAborted   TrialState = "aborted"
	// TrialStoppedEarly was stopped by successive halving; Reason says at
	// which rung and why.
	TrialStoppedEarly TrialState = "stopped_early"
)

// Final reports whether a trial in this state will not change again.
func (s TrialState) Final() bool { return s != TrialPending && s != TrialRunning }

// StudyTrial is one trial of a study: the parameters it was given and the
// task that runs it.
type StudyTrial struct {
	TenantID string
	StudyID  string
	// Number counts the study's trials from 0, in the order suggested.
	Number int
	TaskID string
	Params map[string]string
	State  TrialState
	// Rung is how many successive-halving rungs the trial has passed.
	Rung int
	// Objective is the trial's objective value (nil before it reported
	// one), at ObjectiveStep.
	Objective     *float64
	ObjectiveStep int64
	Reason        string
	CreatedAt     time.Time
	EndedAt       *time.Time
}
