package estate

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"

	"github.com/goccy/go-yaml"

	"github.com/klique-ai/klique/internal/docbudget"
	"github.com/klique-ai/klique/internal/estate/appconf"
	"github.com/klique-ai/klique/internal/estate/basis"
	"github.com/klique-ai/klique/internal/estate/llmconf"
)

// APIVersion and Kind head every estate file.
const (
	APIVersion = "klique/v1"
	Kind       = "Estate"
)

// MaxDocumentBytes bounds an estate file. A large estate is a few hundred
// kilobytes; anything bigger is a mistake or an attack.
const MaxDocumentBytes = 4 << 20

// Budget bounds what an estate file may hold, checked before it is
// decoded (docbudget): its bytes, its values once its aliases are
// expanded (a large estate has tens of thousands), its alias expansions
// and its nesting (the deepest part is an app's launch form).
var Budget = docbudget.Budget{Document: "estate file", MaxBytes: MaxDocumentBytes,
	MaxNodes: 500_000, MaxAliases: 10_000, MaxDepth: 64}

// Document is an estate file: how IT describes its capacity once and keeps it
// in git. Objects are named, and refer to each other by name. Each object in
// the file is described whole: a field left out takes its default. Objects
// the file does not mention are left as they are.
type Document struct {
	APIVersion string        `yaml:"apiVersion"`
	Kind       string        `yaml:"kind"`
	GPUClasses []GPUClassDoc `yaml:"gpuClasses,omitempty"`
	Pools      []PoolDoc     `yaml:"pools,omitempty"`
	Profiles   []ProfileDoc  `yaml:"profiles,omitempty"`
	// Departments are the organisation tree's nodes above groups.
	Departments []DepartmentDoc `yaml:"departments,omitempty"`
	Groups      []GroupDoc      `yaml:"groups,omitempty"`
	Policies    []PolicyDoc     `yaml:"policies,omitempty"`
	Projects    []ProjectDoc    `yaml:"projects,omitempty"`
	// Gateway is the LLM gateway's configuration, whose section package
	// llmconf reads and writes.
	Gateway *llmconf.GatewayDoc `yaml:"gateway,omitempty"`
	// Apps is the app catalogue's section, which package appconf reads
	// and writes.
	Apps *appconf.AppsDoc `yaml:"apps,omitempty"`
}

// GPUClassDoc describes a GPU class and its price per GPU-hour.
type GPUClassDoc struct {
	Name            string        `yaml:"name"`
	Description     string        `yaml:"description,omitempty"`
	MemoryGB        *basis.Number `yaml:"memoryGb,omitempty"`
	PricePerGPUHour *basis.Number `yaml:"pricePerGpuHour,omitempty"`
	Currency        string        `yaml:"currency,omitempty"`
}

// PoolDoc describes a pool. ExecutionPriority lists profile names in the
// order their work is placed on this pool.
type PoolDoc struct {
	Name              string            `yaml:"name"`
	Description       string            `yaml:"description,omitempty"`
	Kind              string            `yaml:"kind"`
	Capacity          *basis.Number     `yaml:"capacity"`
	GPUClass          string            `yaml:"gpuClass"`
	GPUMemoryGB       *basis.Number     `yaml:"gpuMemoryGb,omitempty"`
	Region            string            `yaml:"region,omitempty"`
	Labels            map[string]string `yaml:"labels,omitempty"`
	ExecutionPriority []string          `yaml:"executionPriority,omitempty"`
	// ClaimTimeout is how long placed work waits for a worker of the pool
	// while none is online: a Go duration ("5m", "90s"), or "off". Left
	// out, it takes the default (model.Pool.EffectiveClaimTimeout).
	ClaimTimeout string `yaml:"claimTimeout,omitempty"`
	// OutputDestination is where tasks placed on the pool write outputs
	// (a bucket or directory its nodes reach), before their project's.
	OutputDestination string `yaml:"outputDestination,omitempty"`
	// SingleTenant (bare_metal pools) says the pool's tasks need not be
	// kept apart on a host: its workers whose tasks share one user run
	// tasks of different projects side by side.
	SingleTenant bool `yaml:"singleTenant,omitempty"`
	// AppNetworks are CIDRs the router may reach the pool's app instances
	// in directly, besides the network each worker reports from (the
	// router's address rule, docs/apps.md).
	AppNetworks []string `yaml:"appNetworks,omitempty"`
	// Local declares the pool's workers to be on the control plane's own
	// machine: their app instances may report any address, loopback
	// included (one machine, tests).
	Local bool `yaml:"local,omitempty"`
}

// ProfileDoc describes a profile. Size is "0.125", "1", "8" or "2x8"; or
// SizeFromParameter reads it from a task parameter with a default.
// QueuingPriority lists group names in the order their work is placed.
type ProfileDoc struct {
	Name              string        `yaml:"name"`
	Description       string        `yaml:"description,omitempty"`
	Size              *basis.Number `yaml:"size,omitempty"`
	SizeFromParameter *SizeParamDoc `yaml:"sizeFromParameter,omitempty"`
	GPUClass          string        `yaml:"gpuClass,omitempty"`
	MinGPUMemoryGB    *basis.Number `yaml:"minGpuMemoryGb,omitempty"`
	TimeWeight        *basis.Number `yaml:"timeWeight,omitempty"`
	Pools             []string      `yaml:"pools,omitempty"`
	QueuingPriority   []string      `yaml:"queuingPriority,omitempty"`
}

// SizeParamDoc names the task parameter a profile reads sizes from.
type SizeParamDoc struct {
	Parameter string        `yaml:"parameter"`
	Default   *basis.Number `yaml:"default"`
}

// DepartmentDoc describes a department: a node of the organisation tree
// above groups, under Parent (another department) or, without one,
// directly under the tenant.
type DepartmentDoc struct {
	Name        string `yaml:"name"`
	Parent      string `yaml:"parent,omitempty"`
	Description string `yaml:"description,omitempty"`
}

// GroupDoc describes a group (a team): directly under the tenant, or in
// Department. Members come from SSO or the user commands, not from the
// estate file.
type GroupDoc struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description,omitempty"`
	Department  string `yaml:"department,omitempty"`
}

// PolicyDoc describes the resource policy of a group, or of a department
// (exactly one of the two), and the compute resources it opens. The list
// of compute resources is whole: one the file leaves out is disconnected.
// A department's policy opens none: its reservation, limit and budget
// cover its children's work. Weight is the share of lent GPUs among
// siblings (1 when left out).
type PolicyDoc struct {
	Group                 string               `yaml:"group,omitempty"`
	Department            string               `yaml:"department,omitempty"`
	Reservation           *basis.Number        `yaml:"reservation,omitempty"`
	Limit                 *basis.Number        `yaml:"limit"`
	TimeBudget            *BudgetDoc           `yaml:"timeBudget,omitempty"`
	LowWatermarkMinutes   *basis.Number        `yaml:"lowWatermarkMinutes,omitempty"`
	AlertThresholdPercent *basis.Number        `yaml:"alertThresholdPercent,omitempty"`
	Weight                *basis.Number        `yaml:"weight,omitempty"`
	ComputeResources      []ComputeResourceDoc `yaml:"computeResources,omitempty"`
}

// BudgetDoc is a time budget: budget hours per day, week or month.
type BudgetDoc struct {
	Hours  *basis.Number `yaml:"hours"`
	Period string        `yaml:"period"`
}

// ComputeResourceDoc connects a profile to the policy it is listed under.
// Image, Env and Mounts are how its tasks run: the image of tasks that name
// none, variables every task gets (a task's own win), and extra mounts of
// the container in Docker mode ("/data/cache:/data/cache:ro").
type ComputeResourceDoc struct {
	Name        string            `yaml:"name,omitempty"`
	Profile     string            `yaml:"profile"`
	Description string            `yaml:"description,omitempty"`
	Image       string            `yaml:"image,omitempty"`
	Env         map[string]string `yaml:"env,omitempty"`
	Mounts      []string          `yaml:"mounts,omitempty"`
}

// ProjectDoc describes a project.
type ProjectDoc struct {
	Name              string `yaml:"name"`
	Description       string `yaml:"description,omitempty"`
	Group             string `yaml:"group,omitempty"`
	OutputDestination string `yaml:"outputDestination,omitempty"`
}

// ParseDocument reads an estate file. A file over Budget is refused before
// it is decoded. Unknown fields are refused (a typo in a field name would
// otherwise be silently ignored) and errors give the line.
func ParseDocument(data []byte) (*Document, error) {
	var over *docbudget.Error
	if err := Budget.YAML(data); errors.As(err, &over) {
		return nil, err
	} else if err != nil {
		return nil, fmt.Errorf("estate file: %s", yaml.FormatError(err, false, true))
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, errors.New("estate file is empty")
	}
	var doc Document
	if err := unmarshalStrict(data, &doc); err != nil {
		return nil, err
	}
	switch {
	case doc.APIVersion == "" && doc.Kind == "":
		return nil, fmt.Errorf("estate file: start it with 'apiVersion: %s' and 'kind: %s'", APIVersion, Kind)
	case doc.APIVersion != APIVersion:
		return nil, fmt.Errorf("estate file: apiVersion %q is not supported; use %q", doc.APIVersion, APIVersion)
	case doc.Kind != Kind:
		return nil, fmt.Errorf("estate file: kind %q is not supported; use %q", doc.Kind, Kind)
	}
	return &doc, nil
}

// unmarshalStrict decodes an estate file. The YAML decoder panics on some
// malformed input (a tag on a value where a list belongs, found by
// FuzzParseDocument); an estate file comes from users, so that is turned
// into an error instead of taking the server down.
func unmarshalStrict(data []byte, doc *Document) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = errors.New("estate file: the YAML cannot be read; check its syntax, and any tags (!...) in it")
		}
	}()
	if err := yaml.UnmarshalWithOptions(data, doc, yaml.Strict()); err != nil {
		return fmt.Errorf("estate file: %s", yaml.FormatError(err, false, true))
	}
	return nil
}

// Marshal writes the document as YAML that reads back as the same
// document. The YAML encoder does not manage that for every string (a
// literal block whose last line holds only spaces, a lone tab, a carriage
// return: found by FuzzParseDocument), so each output is read back and
// checked, from the most readable style to JSON, which is YAML too and
// always reads back.
func (d *Document) Marshal() ([]byte, error) {
	styles := [][]yaml.EncodeOption{
		{yaml.Indent(2), yaml.IndentSequence(true), yaml.UseLiteralStyleIfMultiline(true)},
		{yaml.Indent(2), yaml.IndentSequence(true)},
	}
	for _, opts := range styles {
		out, err := yaml.MarshalWithOptions(d, opts...)
		if err != nil {
			return nil, err
		}
		var back Document
		if unmarshalStrict(out, &back) == nil && reflect.DeepEqual(&back, d) {
			return out, nil
		}
	}
	return yaml.MarshalWithOptions(d, yaml.JSON())
}
