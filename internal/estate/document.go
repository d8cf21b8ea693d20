package estate

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"

	"github.com/goccy/go-yaml"
	"github.com/klique-ai/klique/internal/estate/basis"
)

// APIVersion and Kind head every estate file.
const (
	APIVersion = "klique/v1"
	Kind       = "Estate"
)

// MaxDocumentBytes bounds an estate file. A large estate is a few hundred
// kilobytes; anything bigger is a mistake or an attack.
const MaxDocumentBytes = 4 << 20

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
	Groups     []GroupDoc    `yaml:"groups,omitempty"`
	Policies   []PolicyDoc   `yaml:"policies,omitempty"`
	Projects   []ProjectDoc  `yaml:"projects,omitempty"`
	// Gateway is the LLM gateway's configuration.
	Gateway *GatewayDoc `yaml:"gateway,omitempty"`
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

// GroupDoc describes a group. Members come from SSO or the user commands,
// not from the estate file.
type GroupDoc struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description,omitempty"`
}

// PolicyDoc describes a group's resource policy and the compute resources it
// opens. The list of compute resources is whole: one the file leaves out is
// disconnected.
type PolicyDoc struct {
	Group                 string               `yaml:"group"`
	Reservation           *basis.Number        `yaml:"reservation,omitempty"`
	Limit                 *basis.Number        `yaml:"limit"`
	TimeBudget            *BudgetDoc           `yaml:"timeBudget,omitempty"`
	LowWatermarkMinutes   *basis.Number        `yaml:"lowWatermarkMinutes,omitempty"`
	AlertThresholdPercent *basis.Number        `yaml:"alertThresholdPercent,omitempty"`
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

// GatewayDoc describes the LLM gateway: providers and static routes, the
// models behind them with their prices, the aliases applications call,
// entitlements, token budgets, rate limits and the global guardrails.
// Objects are matched by name (budgets by project and period, rate limits
// by scope and name) and described whole, like every object of the file;
// objects the file does not mention stay as they are. Guardrails, when
// present, replace the global guardrails.
type GatewayDoc struct {
	Providers    []ProviderDoc    `yaml:"providers,omitempty"`
	Routes       []RouteDoc       `yaml:"routes,omitempty"`
	Models       []ModelDoc       `yaml:"models,omitempty"`
	Entitlements []EntitlementDoc `yaml:"entitlements,omitempty"`
	Aliases      []AliasDoc       `yaml:"aliases,omitempty"`
	Budgets      []TokenBudgetDoc `yaml:"budgets,omitempty"`
	RateLimits   []RateLimitDoc   `yaml:"rateLimits,omitempty"`
	Guardrails   *GuardrailsDoc   `yaml:"guardrails,omitempty"`
}

// ProviderDoc describes a public model API. KeySecret names the tenant
// vault secret that holds its key; the key itself never appears here.
type ProviderDoc struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description,omitempty"`
	BaseURL     string `yaml:"baseUrl"`
	KeySecret   string `yaml:"keySecret,omitempty"`
	// Timeout is a Go duration such as 60s or 2m.
	Timeout string `yaml:"timeout,omitempty"`
}

// RouteDoc describes a static route to self-hosted model servers.
type RouteDoc struct {
	Name        string   `yaml:"name"`
	Description string   `yaml:"description,omitempty"`
	Endpoints   []string `yaml:"endpoints"`
	Timeout     string   `yaml:"timeout,omitempty"`
}

// ModelDoc describes a model behind a provider or a route. Prices are per
// million tokens, in Currency.
type ModelDoc struct {
	Name            string        `yaml:"name"`
	Provider        string        `yaml:"provider,omitempty"`
	Route           string        `yaml:"route,omitempty"`
	Upstream        string        `yaml:"upstream,omitempty"`
	InputPrice      *basis.Number `yaml:"inputPrice,omitempty"`
	OutputPrice     *basis.Number `yaml:"outputPrice,omitempty"`
	Currency        string        `yaml:"currency,omitempty"`
	MaxOutputTokens *basis.Number `yaml:"maxOutputTokens,omitempty"`
}

// EntitlementDoc describes a named right held by groups and users.
type EntitlementDoc struct {
	Name   string   `yaml:"name"`
	Groups []string `yaml:"groups,omitempty"`
	Users  []string `yaml:"users,omitempty"`
}

// AliasDoc describes an alias: its rules, tried in order, and its own
// guardrails.
type AliasDoc struct {
	Name        string         `yaml:"name"`
	Description string         `yaml:"description,omitempty"`
	Rules       []AliasRuleDoc `yaml:"rules"`
	Guardrails  *GuardrailsDoc `yaml:"guardrails,omitempty"`
}

// AliasRuleDoc is one rule of an alias: conditions on the caller (empty
// lists match everyone), weighted targets and ordered fallbacks.
type AliasRuleDoc struct {
	Groups       []string    `yaml:"groups,omitempty"`
	Projects     []string    `yaml:"projects,omitempty"`
	Entitlements []string    `yaml:"entitlements,omitempty"`
	Targets      []TargetDoc `yaml:"targets"`
	Fallbacks    []string    `yaml:"fallbacks,omitempty"`
}

// TargetDoc is a model and its weight (default 1).
type TargetDoc struct {
	Model  string        `yaml:"model"`
	Weight *basis.Number `yaml:"weight,omitempty"`
}

// TokenBudgetDoc bounds a project's model spend per day, week or month, in
// tokens or in money, and optionally each user's part of it.
type TokenBudgetDoc struct {
	Project       string        `yaml:"project"`
	Period        string        `yaml:"period"`
	Tokens        *basis.Number `yaml:"tokens,omitempty"`
	Money         *basis.Number `yaml:"money,omitempty"`
	PerUserTokens *basis.Number `yaml:"perUserTokens,omitempty"`
	PerUserMoney  *basis.Number `yaml:"perUserMoney,omitempty"`
}

// RateLimitDoc bounds requests and tokens per minute for each user, each
// project or each alias, or for the one named.
type RateLimitDoc struct {
	Scope             string        `yaml:"scope"`
	Name              string        `yaml:"name,omitempty"`
	RequestsPerMinute *basis.Number `yaml:"requestsPerMinute,omitempty"`
	TokensPerMinute   *basis.Number `yaml:"tokensPerMinute,omitempty"`
}

// GuardrailsDoc holds deny and allow patterns (Go regular expressions) and
// an optional guard alias.
type GuardrailsDoc struct {
	Deny       []string `yaml:"deny,omitempty"`
	Allow      []string `yaml:"allow,omitempty"`
	GuardAlias string   `yaml:"guardAlias,omitempty"`
}

// ParseDocument reads an estate file. Unknown fields are refused (a typo in
// a field name would otherwise be silently ignored) and errors give the line.
func ParseDocument(data []byte) (*Document, error) {
	if len(data) > MaxDocumentBytes {
		return nil, fmt.Errorf("estate file is %d bytes, more than the %d allowed", len(data), MaxDocumentBytes)
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
