package estate

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
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
	Name            string  `yaml:"name"`
	Description     string  `yaml:"description,omitempty"`
	MemoryGB        *Number `yaml:"memoryGb,omitempty"`
	PricePerGPUHour *Number `yaml:"pricePerGpuHour,omitempty"`
	Currency        string  `yaml:"currency,omitempty"`
}

// PoolDoc describes a pool. ExecutionPriority lists profile names in the
// order their work is placed on this pool.
type PoolDoc struct {
	Name              string            `yaml:"name"`
	Description       string            `yaml:"description,omitempty"`
	Kind              string            `yaml:"kind"`
	Capacity          *Number           `yaml:"capacity"`
	GPUClass          string            `yaml:"gpuClass"`
	GPUMemoryGB       *Number           `yaml:"gpuMemoryGb,omitempty"`
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
	Size              *Number       `yaml:"size,omitempty"`
	SizeFromParameter *SizeParamDoc `yaml:"sizeFromParameter,omitempty"`
	GPUClass          string        `yaml:"gpuClass,omitempty"`
	MinGPUMemoryGB    *Number       `yaml:"minGpuMemoryGb,omitempty"`
	TimeWeight        *Number       `yaml:"timeWeight,omitempty"`
	Pools             []string      `yaml:"pools,omitempty"`
	QueuingPriority   []string      `yaml:"queuingPriority,omitempty"`
}

// SizeParamDoc names the task parameter a profile reads sizes from.
type SizeParamDoc struct {
	Parameter string  `yaml:"parameter"`
	Default   *Number `yaml:"default"`
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
	Reservation           *Number              `yaml:"reservation,omitempty"`
	Limit                 *Number              `yaml:"limit"`
	TimeBudget            *BudgetDoc           `yaml:"timeBudget,omitempty"`
	LowWatermarkMinutes   *Number              `yaml:"lowWatermarkMinutes,omitempty"`
	AlertThresholdPercent *Number              `yaml:"alertThresholdPercent,omitempty"`
	ComputeResources      []ComputeResourceDoc `yaml:"computeResources,omitempty"`
}

// BudgetDoc is a time budget: budget hours per day, week or month.
type BudgetDoc struct {
	Hours  *Number `yaml:"hours"`
	Period string  `yaml:"period"`
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
	Name            string  `yaml:"name"`
	Provider        string  `yaml:"provider,omitempty"`
	Route           string  `yaml:"route,omitempty"`
	Upstream        string  `yaml:"upstream,omitempty"`
	InputPrice      *Number `yaml:"inputPrice,omitempty"`
	OutputPrice     *Number `yaml:"outputPrice,omitempty"`
	Currency        string  `yaml:"currency,omitempty"`
	MaxOutputTokens *Number `yaml:"maxOutputTokens,omitempty"`
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
	Model  string  `yaml:"model"`
	Weight *Number `yaml:"weight,omitempty"`
}

// TokenBudgetDoc bounds a project's model spend per day, week or month, in
// tokens or in money, and optionally each user's part of it.
type TokenBudgetDoc struct {
	Project       string  `yaml:"project"`
	Period        string  `yaml:"period"`
	Tokens        *Number `yaml:"tokens,omitempty"`
	Money         *Number `yaml:"money,omitempty"`
	PerUserTokens *Number `yaml:"perUserTokens,omitempty"`
	PerUserMoney  *Number `yaml:"perUserMoney,omitempty"`
}

// RateLimitDoc bounds requests and tokens per minute for each user, each
// project or each alias, or for the one named.
type RateLimitDoc struct {
	Scope             string  `yaml:"scope"`
	Name              string  `yaml:"name,omitempty"`
	RequestsPerMinute *Number `yaml:"requestsPerMinute,omitempty"`
	TokensPerMinute   *Number `yaml:"tokensPerMinute,omitempty"`
}

// GuardrailsDoc holds deny and allow patterns (Go regular expressions) and
// an optional guard alias.
type GuardrailsDoc struct {
	Deny       []string `yaml:"deny,omitempty"`
	Allow      []string `yaml:"allow,omitempty"`
	GuardAlias string   `yaml:"guardAlias,omitempty"`
}

// Number is a scalar from the file kept as written, so that "4.5 GPUs" can be
// refused with a message about whole GPUs rather than a type error, and so
// that sizes such as "2x8" and 0.125 share one field.
type Number string

// UnmarshalYAML accepts any scalar.
func (n *Number) UnmarshalYAML(unmarshal func(any) error) error {
	var v any
	if err := unmarshal(&v); err != nil {
		return err
	}
	switch x := v.(type) {
	case string:
		*n = Number(strings.TrimSpace(x))
	case int:
		*n = Number(strconv.Itoa(x))
	case int64:
		*n = Number(strconv.FormatInt(x, 10))
	case uint64:
		*n = Number(strconv.FormatUint(x, 10))
	case float64:
		*n = Number(strconv.FormatFloat(x, 'f', -1, 64))
	case bool:
		return numberError(unmarshal, fmt.Sprintf("expected a number, got %v", x))
	case nil:
		*n = ""
	default:
		return numberError(unmarshal, "expected a number, got a list or a map")
	}
	return nil
}

// numberError puts the line and column of the offending value in front of
// msg, the way the YAML decoder's own errors read, so that a person can
// find it in a large file.
func numberError(unmarshal func(any) error, msg string) error {
	var node ast.Node
	if err := unmarshal(&node); err == nil && node != nil {
		if tk := node.GetToken(); tk != nil && tk.Position != nil {
			return fmt.Errorf("[%d:%d] %s", tk.Position.Line, tk.Position.Column, msg)
		}
	}
	return errors.New(msg)
}

// MarshalYAML writes numbers as numbers and anything else as a string.
func (n Number) MarshalYAML() (any, error) {
	if i, err := strconv.ParseInt(string(n), 10, 64); err == nil {
		return i, nil
	}
	if f, err := strconv.ParseFloat(string(n), 64); err == nil && !strings.ContainsAny(string(n), "xX") {
		return f, nil
	}
	return string(n), nil
}

// NumberOf formats an integer as a Number.
func NumberOf(v int64) *Number { n := Number(strconv.FormatInt(v, 10)); return &n }

// NumberOfText wraps text as a Number.
func NumberOfText(s string) *Number { n := Number(s); return &n }

// Whole reads a whole number, saying what field was wrong and why.
func (n *Number) Whole(field string) (int64, error) {
	f, err := strconv.ParseFloat(string(*n), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("%s %q is not a number", field, string(*n))
	}
	if f != math.Trunc(f) {
		return 0, fmt.Errorf("%s must be a whole number (got %s)", field, string(*n))
	}
	if f < math.MinInt32 || f > math.MaxInt32 {
		return 0, fmt.Errorf("%s %s is out of range", field, string(*n))
	}
	return int64(f), nil
}

// MaxCount bounds whole counts such as tokens: far above any real budget,
// and exactly representable as a float64.
const MaxCount = 1_000_000_000_000_000

// Count reads a whole number up to MaxCount, such as a number of tokens.
func (n *Number) Count(field string) (int64, error) {
	f, err := strconv.ParseFloat(string(*n), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("%s %q is not a number", field, string(*n))
	}
	if f != math.Trunc(f) {
		return 0, fmt.Errorf("%s must be a whole number (got %s)", field, string(*n))
	}
	if f < -MaxCount || f > MaxCount {
		return 0, fmt.Errorf("%s %s is out of range (at most %d)", field, string(*n), int64(MaxCount))
	}
	return int64(f), nil
}

// Scaled reads a decimal number with at most places decimals, as an integer
// scaled by 10^places (milli for places 3, micro for places 6).
func (n *Number) Scaled(field string, places int) (int64, error) {
	f, err := strconv.ParseFloat(string(*n), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("%s %q is not a number", field, string(*n))
	}
	return ScaleDecimal(field, f, places)
}

// ScaleDecimal turns a decimal into an integer scaled by 10^places, refusing
// values with more decimals than places or too large to hold.
func ScaleDecimal(field string, f float64, places int) (int64, error) {
	scale := math.Pow10(places)
	if math.Abs(f) > 1e12 {
		return 0, fmt.Errorf("%s %v is out of range", field, f)
	}
	v := math.Round(f * scale)
	// The tolerance covers float64 representation error (about 1e-16
	// relative), not real decimals: 2.0000001 has 7.
	if math.Abs(v-f*scale) > 1e-9*math.Max(1, math.Abs(v)) {
		return 0, fmt.Errorf("%s %v has more than %d decimals", field, f, places)
	}
	return int64(v), nil
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
