package model

import "time"

// WorkerCredential lets the worker daemons of one pool connect. Like an API
// key it is shown once and only its hash is kept.
type WorkerCredential struct {
	ID        string
	TenantID  string
	PoolID    string
	Name      string
	Prefix    string
	Hash      []byte
	CreatedBy string
	CreatedAt time.Time
	RevokedAt *time.Time
}

// WorkerGPU is one GPU a worker owns.
type WorkerGPU struct {
	Index    int    `json:"index"`
	UUID     string `json:"uuid,omitempty"`
	MemoryMB int    `json:"memoryMb,omitempty"`
}

// Worker is a registered worker daemon: what the orchestration view lists.
type Worker struct {
	ID           string
	TenantID     string
	PoolID       string
	CredentialID string
	Hostname     string
	Version      string
	Mode         string
	Kind         string
	GPUs         []WorkerGPU
	// Labels describe the worker (rack, site), as its daemon declared them.
	Labels          map[string]string
	RegisteredAt    time.Time
	LastHeartbeatAt time.Time
}

// LogLine is one line a task printed, numbered in the task's log.
type LogLine struct {
	Seq     int64
	Attempt int
	At      time.Time
	Stream  string
	Line    string
	// N is the worker's number of the line within its attempt (from 1;
	// 0 when the worker gives none), used to keep each line once.
	N int64
}

// MetricPoint is one scalar a task reported.
type MetricPoint struct {
	Seq     int64
	Attempt int
	At      time.Time
	Name    string
	Value   float64
	Step    int64
}

// SecretScope is what a secret belongs to: the tenant, a group or a
// project.
type SecretScope = string

// Secret scopes.
const (
	ScopeTenant  SecretScope = "tenant"
	ScopeGroup   SecretScope = "group"
	ScopeProject SecretScope = "project"
)

// Secret is a value kept in a vault, encrypted at rest. Its plaintext never
// leaves the platform service except to the worker that runs a task naming
// it.
type Secret struct {
	TenantID   string
	Scope      string
	ScopeID    string
	Name       string
	Ciphertext []byte
	UpdatedBy  string
	CreatedAt  time.Time
	UpdatedAt  time.Time
}
