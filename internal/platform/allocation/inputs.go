package allocation

import "github.com/klique-ai/klique/internal/model"

// Inputs of the allocation-model operations. A nil field leaves the value as
// it is on update and takes the default on create. References to other
// objects are by id or by name.

// GPUClassInput creates or changes a GPU class.
type GPUClassInput struct {
	Name            *string
	Description     *string
	MemoryGB        *int
	PricePerGPUHour *float64
	Currency        *string
}

// PoolInput creates or changes a pool. ExecutionPriority lists profiles in
// the order their work is placed on the pool.
type PoolInput struct {
	Name              *string
	Description       *string
	Kind              *model.PoolKind
	CapacityGPUs      *int
	GPUClass          *string
	GPUMemoryGB       *int
	Region            *string
	Labels            map[string]string
	ExecutionPriority []string
	// ClaimTimeoutSeconds sets the pool's claim timeout: 0 turns it off, a
	// negative number returns it to the default (estate.md).
	ClaimTimeoutSeconds *int
	// OutputDestination is where tasks placed on the pool write outputs
	// ("" clears it: the project's applies).
	OutputDestination *string
}

// ProfileInput creates or changes a profile. Size is "0.125", "1", "8" or
// "2x8"; with SizeParameter set it is the default for tasks that give none.
// An empty SizeParameter or GPUClass clears it. QueuingPriority lists groups
// in the order their work is placed.
type ProfileInput struct {
	Name            *string
	Description     *string
	Size            *string
	SizeParameter   *string
	GPUClass        *string
	MinGPUMemoryGB  *int
	TimeWeight      *float64
	Pools           []string
	QueuingPriority []string
}

// TimeBudgetInput is budget hours per day, week or month.
type TimeBudgetInput struct {
	Hours  float64
	Period model.BudgetPeriod
}

// PolicyInput creates or changes a group's resource policy.
type PolicyInput struct {
	// Group is the group the policy belongs to; only on create.
	Group                 *string
	ReservationGPUs       *int
	LimitGPUs             *int
	TimeBudget            *TimeBudgetInput
	ClearTimeBudget       bool
	LowWatermarkMinutes   *int
	AlertThresholdPercent *int
	// Weight is the group's share of lent GPUs among its siblings, 1 or
	// more.
	Weight *int
}

// ConnectInput connects a profile to a policy, creating a compute resource.
type ConnectInput struct {
	// Policy is a policy id or the name of its group.
	Policy      string
	Profile     string
	Name        *string
	Description *string
	// Image, Env and Mounts are how the compute resource's tasks run (see
	// model.ComputeResource).
	Image  *string
	Env    map[string]string
	Mounts []string
}

// ComputeResourceInput renames, describes or changes how the tasks of a
// compute resource run. A nil Env or Mounts leaves them as they are; an
// empty one clears them, as an empty Image does.
type ComputeResourceInput struct {
	Name        *string
	Description *string
	Image       *string
	Env         map[string]string
	Mounts      []string
}

// GroupInput creates or changes a group.
type GroupInput struct {
	Name        *string
	Description *string
	// Department is the department the group sits in, by name or id; ""
	// puts it directly under the tenant. Departments themselves are made
	// in the estate file.
	Department *string
}

// ProjectInput creates or changes a project. An empty Group makes the
// project open to the whole tenant.
type ProjectInput struct {
	Name              *string
	Description       *string
	Group             *string
	OutputDestination *string
}
