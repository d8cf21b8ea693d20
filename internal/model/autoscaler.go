package model

import "time"

// Autoscaler markets: how an autoscaler buys instances.
const (
	// MarketSpot asks for spot capacity first and falls back to on-demand
	// when spot is refused or not fulfilled in time.
	MarketSpot = "spot"
	// MarketOnDemand asks for on-demand capacity only.
	MarketOnDemand = "on_demand"
)

// Autoscaler providers.
const (
	ProviderAWS   = "aws"
	ProviderLocal = "local"
)

// InstanceType is a kind of instance an autoscaler may start, with the GPUs
// each one brings to its pool.
type InstanceType struct {
	Name string `json:"name"`
	GPUs int    `json:"gpus"`
}

// AutoscalerSpec is what an admin sets on an autoscaler. Provider
// credentials are never part of it: CredentialSecrets names secrets of the
// tenant's vault, which only the autoscaler daemon of the pool can read.
type AutoscalerSpec struct {
	Provider      string         `json:"provider"`
	Region        string         `json:"region,omitempty"`
	InstanceTypes []InstanceType `json:"instanceTypes"`
	MaxInstances  int            `json:"maxInstances"`
	// IdleTimeout removes an instance whose worker has run nothing for
	// this long; SpinUpTimeout terminates one whose worker has not
	// registered this long after launch.
	IdleTimeout   time.Duration `json:"idleTimeout"`
	SpinUpTimeout time.Duration `json:"spinUpTimeout"`
	Market        string        `json:"market"`
	// SpotFallback allows on-demand instances when spot is refused or not
	// fulfilled within SpotTimeout; SpotBlackout is how long after a spot
	// failure the autoscaler buys on-demand before asking for spot again.
	SpotFallback bool          `json:"spotFallback"`
	SpotTimeout  time.Duration `json:"spotTimeout"`
	SpotBlackout time.Duration `json:"spotBlackout"`
	// Image is the machine image instances boot (an AMI id on AWS).
	Image string `json:"image,omitempty"`
	// Settings are provider settings that are not secret (subnet,
	// security groups, instance profile, key pair).
	Settings          map[string]string `json:"settings,omitempty"`
	CredentialSecrets []string          `json:"credentialSecrets,omitempty"`
}

// MaxGPUsPerInstance is the GPUs of the largest instance type.
func (s AutoscalerSpec) MaxGPUsPerInstance() int {
	n := 0
	for _, it := range s.InstanceTypes {
		n = max(n, it.GPUs)
	}
	return n
}

// AutoscalerInstance is one instance as the autoscaler daemon last
// reported it.
type AutoscalerInstance struct {
	ID     string `json:"id"`
	Worker string `json:"worker"`
	Type   string `json:"type"`
	GPUs   int    `json:"gpus"`
	// Market is spot or on_demand.
	Market string `json:"market"`
	// State is pending (launched, worker not registered yet), running
	// (worker registered), idle or terminating.
	State        string     `json:"state"`
	LaunchedAt   time.Time  `json:"launchedAt"`
	RegisteredAt *time.Time `json:"registeredAt,omitempty"`
	IdleSince    *time.Time `json:"idleSince,omitempty"`
}

// AutoscalerStatus is what the autoscaler daemon reports at each sync.
type AutoscalerStatus struct {
	Instances []AutoscalerInstance `json:"instances"`
	// Message says what holds scaling, if anything (no spot capacity, the
	// maximum reached, a provider error).
	Message           string     `json:"message,omitempty"`
	SpotBlackoutUntil *time.Time `json:"spotBlackoutUntil,omitempty"`
	Version           string     `json:"version,omitempty"`
}

// Autoscaler starts and stops cloud instances for one pool so that the pool
// takes work with no nodes (scale from zero).
type Autoscaler struct {
	ID              string
	TenantID        string
	PoolID          string
	Name            string
	Spec            AutoscalerSpec
	Status          AutoscalerStatus
	CreatedBy       string
	CreatedAt       time.Time
	UpdatedAt       time.Time
	LastHeartbeatAt *time.Time
}
