package estate

import (
	"fmt"
	"net/netip"
	"regexp"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/klique-ai/klique/internal/estate/appconf"
	"github.com/klique-ai/klique/internal/estate/basis"
	"github.com/klique-ai/klique/internal/estate/llmconf"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/runenv"
)

// ValidationError lists every problem found, not only the first, so that a
// whole estate file can be fixed in one go.
type ValidationError struct {
	Problems []basis.Problem
}

func (e *ValidationError) Error() string {
	if len(e.Problems) == 1 {
		return e.Problems[0].String()
	}
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.String()
	}
	return fmt.Sprintf("%d problems: %s", len(parts), strings.Join(parts, "; "))
}

// Warning is something an admin should know about that does not make the
// estate invalid, such as reservations that add up to more than the capacity
// behind them.
type Warning struct {
	Code    string
	Object  string
	Message string
}

func (w Warning) String() string {
	if w.Object == "" {
		return w.Message
	}
	return w.Object + ": " + w.Message
}

// Bounds on values: far above any real estate, low enough to rule out typos
// and arithmetic overflow. Those every part of an estate shares (names,
// descriptions, prices) are field's.
const (
	MaxCapacityGPUs     = 1_000_000
	MaxGPUMemoryGB      = 10_000
	MaxTimeWeightMilli  = 1_000_000
	MaxBudgetMilliHours = 1_000_000_000_000
	MaxLabels           = 64
	// MaxAppNetworks bounds a pool's appNetworks.
	MaxAppNetworks = 64
	MaxImageLength = 1000
)

var (
	labelKeyRE  = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._/-]{0,62})$`)
	paramNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]{0,63}$`)
)

// CheckParameterName says what is wrong with a task parameter name used by a
// profile to read task sizes.
func CheckParameterName(name string) error {
	if !paramNameRE.MatchString(name) {
		return fmt.Errorf("parameter name %q must start with a letter or '_' and hold only letters, digits, '_', '.' and '-' (at most 64)", name)
	}
	return nil
}

type validator struct {
	e *Estate
	basis.Problems
}

// Validate checks the estate as a whole and returns a *ValidationError
// listing every problem, or nil.
func (e *Estate) Validate() error {
	v := &validator{e: e}
	v.gpuClasses()
	v.pools()
	v.profiles()
	v.groups()
	v.tree()
	v.policies()
	v.computeResources()
	v.projects()
	// The gateway's configuration is checked by its own rules, against
	// this estate's groups and projects.
	v.Problems = append(v.Problems, llmconf.Validate(&e.Gateway, e)...)
	v.Problems = append(v.Problems, appconf.Validate(&e.Apps, e)...)
	v.routeApps()
	if len(v.Problems) == 0 {
		return nil
	}
	return &ValidationError{Problems: v.Problems}
}

// routeApps checks that a static route naming an app names a serving app
// of the catalogue: its instances are the route's endpoints, so they must
// answer OpenAI's API.
func (v *validator) routeApps() {
	for _, r := range v.e.Gateway.Routes {
		if r.App == "" {
			continue
		}
		obj := fmt.Sprintf("route %q", r.Name)
		switch a := appconf.Lookup(&v.e.Apps, r.App); {
		case a == nil:
			v.Add(obj, "app %q is not in the app catalogue: name a serving app ('klique app ls' lists them), or add it under apps.catalogue", r.App)
		case a.Kind != model.AppServing:
			v.Add(obj, "app %q is a %s app: a route's instances must serve a model, so name a serving app such as vllm", r.App, a.Kind)
		}
	}
}

func (v *validator) gpuClasses() {
	seen := map[string]bool{}
	for _, c := range v.e.GPUClasses {
		obj := v.Named(seen, "GPU class", c.Name, c.Description)
		if c.MemoryGB < 0 || c.MemoryGB > MaxGPUMemoryGB {
			v.Add(obj, "memory %d GB must be between 0 and %d", c.MemoryGB, MaxGPUMemoryGB)
		}
		if c.PriceMicros < 0 || c.PriceMicros > basis.MaxPriceMicros {
			v.Add(obj, "price per GPU-hour must be 0 or more (and below %d)", basis.MaxPriceMicros/1_000_000)
		}
		if err := basis.CheckCurrency(c.Currency); err != nil {
			v.Add(obj, "%v", err)
		}
	}
}

func (v *validator) pools() {
	seen := map[string]bool{}
	for _, p := range v.e.Pools {
		obj := v.Named(seen, "pool", p.Name, p.Description)
		if !p.Kind.Valid() {
			v.Add(obj, "kind %q is not known: use one of %s", p.Kind, kindList())
		}
		if p.CapacityGPUs < 0 || p.CapacityGPUs > MaxCapacityGPUs {
			v.Add(obj, "capacity %d must be a whole number of GPUs between 0 and %d", p.CapacityGPUs, MaxCapacityGPUs)
		}
		if v.e.GPUClass(p.GPUClassID) == nil {
			v.Add(obj, "GPU class is missing or unknown: every pool needs the GPU class of its GPUs")
		}
		if p.GPUMemoryGB < 1 || p.GPUMemoryGB > MaxGPUMemoryGB {
			v.Add(obj, "GPU memory %d GB must be between 1 and %d (set it on the pool or on its GPU class)", p.GPUMemoryGB, MaxGPUMemoryGB)
		}
		if len(p.Region) > basis.MaxNameLength {
			v.Add(obj, "region is longer than %d characters", basis.MaxNameLength)
		}
		if p.ClaimTimeout != nil {
			if err := CheckClaimTimeout(*p.ClaimTimeout); err != nil {
				v.Add(obj, "%v", err)
			}
		}
		if len(p.OutputDestination) > 1000 || strings.ContainsFunc(p.OutputDestination, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) {
			v.Add(obj, "output destination must be a directory path or bucket URL without spaces, at most 1000 characters")
		}
		if p.SingleTenant && p.Kind != model.PoolBareMetal {
			v.Add(obj, "singleTenant applies to bare_metal pools, whose tasks share a host; a %s pool runs each task in a pod or job of its own: leave singleTenant out", p.Kind)
		}
		if len(p.AppNetworks) > MaxAppNetworks {
			v.Add(obj, "appNetworks lists %d networks; at most %d (give wider CIDRs)", len(p.AppNetworks), MaxAppNetworks)
		}
		for _, n := range p.AppNetworks {
			if pre, err := netip.ParsePrefix(n); err != nil {
				v.Add(obj, "appNetworks: %q is not a CIDR such as 10.20.0.0/16", n)
			} else if pre.Addr().IsLoopback() || pre.Addr().IsLinkLocalUnicast() || pre.Bits() == 0 {
				v.Add(obj, "appNetworks: %s would let app instances be reached at loopback, link-local or any address; declare the pool local: true instead (one machine only)", n)
			}
		}
		if len(p.Labels) > MaxLabels {
			v.Add(obj, "more than %d labels", MaxLabels)
		}
		for _, k := range sortedKeys(p.Labels) {
			if !labelKeyRE.MatchString(k) {
				v.Add(obj, "label key %q must be 1 to 63 letters, digits, '.', '_', '/' or '-', starting with a letter or digit", k)
			}
			if len(p.Labels[k]) > 256 {
				v.Add(obj, "label %q has a value longer than 256 characters", k)
			}
		}
	}
}

func (v *validator) profiles() {
	seen := map[string]bool{}
	for _, pr := range v.e.Profiles {
		obj := v.Named(seen, "profile", pr.Name, pr.Description)
		if _, err := model.NewSize(pr.Size.Nodes, pr.Size.PerNode); err != nil {
			v.Add(obj, "%v", err)
		}
		if pr.SizeParameter != "" {
			if err := CheckParameterName(pr.SizeParameter); err != nil {
				v.Add(obj, "size parameter: %v", err)
			}
		}
		if pr.GPUClassID != "" && pr.MinGPUMemoryGB > 0 {
			v.Add(obj, "give a GPU class or a minimum GPU memory, not both")
		}
		class := v.e.GPUClass(pr.GPUClassID)
		if pr.GPUClassID != "" && class == nil {
			v.Add(obj, "GPU class is unknown")
		}
		if pr.MinGPUMemoryGB < 0 || pr.MinGPUMemoryGB > MaxGPUMemoryGB {
			v.Add(obj, "minimum GPU memory %d GB must be between 0 and %d", pr.MinGPUMemoryGB, MaxGPUMemoryGB)
		}
		if pr.TimeWeightMilli < 0 || pr.TimeWeightMilli > MaxTimeWeightMilli {
			v.Add(obj, "time weight %s must be between 0 (exempt) and %d", milli(pr.TimeWeightMilli), MaxTimeWeightMilli/1000)
		}
		linked := map[string]bool{}
		for _, id := range pr.Pools {
			pool := v.e.Pool(id)
			if pool == nil {
				v.Add(obj, "links a pool that does not exist")
				continue
			}
			v.Once(linked, id, obj, "lists pool %q twice; each pool appears once in a profile's order", pool.Name)
			if class != nil && pool.GPUClassID != class.ID {
				v.Add(obj, "cannot use pool %q: its GPUs are %s, and the profile asks for %s", pool.Name, v.className(pool.GPUClassID), class.Name)
			}
			if pr.MinGPUMemoryGB > 0 && pool.GPUMemoryGB < pr.MinGPUMemoryGB {
				v.Add(obj, "cannot use pool %q: its GPUs have %d GB, and the profile needs at least %d GB", pool.Name, pool.GPUMemoryGB, pr.MinGPUMemoryGB)
			}
			if !pool.Kind.CanRun(pr.Size) {
				v.Add(obj, "cannot use pool %q: multi-node work (%s) needs a %s pool, and it is %s", pool.Name, pr.Size, model.MultiNodePoolKinds, pool.Kind)
			}
		}
	}
}

func (v *validator) className(id string) string {
	if c := v.e.GPUClass(id); c != nil {
		return c.Name
	}
	return "of no known class"
}

// groups checks names: teams and departments share one namespace (a
// policy, the gateway's rules and the CLI name either by name alone).
func (v *validator) groups() {
	seen := map[string]bool{}
	kinds := map[string]model.GroupKind{}
	for _, g := range v.e.Groups {
		if k, ok := kinds[g.Name]; ok && k != g.Kind {
			v.Add(fmt.Sprintf("department %q", g.Name), "the name is used by both a group and a department; a name names one node of the tree, so rename one of them")
			continue
		}
		kinds[g.Name] = g.Kind
		kind := "group"
		if g.IsDepartment() {
			kind = "department"
		}
		v.Named(seen, kind, g.Name, g.Description)
	}
}

func (v *validator) policies() {
	seen := map[string]bool{}
	for _, p := range v.e.Policies {
		g := v.e.Group(p.GroupID)
		if g == nil {
			v.Add("resource policy", "belongs to a group that does not exist")
			continue
		}
		obj := "resource policy of " + v.e.GroupLabel(g.ID)
		v.Once(seen, p.GroupID, obj, "the group already has a resource policy; a group has one policy")
		// 0 is the default weight (model.ResourcePolicy.Weight); the
		// estate file and the API refuse it when given.
		if p.Weight < 0 || p.Weight > MaxWeight {
			v.Add(obj, "weight %d must be between 1 and %d: it is the share of lent GPUs among siblings", p.Weight, MaxWeight)
		}
		if p.ReservationGPUs < 0 || p.ReservationGPUs > MaxCapacityGPUs {
			v.Add(obj, "reservation %d must be a whole number of GPUs, 0 or more", p.ReservationGPUs)
		}
		if p.LimitGPUs < 0 || p.LimitGPUs > MaxCapacityGPUs {
			v.Add(obj, "limit %d must be a whole number of GPUs, 0 or more", p.LimitGPUs)
		}
		// A limit of 0 pauses the group (docs/engine.md): its reservation
		// is kept, not filled, so that raising the limit again is the
		// whole of resuming it.
		if p.LimitGPUs > 0 && p.ReservationGPUs > p.LimitGPUs {
			v.Add(obj, "reservation %d GPUs is above the limit %d GPUs: raise the limit or lower the reservation", p.ReservationGPUs, p.LimitGPUs)
		}
		if b := p.Budget; b != nil {
			if b.MilliHours <= 0 || b.MilliHours > MaxBudgetMilliHours {
				v.Add(obj, "time budget of %s hours must be more than 0 (remove the budget instead of setting 0)", milli(b.MilliHours))
			}
			if !b.Period.Valid() {
				v.Add(obj, "time budget period %q must be day, week or month", b.Period)
			}
		}
		if p.LowWatermark < 0 || p.LowWatermark.Hours() > 24*31 {
			v.Add(obj, "low watermark %s must be between 0 and 31 days", p.LowWatermark)
		}
		if p.AlertThresholdPercent < 1 || p.AlertThresholdPercent > 100 {
			v.Add(obj, "alert threshold %d%% must be between 1 and 100", p.AlertThresholdPercent)
		}
	}
}

func (v *validator) computeResources() {
	names := map[string]bool{}
	pairs := map[string]bool{}
	for _, cr := range v.e.ComputeResources {
		pol := v.e.Policy(cr.PolicyID)
		pr := v.e.Profile(cr.ProfileID)
		group := "?"
		if pol != nil {
			group = v.e.GroupName(pol.GroupID)
		}
		obj := fmt.Sprintf("compute resource %q of group %q", cr.Name, group)
		v.Name(obj, cr.Name)
		v.Description(obj, cr.Description)
		v.runSettings(obj, group, cr)
		if pol == nil {
			v.Add(obj, "belongs to a resource policy that does not exist")
			continue
		}
		if d := v.e.Department(pol.GroupID); d != nil {
			v.Add(fmt.Sprintf("resource policy of department %q", d.Name), "a department has no compute resources of its own (it holds %q): connect profiles in the policies of its teams, and give the department a reservation and limit only", cr.Name)
			continue
		}
		if pr == nil {
			v.Add(obj, "uses a profile that does not exist")
			continue
		}
		v.Once(names, cr.PolicyID+"\x00"+cr.Name, obj, "the group has another compute resource with this name; names are unique within a group")
		v.Once(pairs, cr.PolicyID+"\x00"+cr.ProfileID, obj, "profile %q is already connected to this group's policy; a policy connects each profile once", pr.Name)
		// A limit of 0 pauses the group, whatever its profiles' sizes: its
		// work waits until the limit is raised (docs/engine.md).
		if pol.LimitGPUs > 0 && pr.Size.Total() > model.GPUs(pol.LimitGPUs) {
			v.Add(obj, "profile %q (%s GPUs) is larger than group %q's limit of %d GPUs: raise the limit or connect a smaller profile", pr.Name, pr.Size.Total(), group, pol.LimitGPUs)
		}
	}
}

// runSettings checks how a compute resource's tasks run: the image, the
// environment (named like task variables, no credentials) and the mounts.
func (v *validator) runSettings(obj, group string, cr *model.ComputeResource) {
	if len(cr.Image) > MaxImageLength || strings.ContainsFunc(cr.Image, func(r rune) bool {
		return unicode.IsSpace(r) || unicode.IsControl(r) || r == unicode.ReplacementChar
	}) {
		v.Add(obj, "image %q must be an image reference such as pytorch/pytorch:2.3.1-cuda12.1-cudnn8-runtime, without spaces, at most %d characters", cr.Image, MaxImageLength)
	}
	if len(cr.Env) > runenv.MaxVars {
		v.Add(obj, "env sets %d variables, more than %d", len(cr.Env), runenv.MaxVars)
	}
	for _, k := range sortedKeys(cr.Env) {
		val := cr.Env[k]
		switch {
		case !runenv.ValidName(k):
			v.Add(obj, "env: variable name %q must be letters, digits and '_', not starting with a digit (at most %d characters)", k, runenv.MaxNameLength)
		case len(val) > runenv.MaxValueLength:
			v.Add(obj, "env: the value of %s is longer than %d bytes", k, runenv.MaxValueLength)
		case !utf8.ValidString(val) || strings.ContainsRune(val, 0):
			v.Add(obj, "env: the value of %s holds invalid characters", k)
		case runenv.LooksLikeCredential(k, val):
			v.Add(obj, "env: %s looks like a credential; remove it and keep it in a vault instead ('klique secret set %s --group %s'), then name it in the tasks' secrets: variables are stored and shown as written", k, k, group)
		}
	}
	if len(cr.Mounts) > runenv.MaxMounts {
		v.Add(obj, "mounts lists %d mounts, more than %d", len(cr.Mounts), runenv.MaxMounts)
	}
	targets := map[string]bool{}
	for _, m := range cr.Mounts {
		if err := runenv.CheckMount(m); err != nil {
			v.Add(obj, "mounts: %v", err)
			continue
		}
		t := runenv.MountTarget(m)
		v.Once(targets, t, obj, "mounts: container path %s is mounted twice; mount each container path once", t)
	}
}

func (v *validator) projects() {
	seen := map[string]bool{}
	for _, p := range v.e.Projects {
		obj := v.Named(seen, "project", p.Name, p.Description)
		if p.GroupID != "" && v.e.Group(p.GroupID) == nil {
			v.Add(obj, "belongs to a group that does not exist")
		}
		if d := v.e.Department(p.GroupID); d != nil {
			v.Add(obj, "belongs to department %q; a project belongs to a team: name one of its teams", d.Name)
		}
		if len(p.OutputDestination) > 1000 || strings.ContainsFunc(p.OutputDestination, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) {
			v.Add(obj, "output destination must be a directory path or bucket URL without spaces, at most 1000 characters")
		}
	}
}

// Warnings returns what an admin should know about the estate, in a stable
// order.
func (e *Estate) Warnings() []Warning {
	var ws []Warning
	ws = append(ws, e.reservationWarnings()...)
	for _, pr := range e.Profiles {
		for _, id := range pr.Pools {
			if pool := e.Pool(id); pool != nil && model.GPUs(pool.CapacityGPUs) < pr.Size.Total() {
				ws = append(ws, Warning{Code: "PROFILE_LARGER_THAN_POOL", Object: fmt.Sprintf("profile %q", pr.Name),
					Message: fmt.Sprintf("its size %s is more than the %d GPUs declared for pool %q, so no task of that size can be placed there", pr.Size, pool.CapacityGPUs, pool.Name)})
			}
		}
	}
	for _, cr := range e.ComputeResources {
		if pr := e.Profile(cr.ProfileID); pr != nil && len(pr.Pools) == 0 {
			ws = append(ws, Warning{Code: "NO_POOL", Object: fmt.Sprintf("compute resource %q of group %q", cr.Name, e.PolicyGroupName(cr.PolicyID)),
				Message: fmt.Sprintf("profile %q lists no pool, so work sent here will wait", pr.Name)})
		}
	}
	return ws
}

// reservationWarnings checks that reservations fit the capacity behind them.
// For every pool it takes the groups with a reservation that can use the
// pool, and compares the sum of their reservations with the capacity of all
// the pools those groups can use. It also checks each group on its own. These
// are the cases where a guarantee cannot be met even with every borrowed GPU
// reclaimed.
func (e *Estate) reservationWarnings() []Warning {
	type groupInfo struct {
		name  string
		kind  string // "group" or "department"
		res   int
		pools []string
	}
	var groups []groupInfo
	// covered are nodes inside a department with a policy: that
	// department's reservation holds theirs, so a pool's sum counts it
	// and not them again.
	covered := map[string]bool{}
	for _, g := range e.Groups {
		pol := e.PolicyOfGroup(g.ID)
		if pol == nil || pol.ReservationGPUs == 0 {
			continue
		}
		kind := "group"
		if g.IsDepartment() {
			kind = "department"
		}
		groups = append(groups, groupInfo{name: g.Name, kind: kind, res: pol.ReservationGPUs, pools: e.PoolsOfGroup(g.ID)})
		for _, a := range e.Ancestors(g.ID) {
			if e.PolicyOfGroup(a.ID) != nil {
				covered[g.Name] = true
			}
		}
	}
	sort.Slice(groups, func(i, j int) bool { return groups[i].name < groups[j].name })

	capacityOf := func(poolIDs map[string]bool) int {
		total := 0
		for id := range poolIDs {
			if p := e.Pool(id); p != nil {
				total += p.CapacityGPUs
			}
		}
		return total
	}
	poolNames := func(poolIDs map[string]bool) string {
		var names []string
		for id := range poolIDs {
			if p := e.Pool(id); p != nil {
				names = append(names, p.Name)
			}
		}
		sort.Strings(names)
		if len(names) == 0 {
			return "no pool"
		}
		return strings.Join(names, ", ")
	}

	var ws []Warning
	seenSets := map[string]bool{}
	check := func(members []groupInfo, object string) {
		key := ""
		reserved := 0
		reach := map[string]bool{}
		var parts []string
		for _, g := range members {
			key += g.name + "\x00"
			reserved += g.res
			parts = append(parts, fmt.Sprintf("%s (%d)", g.name, g.res))
			for _, id := range g.pools {
				reach[id] = true
			}
		}
		if seenSets[key] {
			return
		}
		seenSets[key] = true
		if capacity := capacityOf(reach); reserved > capacity {
			what := fmt.Sprintf("the reservation of %s %s is %d GPUs", members[0].kind, members[0].name, reserved)
			if len(parts) > 1 {
				what = fmt.Sprintf("the reservations of groups %s add up to %d GPUs", strings.Join(parts, ", "), reserved)
			}
			ws = append(ws, Warning{Code: "RESERVATIONS_EXCEED_CAPACITY", Object: object,
				Message: fmt.Sprintf("%s, more than the %d GPUs declared in the pools behind them (%s); a guarantee cannot always be met",
					what, capacity, poolNames(reach))})
		}
	}
	for _, g := range groups {
		check([]groupInfo{g}, fmt.Sprintf("%s %q", g.kind, g.name))
	}
	for _, p := range e.Pools {
		var members []groupInfo
		for _, g := range groups {
			if contains(g.pools, p.ID) && !covered[g.name] {
				members = append(members, g)
			}
		}
		if len(members) > 1 {
			check(members, fmt.Sprintf("pool %q", p.Name))
		}
	}
	return ws
}

func kindList() string {
	var s []string
	for _, k := range model.PoolKinds {
		s = append(s, string(k))
	}
	return strings.Join(s, ", ")
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// milli formats thousandths as a decimal number.
func milli(v int64) string { return model.MilliGPU(v).String() }
