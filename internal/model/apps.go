package model

import (
	"strings"
	"time"
)

// AppKind says what an app is for.
type AppKind string

const (
	// AppServing is an OpenAI-compatible model server.
	AppServing AppKind = "serving"
	// AppSession is something a person or an agent opens in a browser or
	// a terminal.
	AppSession AppKind = "session"
)

// TaskKindApplication marks a task that is an app instance: it holds its
// GPUs until stopped and never completes on its own.
const TaskKindApplication = "application"

// AppPortPlaceholder is left in an app's process and batch lines (and its
// KLIQUE_APP_PORT) at launch: the worker that runs the instance on its
// host picks a free port and fills it in.
const AppPortPlaceholder = "{port}"

// App is a catalogue entry: how to run a serving endpoint or a session in
// each runner mode, and the launch form whose values its templates use.
// Templates reference launch values as {name} (see package appconf).
type App struct {
	Name        string  `json:"name"`
	Description string  `json:"description,omitempty"`
	Kind        AppKind `json:"kind"`
	Run         AppRun  `json:"run"`
	// Port is the port the app listens on; HealthPath answers once it is
	// ready (a later slice has workers poll it).
	Port       int    `json:"port"`
	HealthPath string `json:"healthPath,omitempty"`
	// Form is the launch form, a JSON Schema (an object schema), as text.
	Form string `json:"form,omitempty"`
	// Secrets names the form fields whose values are names of vault
	// secrets: the worker injects the secret under its own name; the value
	// never enters the spec.
	Secrets []string `json:"secrets,omitempty"`
	// Default idle limits, in minutes (0: none): the longest an instance
	// runs, and how long it may stay idle (see IdleGPUPercent). A launch
	// may shorten them, never lengthen them.
	MaxLifetimeMinutes int  `json:"maxLifetimeMinutes,omitempty"`
	IdleMinutes        int  `json:"idleMinutes,omitempty"`
	Locked             bool `json:"locked,omitempty"`
	// BuiltIn is set on entries shipped with the product (never stored).
	BuiltIn bool `json:"-"`
}

// AppRun is how an app runs in each runner mode. Each field is a template.
type AppRun struct {
	// Process is the command a process-mode worker runs, split on spaces
	// after rendering.
	Process string `json:"process,omitempty"`
	// Image and Args are the container a docker or Kubernetes worker runs.
	Image string   `json:"image,omitempty"`
	Args  []string `json:"args,omitempty"`
	// Pod is a Kubernetes pod template fragment (YAML) merged into the
	// worker's pod template.
	Pod string `json:"pod,omitempty"`
	// Batch is the line an HPC batch script runs.
	Batch string `json:"batch,omitempty"`
}

// AppGroupQuota is a group's running-apps quota.
type AppGroupQuota struct {
	Group   string `json:"group"`
	Running int    `json:"running"`
}

// AppSettings are the tenant-wide rules for launches.
type AppSettings struct {
	// LaunchesDisabled refuses every launch (the tenant-wide switch).
	LaunchesDisabled bool `json:"launchesDisabled,omitempty"`
	// Running is the company's running-apps quota (0: none).
	Running int `json:"running,omitempty"`
	// Groups are the per-group quotas, by group name.
	Groups []*AppGroupQuota `json:"groups,omitempty"`
	// IdleWarningMinutes is how long before its idle limits stop an
	// instance it is warned (0: DefaultIdleWarningMinutes).
	IdleWarningMinutes int `json:"idleWarningMinutes,omitempty"`
}

// DefaultIdleWarningMinutes is the idle warning's lead when a tenant sets
// none.
const DefaultIdleWarningMinutes = 10

// IdleWarning is the tenant's idle warning lead in effect.
func (s *AppSettings) IdleWarning() int {
	if s.IdleWarningMinutes > 0 {
		return s.IdleWarningMinutes
	}
	return DefaultIdleWarningMinutes
}

// The idle thresholds: an instance whose GPU utilisation (the worker's
// gpu.utilization metric, the mean over its GPUs) and CPU use (the
// cpu.utilization metric, percent of the cores it may use) stay under
// these, with no traffic through a router or the gateway, is idle. A point
// at or over either counts as use.
const (
	IdleGPUPercent = 5.0
	IdleCPUPercent = 5.0
)

// AppCatalogue is a tenant's part of the catalogue: its own entries and
// its overrides of built-ins (same name), and its launch rules. It is kept
// as one document, changed with the estate.
type AppCatalogue struct {
	Apps     []*App      `json:"apps,omitempty"`
	Settings AppSettings `json:"settings"`
}

// AppLaunch is what a task of kind application carries: which app, the
// values of its launch form, and its rendered run spec.
type AppLaunch struct {
	App    string         `json:"app"`
	Kind   AppKind        `json:"appKind"`
	Values map[string]any `json:"values,omitempty"`
	Run    AppRun         `json:"run"`
	Port   int            `json:"port,omitempty"`
	Health string         `json:"healthPath,omitempty"`
	Route  string         `json:"route,omitempty"`
	// ShareGroup shares the instance with the task's group; ShareUsers
	// with named users (ids).
	ShareGroup bool     `json:"shareGroup,omitempty"`
	ShareUsers []string `json:"shareUsers,omitempty"`
	// Idle limits in effect (minutes; 0: none): the app's, or shorter
	// ones the launch asked for.
	MaxLifetimeMinutes int `json:"maxLifetimeMinutes,omitempty"`
	IdleMinutes        int `json:"idleMinutes,omitempty"`
}

// AppInstance is a task of type application as the apps domain shows it.
type AppInstance struct {
	Task *Task
	// State is the instance's state: waiting, placed, running, ready
	// (running and its health path answers), stopped or failed.
	State string
	// URL is where the router will serve it: /apps/{id}/.
	URL string
	// Address is host:port where it answers, as reachable from its
	// worker's site; empty unless ready.
	Address string
	// AddressRefused is why the router's address rule refused Address
	// ("" when it was accepted): the router and the gateway then reach the
	// instance only through its worker's tunnel. AddressNetworks are the
	// networks a direct dial to it may reach (["*"] for a pool declared
	// local), as the platform decided when it was reported.
	AddressRefused  string
	AddressNetworks []string
	// Runtime and Idle are filled by the apps domain when it reads an
	// instance (nil otherwise).
	Runtime *AppRuntime
	Idle    *AppIdle
}

// AppRuntime is what a running instance reports: how long it has run, its
// latest GPU and CPU use (nil: not reported), and when it was last used.
type AppRuntime struct {
	Uptime         time.Duration
	GPUUtilization *float64
	CPUUtilization *float64
	LastActivity   *time.Time
}

// AppIdle is an instance's idle state under its limits, at a moment.
type AppIdle struct {
	IdleMinutes        int
	MaxLifetimeMinutes int
	// IdleSince is when it last was used (or started); nil without an
	// idle limit or while it is not running.
	IdleSince *time.Time
	// StopsAt is when its limits stop it unless it is used (nil: never);
	// StopReason is the reason its record will then carry.
	StopsAt    *time.Time
	StopReason string
	// WarnedAt is when it was warned that it will stop (nil: not warned).
	WarnedAt *time.Time
}

// AppInstanceOf is a task of type application as an instance: its state
// from the task's status, ready when running and its worker reports its
// health path answering, with the address it answers at.
func AppInstanceOf(t *Task) *AppInstance {
	in := &AppInstance{Task: t, State: AppInstanceState(t.Status), URL: "/apps/" + t.ID + "/"}
	if t.Status == TaskRunning && t.Run.AppAddress != "" {
		in.State, in.Address, in.AddressRefused = "ready", t.Run.AppAddress, t.Run.AppRefused
		in.AddressNetworks = []string{}
		if t.Run.AppAllow != "" {
			in.AddressNetworks = strings.Split(t.Run.AppAllow, ",")
		}
	}
	return in
}

// AppInstanceState maps a task's status to an instance's state.
func AppInstanceState(s TaskStatus) string {
	switch s {
	case TaskQueued:
		return "waiting"
	case TaskPlaced:
		return "placed"
	case TaskRunning:
		return "running" // or ready: see AppInstanceOf
	case TaskFailed:
		return "failed"
	}
	return "stopped"
}

// AppHosts says where the router serves app instances: each on a host
// name of its own under Domain ({id}.{Domain}, with the control plane's
// scheme and port), so that a page of one instance is another origin
// than the dashboard, the API and every other instance; or, with no
// Domain, by path on the control plane's own origin (/apps/{id}/), for a
// single trusted team (issue 39, defect 6; docs/apps.md).
type AppHosts struct {
	Domain string
	// Scheme and Port are the control plane's public URL's (Port "" for
	// the scheme's default).
	Scheme string
	Port   string
}

// AppHostsFor is the AppHosts of a domain (empty: by path) and the
// control plane's public URL.
func AppHostsFor(domain, publicURL string) AppHosts {
	h := AppHosts{Domain: strings.ToLower(strings.TrimSpace(domain)), Scheme: "https"}
	if scheme, rest, ok := strings.Cut(publicURL, "://"); ok {
		h.Scheme = scheme
		host, _, _ := strings.Cut(rest, "/")
		if i := strings.LastIndexByte(host, ':'); i >= 0 && !strings.HasSuffix(host, "]") {
			h.Port = host[i+1:]
		}
	}
	return h
}

// ByHost reports whether instances are served on hosts of their own.
func (h AppHosts) ByHost() bool { return h.Domain != "" }

// Origin is an instance's origin: scheme://{id}.{Domain}[:port].
func (h AppHosts) Origin(id string) string {
	o := h.Scheme + "://" + id + "." + h.Domain
	if h.Port != "" {
		o += ":" + h.Port
	}
	return o
}

// URL is where an instance is served: its origin's root, or /apps/{id}/.
func (h AppHosts) URL(id string) string {
	if !h.ByHost() {
		return "/apps/" + id + "/"
	}
	return h.Origin(id) + "/"
}

// Pattern is every instance's origin as a CSP source:
// scheme://*.{Domain}[:port] ("" when served by path).
func (h AppHosts) Pattern() string {
	if !h.ByHost() {
		return ""
	}
	return h.Origin("*")
}

// InstanceOf returns the instance id a request's Host names ({id}.{Domain},
// any port), and whether it names one.
func (h AppHosts) InstanceOf(host string) (string, bool) {
	if !h.ByHost() {
		return "", false
	}
	if i := strings.LastIndexByte(host, ':'); i >= 0 && !strings.HasSuffix(host, "]") {
		host = host[:i]
	}
	id, ok := strings.CutSuffix(strings.ToLower(strings.TrimSuffix(host, ".")), "."+h.Domain)
	if !ok || id == "" || strings.Contains(id, ".") {
		return "", false
	}
	return id, true
}
