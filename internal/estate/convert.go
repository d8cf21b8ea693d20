package estate

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/klique-ai/klique/internal/estate/appconf"
	"github.com/klique-ai/klique/internal/estate/basis"
	"github.com/klique-ai/klique/internal/estate/llmconf"
	"github.com/klique-ai/klique/internal/model"
)

// DefaultTimeWeightMilli is the time weight of a profile an estate file or
// an API call gives without one.
const DefaultTimeWeightMilli = 1000

// Apply returns a copy of cur with every object of the document created or
// updated, matched by name (policies by group, compute resources by policy
// and profile). newID makes ids for new objects; now stamps them. It returns
// a *ValidationError for names that do not resolve and values that cannot be
// read; the caller validates the result as a whole.
func (d *Document) Apply(cur *Estate, tenantID string, newID func() string, now time.Time) (*Estate, error) {
	a := &applier{e: cur.Clone(), tenant: tenantID, newID: newID, now: now}
	a.checkDuplicates(d)
	for i := range d.GPUClasses {
		a.gpuClass(&d.GPUClasses[i])
	}
	// Departments first, all of them before any parent is resolved, so
	// that a file may list a department before its parent; then the
	// groups that sit in them.
	for i := range d.Departments {
		a.department(&d.Departments[i])
	}
	for i := range d.Departments {
		a.departmentParent(&d.Departments[i])
	}
	for i := range d.Groups {
		a.group(&d.Groups[i])
	}
	for i := range d.Pools {
		a.pool(&d.Pools[i])
	}
	for i := range d.Profiles {
		a.profile(&d.Profiles[i])
	}
	for i := range d.Policies {
		a.policy(&d.Policies[i])
	}
	for i := range d.Projects {
		a.project(&d.Projects[i])
	}
	if d.Gateway != nil {
		a.Problems = append(a.Problems, d.Gateway.Apply(&a.e.Gateway)...)
	}
	if d.Apps != nil {
		a.Problems = append(a.Problems, d.Apps.Apply(&a.e.Apps)...)
	}
	// Orders refer to links and connections made above.
	for i := range d.Pools {
		a.executionPriority(&d.Pools[i])
	}
	for i := range d.Profiles {
		a.queuingPriority(&d.Profiles[i])
	}
	if len(a.Problems) > 0 {
		return nil, &ValidationError{Problems: a.Problems}
	}
	a.e.Normalize()
	return a.e, nil
}

type applier struct {
	e      *Estate
	tenant string
	newID  func() string
	now    time.Time
	basis.Problems
}

func (a *applier) checkDuplicates(d *Document) {
	a.Problems = slices.Concat(a.Problems,
		basis.DescribedTwice("GPU class", d.GPUClasses, func(v GPUClassDoc) string { return v.Name }),
		basis.DescribedTwice("pool", d.Pools, func(v PoolDoc) string { return v.Name }),
		basis.DescribedTwice("profile", d.Profiles, func(v ProfileDoc) string { return v.Name }),
		basis.DescribedTwice("department", d.Departments, func(v DepartmentDoc) string { return v.Name }),
		basis.DescribedTwice("group", d.Groups, func(v GroupDoc) string { return v.Name }),
		basis.DescribedTwice("resource policy of group", policiesOf(d.Policies, false), func(v PolicyDoc) string { return v.Group }),
		basis.DescribedTwice("resource policy of department", policiesOf(d.Policies, true), func(v PolicyDoc) string { return v.Department }),
		basis.DescribedTwice("project", d.Projects, func(v ProjectDoc) string { return v.Name }))
	if d.Gateway != nil {
		a.Problems = append(a.Problems, d.Gateway.Duplicates()...)
	}
	if d.Apps != nil {
		a.Problems = append(a.Problems, d.Apps.Duplicates()...)
	}
}

func (a *applier) gpuClass(d *GPUClassDoc) {
	obj := fmt.Sprintf("GPU class %q", d.Name)
	c := a.e.GPUClassByName(d.Name)
	if c == nil {
		c = &model.GPUClass{ID: a.newID(), TenantID: a.tenant, Name: d.Name, CreatedAt: a.now}
		a.e.GPUClasses = append(a.e.GPUClasses, c)
	}
	c.Description = d.Description
	c.MemoryGB = int(a.Whole(obj, "memoryGb", d.MemoryGB, 0))
	c.PriceMicros = a.Scaled(obj, "pricePerGpuHour", d.PricePerGPUHour, 6, 0)
	c.Currency = d.Currency
	if c.Currency == "" {
		c.Currency = basis.DefaultCurrency
	}
}

// policiesOf returns the policies a file gives to departments, or to
// groups.
func policiesOf(ps []PolicyDoc, departments bool) []PolicyDoc {
	var out []PolicyDoc
	for _, p := range ps {
		if (p.Department != "") == departments {
			out = append(out, p)
		}
	}
	return out
}

func (a *applier) group(d *GroupDoc) {
	obj := fmt.Sprintf("group %q", d.Name)
	g := a.e.GroupByName(d.Name)
	if g != nil && g.IsDepartment() {
		a.Add(obj, "the name is used by both a group and a department; a name names one node of the tree, so rename one of them")
		return
	}
	if g == nil {
		g = &model.Group{ID: a.newID(), TenantID: a.tenant, Name: d.Name, CreatedAt: a.now}
		a.e.Groups = append(a.e.Groups, g)
	}
	g.Description = d.Description
	g.ParentID = a.departmentID(obj, "department", d.Department)
}

// department creates or describes a department; departmentParent places
// it, once every department of the file exists.
func (a *applier) department(d *DepartmentDoc) {
	g := a.e.GroupByName(d.Name)
	if g != nil && !g.IsDepartment() {
		a.Add(fmt.Sprintf("department %q", d.Name), "the name is used by both a group and a department; a name names one node of the tree, so rename one of them")
		return
	}
	if g == nil {
		g = &model.Group{ID: a.newID(), TenantID: a.tenant, Name: d.Name, Kind: model.GroupDepartment, CreatedAt: a.now}
		a.e.Groups = append(a.e.Groups, g)
	}
	g.Description = d.Description
}

func (a *applier) departmentParent(d *DepartmentDoc) {
	g := a.e.DepartmentByName(d.Name)
	if g == nil {
		return
	}
	g.ParentID = a.departmentID(fmt.Sprintf("department %q", d.Name), "parent", d.Parent)
}

// departmentID resolves the department a field names ("" for none).
func (a *applier) departmentID(obj, field, name string) string {
	if name == "" {
		return ""
	}
	switch g := a.e.GroupByName(name); {
	case g == nil:
		a.Add(obj, "%s %q is not a known department; add it under departments", field, name)
	case !g.IsDepartment():
		a.Add(obj, "%s %q is a group; a group sits in a department, so name a department (add it under departments)", field, name)
	default:
		return g.ID
	}
	return ""
}

func (a *applier) pool(d *PoolDoc) {
	obj := fmt.Sprintf("pool %q", d.Name)
	p := a.e.PoolByName(d.Name)
	if p == nil {
		p = &model.Pool{ID: a.newID(), TenantID: a.tenant, Name: d.Name, CreatedAt: a.now}
		a.e.Pools = append(a.e.Pools, p)
	}
	p.Description = d.Description
	p.Kind = model.PoolKind(d.Kind)
	if d.Kind == "" {
		a.Add(obj, "kind is required: one of %s", kindList())
	}
	if d.Capacity == nil {
		a.Add(obj, "capacity is required: the number of whole GPUs the pool declares")
	}
	p.CapacityGPUs = int(a.Whole(obj, "capacity", d.Capacity, 0))
	p.GPUClassID = ""
	class := a.e.GPUClassByName(d.GPUClass)
	switch {
	case d.GPUClass == "":
		a.Add(obj, "gpuClass is required")
	case class == nil:
		a.Add(obj, "gpuClass %q is not a known GPU class; add it under gpuClasses", d.GPUClass)
	default:
		p.GPUClassID = class.ID
	}
	def := int64(0)
	if class != nil {
		def = int64(class.MemoryGB)
	}
	p.GPUMemoryGB = int(a.Whole(obj, "gpuMemoryGb", d.GPUMemoryGB, def))
	p.Region = d.Region
	p.Labels = cloneMap(d.Labels)
	p.OutputDestination = d.OutputDestination
	p.SingleTenant = d.SingleTenant
	p.AppNetworks = nil
	for _, n := range d.AppNetworks {
		pre, err := netip.ParsePrefix(strings.TrimSpace(n))
		if err != nil {
			a.Add(obj, "appNetworks: %q is not a CIDR such as 10.20.0.0/16 or fd00:1::/64", n)
			continue
		}
		p.AppNetworks = append(p.AppNetworks, pre.Masked().String())
	}
	p.Local = d.Local
	p.ClaimTimeout = nil
	if d.ClaimTimeout != "" {
		t, err := ParseClaimTimeout(d.ClaimTimeout)
		if err != nil {
			a.Add(obj, "%v", err)
		} else {
			p.ClaimTimeout = &t
		}
	}
}

func (a *applier) profile(d *ProfileDoc) {
	obj := fmt.Sprintf("profile %q", d.Name)
	pr := a.e.ProfileByName(d.Name)
	if pr == nil {
		pr = &model.Profile{ID: a.newID(), TenantID: a.tenant, Name: d.Name, CreatedAt: a.now}
		a.e.Profiles = append(a.e.Profiles, pr)
	}
	pr.Description = d.Description
	pr.SizeParameter = ""
	switch {
	case d.Size != nil && d.SizeFromParameter != nil:
		a.Add(obj, "give size or sizeFromParameter, not both")
	case d.Size != nil:
		pr.Size = a.size(obj, "size", d.Size)
	case d.SizeFromParameter != nil:
		pr.SizeParameter = d.SizeFromParameter.Parameter
		if pr.SizeParameter == "" {
			a.Add(obj, "sizeFromParameter needs the parameter name")
		}
		if d.SizeFromParameter.Default == nil {
			a.Add(obj, "sizeFromParameter needs a default size for tasks that do not set the parameter")
		} else {
			pr.Size = a.size(obj, "sizeFromParameter.default", d.SizeFromParameter.Default)
		}
	default:
		a.Add(obj, "size is required: a fraction (0.125, 0.25, 0.5), whole GPUs (1, 8) or nodes x GPUs per node (2x8)")
	}
	pr.GPUClassID = ""
	if d.GPUClass != "" {
		if c := a.e.GPUClassByName(d.GPUClass); c != nil {
			pr.GPUClassID = c.ID
		} else {
			a.Add(obj, "gpuClass %q is not a known GPU class", d.GPUClass)
		}
	}
	pr.MinGPUMemoryGB = int(a.Whole(obj, "minGpuMemoryGb", d.MinGPUMemoryGB, 0))
	pr.TimeWeightMilli = a.Scaled(obj, "timeWeight", d.TimeWeight, 3, DefaultTimeWeightMilli)
	pr.Pools = nil
	for _, name := range d.Pools {
		if p := a.e.PoolByName(name); p != nil {
			pr.Pools = append(pr.Pools, p.ID)
		} else {
			a.Add(obj, "pool %q is not a known pool; add it under pools", name)
		}
	}
}

func (a *applier) size(obj, field string, n *basis.Number) model.Size {
	s, err := model.ParseSize(string(*n))
	if err != nil {
		a.Add(obj, "%s: %v", field, err)
	}
	return s
}

func (a *applier) policy(d *PolicyDoc) {
	obj := fmt.Sprintf("resource policy of group %q", d.Group)
	var g *model.Group
	switch {
	case d.Group != "" && d.Department != "":
		a.Add(obj, "names group %q and department %q; a policy is one group's or one department's, so name one", d.Group, d.Department)
		return
	case d.Department != "":
		obj = fmt.Sprintf("resource policy of department %q", d.Department)
		if g = a.e.GroupByName(d.Department); g == nil || !g.IsDepartment() {
			a.Add(obj, "department %q is not a known department; add it under departments (or write group: for a group's policy)", d.Department)
			return
		}
		if len(d.ComputeResources) > 0 {
			a.Add(obj, "a department has no compute resources of its own: move computeResources to the policies of its groups, and give the department a reservation and limit only")
		}
	case d.Group == "":
		a.Add("resource policy", "names no group: give group: (or department:) and the name")
		return
	default:
		if g = a.e.GroupByName(d.Group); g == nil {
			a.Add(obj, "group %q is not a known group; add it under groups", d.Group)
			return
		}
		if g.IsDepartment() {
			a.Add(obj, "%q is a department: write department: %q for its policy", d.Group, d.Group)
			return
		}
	}
	pol := a.e.PolicyOfGroup(g.ID)
	if pol == nil {
		pol = &model.ResourcePolicy{ID: a.newID(), TenantID: a.tenant, GroupID: g.ID, CreatedAt: a.now}
		a.e.Policies = append(a.e.Policies, pol)
	}
	pol.ReservationGPUs = int(a.Whole(obj, "reservation", d.Reservation, 0))
	if d.Limit == nil {
		a.Add(obj, "limit is required: the most GPUs the group may hold at once")
	}
	pol.LimitGPUs = int(a.Whole(obj, "limit", d.Limit, 0))
	pol.Budget = nil
	if b := d.TimeBudget; b != nil {
		if b.Hours == nil {
			a.Add(obj, "timeBudget needs hours")
		}
		pol.Budget = &model.TimeBudget{MilliHours: a.Scaled(obj, "timeBudget.hours", b.Hours, 3, 0), Period: model.BudgetPeriod(strings.ToLower(b.Period))}
	}
	pol.LowWatermark = time.Duration(a.Whole(obj, "lowWatermarkMinutes", d.LowWatermarkMinutes, int64(model.DefaultLowWatermark/time.Minute))) * time.Minute
	pol.AlertThresholdPercent = int(a.Whole(obj, "alertThresholdPercent", d.AlertThresholdPercent, model.DefaultAlertThresholdPercent))
	// A weight of 0 is refused rather than read as "never lend to it": a
	// limit says that more plainly, and 0 already means "exempt" for a
	// profile's time weight.
	pol.Weight = int(a.Whole(obj, "weight", d.Weight, 0))
	if d.Weight != nil && *d.Weight != "" && pol.Weight < 1 {
		a.Add(obj, "weight %d must be 1 or more: it is the share of lent GPUs among siblings (leave it out for 1; to hold a group back, lower its limit)", pol.Weight)
	}

	keep := map[string]bool{}
	for _, cd := range d.ComputeResources {
		pr := a.e.ProfileByName(cd.Profile)
		if pr == nil {
			a.Add(obj, "compute resource %q: profile %q is not a known profile", cd.Name, cd.Profile)
			continue
		}
		cr := a.e.ComputeResourceOf(pol.ID, pr.ID)
		if cr == nil {
			cr = &model.ComputeResource{ID: a.newID(), TenantID: a.tenant, PolicyID: pol.ID, ProfileID: pr.ID, CreatedAt: a.now}
			a.e.ComputeResources = append(a.e.ComputeResources, cr)
		}
		cr.Name = cd.Name
		if cr.Name == "" {
			cr.Name = pr.Name
		}
		cr.Description = cd.Description
		cr.Image = cd.Image
		cr.Env = cloneMap(cd.Env)
		cr.Mounts = append([]string(nil), cd.Mounts...)
		keep[cr.ID] = true
	}
	// The file describes the policy whole: connections it leaves out go.
	crs := a.e.ComputeResources[:0]
	for _, cr := range a.e.ComputeResources {
		if cr.PolicyID != pol.ID || keep[cr.ID] {
			crs = append(crs, cr)
		}
	}
	a.e.ComputeResources = crs
}

func (a *applier) project(d *ProjectDoc) {
	obj := fmt.Sprintf("project %q", d.Name)
	p := a.e.ProjectByName(d.Name)
	if p == nil {
		p = &model.Project{ID: a.newID(), TenantID: a.tenant, Name: d.Name, CreatedAt: a.now}
		a.e.Projects = append(a.e.Projects, p)
	}
	p.Description = d.Description
	p.OutputDestination = d.OutputDestination
	p.GroupID = ""
	if d.Group != "" {
		if g := a.e.GroupByName(d.Group); g != nil {
			p.GroupID = g.ID
		} else {
			a.Add(obj, "group %q is not a known group", d.Group)
		}
	}
}

func (a *applier) executionPriority(d *PoolDoc) {
	p := a.e.PoolByName(d.Name)
	if p == nil {
		return
	}
	order, problems := ResolveExecutionPriority(a.e, p, d.ExecutionPriority)
	for _, msg := range problems {
		a.Add(fmt.Sprintf("pool %q", d.Name), "executionPriority: %s", msg)
	}
	p.ProfileOrder = order
}

func (a *applier) queuingPriority(d *ProfileDoc) {
	pr := a.e.ProfileByName(d.Name)
	if pr == nil {
		return
	}
	order, problems := ResolveQueuingPriority(a.e, pr, d.QueuingPriority)
	for _, msg := range problems {
		a.Add(fmt.Sprintf("profile %q", d.Name), "queuingPriority: %s", msg)
	}
	pr.QueuingOrder = order
}

// ResolveExecutionPriority turns profile names into a pool's ProfileOrder.
// Every name must be a profile linked to the pool, listed once.
func ResolveExecutionPriority(e *Estate, pool *model.Pool, names []string) ([]string, []string) {
	var order, problems []string
	for _, name := range names {
		pr := e.ProfileByName(name)
		switch {
		case pr == nil:
			problems = append(problems, fmt.Sprintf("profile %q is not a known profile", name))
		case !contains(pr.Pools, pool.ID):
			problems = append(problems, fmt.Sprintf("profile %q does not list pool %q; add the pool to the profile's pools first", name, pool.Name))
		case contains(order, pr.ID):
			problems = append(problems, fmt.Sprintf("profile %q is listed twice", name))
		default:
			order = append(order, pr.ID)
		}
	}
	return order, problems
}

// ResolveQueuingPriority turns group names into a profile's QueuingOrder.
// Every name must be a group whose policy is connected to the profile.
func ResolveQueuingPriority(e *Estate, pr *model.Profile, groups []string) ([]string, []string) {
	var order, problems []string
	for _, name := range groups {
		g := e.GroupByName(name)
		var pol *model.ResourcePolicy
		if g != nil {
			pol = e.PolicyOfGroup(g.ID)
		}
		switch {
		case g == nil:
			problems = append(problems, fmt.Sprintf("group %q is not a known group", name))
		case pol == nil || e.ComputeResourceOf(pol.ID, pr.ID) == nil:
			problems = append(problems, fmt.Sprintf("group %q has no compute resource on profile %q; connect the profile to its policy first", name, pr.Name))
		case contains(order, pol.ID):
			problems = append(problems, fmt.Sprintf("group %q is listed twice", name))
		default:
			order = append(order, pol.ID)
		}
	}
	return order, problems
}

// Export describes the estate as a document that Apply turns back into the
// same estate.
func (e *Estate) Export() *Document {
	d := &Document{APIVersion: APIVersion, Kind: Kind}
	classes := append([]*model.GPUClass(nil), e.GPUClasses...)
	sort.Slice(classes, func(i, j int) bool { return classes[i].Name < classes[j].Name })
	for _, c := range classes {
		d.GPUClasses = append(d.GPUClasses, GPUClassDoc{
			Name: c.Name, Description: c.Description, MemoryGB: optWhole(int64(c.MemoryGB)),
			PricePerGPUHour: basis.NumberOfText(strconv.FormatFloat(float64(c.PriceMicros)/1e6, 'f', -1, 64)), Currency: c.Currency,
		})
	}
	pools := append([]*model.Pool(nil), e.Pools...)
	sort.Slice(pools, func(i, j int) bool { return pools[i].Name < pools[j].Name })
	for _, p := range pools {
		pd := PoolDoc{Name: p.Name, Description: p.Description, Kind: string(p.Kind), Capacity: basis.NumberOf(int64(p.CapacityGPUs)),
			GPUMemoryGB: basis.NumberOf(int64(p.GPUMemoryGB)), Region: p.Region, Labels: cloneMap(p.Labels)}
		if c := e.GPUClass(p.GPUClassID); c != nil {
			pd.GPUClass = c.Name
		}
		for _, id := range p.ProfileOrder {
			if pr := e.Profile(id); pr != nil {
				pd.ExecutionPriority = append(pd.ExecutionPriority, pr.Name)
			}
		}
		if len(pd.Labels) == 0 {
			pd.Labels = nil
		}
		if p.ClaimTimeout != nil {
			pd.ClaimTimeout = FormatClaimTimeout(*p.ClaimTimeout)
		}
		pd.OutputDestination = p.OutputDestination
		pd.SingleTenant = p.SingleTenant
		pd.AppNetworks = slices.Clone(p.AppNetworks)
		pd.Local = p.Local
		d.Pools = append(d.Pools, pd)
	}
	profiles := append([]*model.Profile(nil), e.Profiles...)
	sort.Slice(profiles, func(i, j int) bool { return profiles[i].Name < profiles[j].Name })
	for _, pr := range profiles {
		pd := ProfileDoc{Name: pr.Name, Description: pr.Description, MinGPUMemoryGB: optWhole(int64(pr.MinGPUMemoryGB)),
			TimeWeight: basis.NumberOfText(milli(pr.TimeWeightMilli))}
		size := basis.NumberOfText(pr.Size.String())
		if pr.SizeParameter != "" {
			pd.SizeFromParameter = &SizeParamDoc{Parameter: pr.SizeParameter, Default: size}
		} else {
			pd.Size = size
		}
		if c := e.GPUClass(pr.GPUClassID); c != nil {
			pd.GPUClass = c.Name
		}
		for _, id := range pr.Pools {
			if p := e.Pool(id); p != nil {
				pd.Pools = append(pd.Pools, p.Name)
			}
		}
		for _, id := range pr.QueuingOrder {
			if pol := e.Policy(id); pol != nil {
				pd.QueuingPriority = append(pd.QueuingPriority, e.GroupName(pol.GroupID))
			}
		}
		d.Profiles = append(d.Profiles, pd)
	}
	groups := append([]*model.Group(nil), e.Groups...)
	sort.Slice(groups, func(i, j int) bool { return groups[i].Name < groups[j].Name })
	parentName := func(g *model.Group) string {
		if p := e.Group(g.ParentID); p != nil {
			return p.Name
		}
		return ""
	}
	for _, g := range groups {
		if g.IsDepartment() {
			d.Departments = append(d.Departments, DepartmentDoc{Name: g.Name, Parent: parentName(g), Description: g.Description})
		} else {
			d.Groups = append(d.Groups, GroupDoc{Name: g.Name, Description: g.Description, Department: parentName(g)})
		}
	}
	for _, g := range groups {
		if pol := e.PolicyOfGroup(g.ID); pol != nil {
			d.Policies = append(d.Policies, e.exportPolicy(g, pol))
		}
	}
	projects := append([]*model.Project(nil), e.Projects...)
	sort.Slice(projects, func(i, j int) bool { return projects[i].Name < projects[j].Name })
	for _, p := range projects {
		pd := ProjectDoc{Name: p.Name, Description: p.Description, OutputDestination: p.OutputDestination}
		if g := e.Group(p.GroupID); g != nil {
			pd.Group = g.Name
		}
		d.Projects = append(d.Projects, pd)
	}
	d.Gateway = llmconf.Export(&e.Gateway)
	d.Apps = appconf.Export(&e.Apps)
	return d
}

// exportPolicy writes the policy of g (a group or a department) with its
// compute resources.
func (e *Estate) exportPolicy(g *model.Group, pol *model.ResourcePolicy) PolicyDoc {
	pd := PolicyDoc{Group: g.Name, Reservation: basis.NumberOf(int64(pol.ReservationGPUs)), Limit: basis.NumberOf(int64(pol.LimitGPUs)),
		LowWatermarkMinutes:   basis.NumberOf(int64(pol.LowWatermark / time.Minute)),
		AlertThresholdPercent: basis.NumberOf(int64(pol.AlertThresholdPercent))}
	if g.IsDepartment() {
		pd.Group, pd.Department = "", g.Name
	}
	// The default weight is left out, so that a file that never
	// wrote one exports as it was.
	if pol.EffectiveWeight() != model.DefaultWeight {
		pd.Weight = basis.NumberOf(int64(pol.Weight))
	}
	if b := pol.Budget; b != nil {
		pd.TimeBudget = &BudgetDoc{Hours: basis.NumberOfText(milli(b.MilliHours)), Period: string(b.Period)}
	}
	for _, cr := range e.ComputeResourcesOfPolicy(pol.ID) {
		cd := ComputeResourceDoc{Name: cr.Name, Description: cr.Description, Image: cr.Image}
		if pr := e.Profile(cr.ProfileID); pr != nil {
			cd.Profile = pr.Name
		}
		if len(cr.Env) > 0 {
			cd.Env = cloneMap(cr.Env)
		}
		if len(cr.Mounts) > 0 {
			cd.Mounts = append([]string(nil), cr.Mounts...)
		}
		pd.ComputeResources = append(pd.ComputeResources, cd)
	}
	return pd
}

func optWhole(v int64) *basis.Number {
	if v == 0 {
		return nil
	}
	return basis.NumberOf(v)
}
