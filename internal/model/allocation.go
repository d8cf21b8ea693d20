package model

import "time"

// PoolKind is the kind of environment a pool's capacity lives in.
type PoolKind string

const (
	PoolKubernetes PoolKind = "kubernetes"
	PoolBareMetal  PoolKind = "bare_metal"
	PoolSlurm      PoolKind = "slurm"
	PoolPBS        PoolKind = "pbs"
	PoolLSF        PoolKind = "lsf"
	PoolCloud      PoolKind = "cloud"
	PoolNeocloud   PoolKind = "neocloud"
)

// PoolKinds lists every pool kind, in the order documentation shows them.
var PoolKinds = []PoolKind{PoolKubernetes, PoolBareMetal, PoolSlurm, PoolPBS, PoolLSF, PoolCloud, PoolNeocloud}

// Valid reports whether k is a known pool kind.
func (k PoolKind) Valid() bool {
	for _, v := range PoolKinds {
		if k == v {
			return true
		}
	}
	return false
}

// MultiNode reports whether a pool of this kind can place one task across
// several nodes at once (gang placement by the environment's own scheduler).
func (k PoolKind) MultiNode() bool {
	switch k {
	case PoolKubernetes, PoolSlurm, PoolPBS, PoolLSF, PoolNeocloud:
		return true
	}
	return false
}

// GPUClass is a type of GPU with the price finance sets per GPU-hour. Prices
// are for reporting only: they never stop work.
type GPUClass struct {
	ID          string
	TenantID    string
	Name        string
	Description string
	// MemoryGB is the memory of one GPU of this class, informational.
	MemoryGB int
	// PriceMicros is the price of one GPU-hour in millionths of Currency.
	PriceMicros int64
	Currency    string
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// Pool is capacity in one environment, declared in whole GPUs. "Full" means
// the declared capacity is used; Klique never probes the hardware.
type Pool struct {
	ID           string
	TenantID     string
	Name         string
	Description  string
	Kind         PoolKind
	CapacityGPUs int
	GPUClassID   string
	GPUMemoryGB  int
	Region       string
	Labels       map[string]string
	// ProfileOrder is the pool's execution priority: profile ids in the order
	// their work is placed on this pool. Linked profiles missing from the list
	// come after the listed ones, by name.
	ProfileOrder []string
	// ClaimTimeout is how long work placed on the pool may wait for a
	// worker of the pool to claim it while none is online, before it goes
	// back to the front of its compute resource (docs/engine.md, "Work
	// placed where no worker is"). nil takes the default
	// (EffectiveClaimTimeout); 0 turns it off.
	ClaimTimeout *time.Duration
	// OutputDestination is where tasks placed on the pool write outputs
	// (a bucket or directory URL the pool's nodes reach); empty: the
	// task's project's. "Only pointers come home": outputs larger than
	// the stored limit stay there and are registered as pointers.
	OutputDestination string
	// SingleTenant says that the pool's tasks need not be kept apart on a
	// host: a bare-metal worker whose tasks share one user (it cannot give
	// each its own) then runs tasks of different projects side by side,
	// rather than one project at a time (docs/worker.md, "What is
	// isolated on a host").
	SingleTenant bool
	// AppNetworks are CIDRs the pool's app instances may be reached in
	// directly, besides the network each worker reports from (the
	// router's address rule, docs/apps.md): a Kubernetes pod network, an
	// HPC cluster's compute nodes.
	AppNetworks []string
	// Local declares the pool's workers to run on the control plane's own
	// machine or network: their app instances may report any address,
	// loopback and link-local included. For one machine and tests only.
	Local     bool
	CreatedAt time.Time
	UpdatedAt time.Time
}

// DefaultClaimTimeout is a pool's claim timeout when its estate sets none
// and no autoscaler brings its nodes: long enough for a worker restart or a
// pod to be scheduled, short enough that work does not sit unseen for long.
const DefaultClaimTimeout = 5 * time.Minute

// EffectiveClaimTimeout is the pool's claim timeout (0: off). Unset, it is
// off for a pool an autoscaler brings nodes to (its work waits for the
// node the autoscaler starts, however long a cloud takes) and
// DefaultClaimTimeout otherwise.
func (p *Pool) EffectiveClaimTimeout(hasAutoscaler bool) time.Duration {
	switch {
	case p.ClaimTimeout != nil:
		return *p.ClaimTimeout
	case hasAutoscaler:
		return 0
	}
	return DefaultClaimTimeout
}

// Profile is a task size with a time weight and an ordered list of pools.
type Profile struct {
	ID          string
	TenantID    string
	Name        string
	Description string
	// Size is the GPU size of every task on the profile, or the default when
	// SizeParameter is set and a task does not give one.
	Size Size
	// SizeParameter names the task parameter that holds a task's own size.
	SizeParameter string
	// GPUClassID restricts the profile to pools of one GPU class.
	GPUClassID string
	// MinGPUMemoryGB asks for a capability instead of a class: pools whose
	// GPUs have less memory cannot be linked.
	MinGPUMemoryGB int
	// TimeWeightMilli is the time weight in thousandths: the budget hours that
	// one hour of a task on this profile costs, times 1000. 0 exempts.
	TimeWeightMilli int64
	// Pools are pool ids in the order work is placed ("first pool first").
	Pools []string
	// QueuingOrder is the profile's queuing priority: resource policy ids in
	// the order their groups' work is placed. Connected policies missing from
	// the list come after the listed ones, by group name.
	QueuingOrder []string
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

// BudgetPeriod is the calendar period of a time budget, in UTC.
type BudgetPeriod string

const (
	PeriodDay   BudgetPeriod = "day"
	PeriodWeek  BudgetPeriod = "week"
	PeriodMonth BudgetPeriod = "month"
)

// Valid reports whether p is a known period.
func (p BudgetPeriod) Valid() bool { return p == PeriodDay || p == PeriodWeek || p == PeriodMonth }

// TimeBudget is the budget hours a group may spend per period.
type TimeBudget struct {
	// MilliHours is the budget in thousandths of a budget hour.
	MilliHours int64
	Period     BudgetPeriod
}

// DefaultLowWatermark is how long a remaining budget must last for new work
// to start, unless a policy sets its own.
const DefaultLowWatermark = 15 * time.Minute

// DefaultWeight is a policy's weight when none is given: siblings share
// alike.
const DefaultWeight = 1

// EffectiveWeight is the policy's weight, DefaultWeight when unset.
func (p *ResourcePolicy) EffectiveWeight() int {
	if p.Weight == 0 {
		return DefaultWeight
	}
	return p.Weight
}

// DefaultAlertThresholdPercent is the share of a budget at which alerts fire.
const DefaultAlertThresholdPercent = 80

// ResourcePolicy is one group's rules: reservation, limit, an optional
// time budget and a weight. There is at most one policy per group. A
// department's policy covers the work of everything below it.
type ResourcePolicy struct {
	ID              string
	TenantID        string
	GroupID         string
	ReservationGPUs int
	LimitGPUs       int
	// Weight is the group's share, among its siblings in the organisation
	// tree, of the idle GPUs lent out: the next GPU goes to the sibling
	// using the least per unit of weight. 0 is the default, DefaultWeight
	// (EffectiveWeight): the estate keeps the default as 0 (Normalize), so
	// that one weight has one form and every policy written before weights
	// existed is unchanged. Channels refuse a weight below 1.
	Weight int
	// Budget is nil for a policy without a time budget.
	Budget                *TimeBudget
	LowWatermark          time.Duration
	AlertThresholdPercent int
	CreatedAt             time.Time
	UpdatedAt             time.Time
}

// ComputeResource is the queue a group submits to: one policy joined to one
// profile, named for what it gives, never for where it runs. Names are unique
// within a policy, so groups can share a name such as "1 GPU".
type ComputeResource struct {
	ID          string
	TenantID    string
	Name        string
	Description string
	PolicyID    string
	ProfileID   string
	// Image is the container image of tasks sent here that name none; a
	// task's own image wins.
	Image string
	// Env are environment variables every task sent here gets; a task's own
	// variable of the same name wins. Credentials are refused: they belong
	// in a vault.
	Env map[string]string
	// Mounts are extra mounts of a task's container in Docker mode, as
	// docker -v writes them: /host/path:/container/path[:ro|:rw]. Process
	// mode ignores them.
	Mounts    []string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Project groups tasks for attribution. A project may be restricted to one
// group; otherwise every user of the tenant may use it.
type Project struct {
	ID          string
	TenantID    string
	Name        string
	Description string
	// GroupID, when set, restricts the project to one group's members.
	GroupID string
	// OutputDestination is where tasks of the project write outputs
	// (a directory or bucket URL). The control plane records it, never bytes.
	OutputDestination string
	CreatedAt         time.Time
	UpdatedAt         time.Time
}
