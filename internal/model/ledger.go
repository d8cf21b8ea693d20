package model

import "time"

// Placement is one interval during which a task held capacity on a pool: a
// row of the usage ledger. It opens in the same transaction that places the
// task and closes in the same transaction that releases it (preemption,
// abort, finish), so a crash loses no usage. Names are copied at placement
// so the ledger reads the same after objects are renamed or deleted.
type Placement struct {
	ID                  string
	TenantID            string
	TaskID              string
	UserID              string
	UserName            string
	ProjectID           string
	ProjectName         string
	GroupID             string
	GroupName           string
	PolicyID            string
	ProfileID           string
	ProfileName         string
	ComputeResourceID   string
	ComputeResourceName string
	PoolID              string
	PoolName            string
	GPUClassID          string
	GPUClassName        string
	// Size is the GPUs the task held (nodes × GPUs per node).
	Size MilliGPU
	// WeightMilli is the profile's time weight at placement.
	WeightMilli int64
	// PriceMicros and Currency are the GPU class's price per GPU-hour at
	// placement, so past usage keeps its price.
	PriceMicros int64
	Currency    string
	StartedAt   time.Time
	// EndedAt is nil while the task still holds the capacity.
	EndedAt   *time.Time
	EndReason string
}

// QueueState says why the head of a compute resource's queue waits, as the
// engine's last pass found it.
type QueueState struct {
	TenantID          string
	ComputeResourceID string
	// TaskID is the head the state is about.
	TaskID     string
	Constraint string
	Reason     string
	// Until is when the constraint lifts by itself at the latest (a budget
	// reset); see OrWhenRunningWorkEnds.
	Until     *time.Time
	UpdatedAt time.Time
}

// OrWhenRunningWorkEnds reports whether the head may start before Until:
// a head held only by the low watermark starts once its group's running
// budgeted work ends (then none of it runs, and one task may start on
// what is left), without waiting for the reset.
func (s *QueueState) OrWhenRunningWorkEnds() bool {
	return s.Constraint == "budget_low_watermark"
}

// EnginePause is an interval during which an admin had the engine
// disabled: nothing was placed and no budget time was charged.
type EnginePause struct {
	TenantID  string
	StartedAt time.Time
	EndedAt   *time.Time
	ByUserID  string
	ByName    string
}
