package agentapi

import (
	"time"

	"github.com/klique-ai/klique/internal/model"
)

// The autoscaler's calls. An autoscaler daemon (klique autoscaler) speaks
// with a worker credential of the pool it scales, the same credential it
// hands to the workers its instances boot: it is the pool's listener, not
// a separate principal.
const (
	// PathAutoscalerSync reports the daemon's instances and reads what
	// waits on its pool: its heartbeat.
	PathAutoscalerSync = Prefix + "/autoscaler/sync"
	// PathAutoscalerCredentials returns the provider credentials the
	// autoscaler names, from the tenant's vault.
	PathAutoscalerCredentials = Prefix + "/autoscaler/credentials"
)

// MaxAutoscalerInstances bounds the instances one sync reports.
const MaxAutoscalerInstances = 1000

// AutoscalerInstance is one instance the daemon manages, as it reports
// it: the control plane keeps the report as it came (model's type is the
// wire form).
type AutoscalerInstance = model.AutoscalerInstance

// WaitingNote tells the control plane why placed tasks still have no node,
// for the task's reason (for example the maximum of instances reached).
type WaitingNote struct {
	TaskIDs []string `json:"taskIds"`
	Reason  string   `json:"reason"`
}

// AutoscalerSyncRequest is the daemon's report.
type AutoscalerSyncRequest struct {
	Version   string               `json:"version"`
	Instances []AutoscalerInstance `json:"instances"`
	// Message says what holds scaling, if anything.
	Message           string        `json:"message,omitempty"`
	SpotBlackoutUntil *time.Time    `json:"spotBlackoutUntil,omitempty"`
	Waiting           []WaitingNote `json:"waiting,omitempty"`
}

// InstanceType is a kind of instance the autoscaler may start.
type InstanceType struct {
	Name string `json:"name"`
	GPUs int    `json:"gpus"`
}

// AutoscalerSpec is the autoscaler's configuration as its admin set it
// (durations in seconds). It names no credential values.
type AutoscalerSpec struct {
	ID                   string            `json:"id"`
	Name                 string            `json:"name"`
	Pool                 string            `json:"pool"`
	Provider             string            `json:"provider"`
	Region               string            `json:"region,omitempty"`
	InstanceTypes        []InstanceType    `json:"instanceTypes"`
	MaxInstances         int               `json:"maxInstances"`
	IdleTimeoutSeconds   int               `json:"idleTimeoutSeconds"`
	SpinUpTimeoutSeconds int               `json:"spinUpTimeoutSeconds"`
	Market               string            `json:"market"`
	SpotFallback         bool              `json:"spotFallback"`
	SpotTimeoutSeconds   int               `json:"spotTimeoutSeconds"`
	SpotBlackoutSeconds  int               `json:"spotBlackoutSeconds"`
	Image                string            `json:"image,omitempty"`
	Settings             map[string]string `json:"settings,omitempty"`
	CredentialSecrets    []string          `json:"credentialSecrets,omitempty"`
}

// PlacedTask is a task the engine placed on the pool that no worker has
// claimed yet: work waiting for a node.
type PlacedTask struct {
	TaskID           string    `json:"taskId"`
	MilliGPUsPerNode int64     `json:"milliGpusPerNode"`
	Nodes            int       `json:"nodes"`
	PlacedAt         time.Time `json:"placedAt"`
}

// PoolWorker is a registered worker of the pool and what it runs.
type PoolWorker struct {
	ID              string    `json:"id"`
	Hostname        string    `json:"hostname"`
	GPUs            int       `json:"gpus"`
	LastHeartbeatAt time.Time `json:"lastHeartbeatAt"`
	Online          bool      `json:"online"`
	// RunningMilliGPUs is the size of the work it runs now.
	RunningMilliGPUs int64 `json:"runningMilliGpus"`
	RunningTasks     int   `json:"runningTasks"`
}

// AutoscalerSyncResponse is the autoscaler's configuration and its pool's
// state.
type AutoscalerSyncResponse struct {
	Autoscaler AutoscalerSpec `json:"autoscaler"`
	Placed     []PlacedTask   `json:"placed"`
	Workers    []PoolWorker   `json:"workers"`
	// SyncSeconds is how often to sync: often enough that the control
	// plane sees the daemon alive (a quarter of a worker lease).
	SyncSeconds int `json:"syncSeconds"`
}

// AutoscalerCredentialsResponse holds the provider credentials by secret
// name.
type AutoscalerCredentialsResponse struct {
	Secrets map[string]string `json:"secrets"`
}
