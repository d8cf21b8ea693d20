package appconf

import (
	"fmt"
	"regexp"
	"slices"
	"sort"

	"github.com/klique-ai/klique/internal/estate/basis"
	"github.com/klique-ai/klique/internal/model"
)

// Bounds of an entry.
const (
	MaxApps            = 500
	MaxTemplateLength  = 8 << 10
	MaxArgs            = 200
	MaxDescription     = 1000
	MaxLimitMinutes    = 60 * 24 * 366
	MaxRunningQuota    = 1_000_000
	maxNameLength      = 63
	defaultGroupObject = "apps settings"
)

var appName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)

// Groups is what Validate needs of the estate.
type Groups interface {
	GroupByName(name string) *model.Group
}

// Validate checks a tenant's catalogue: each entry whole (see ValidateApp)
// and the launch rules.
func Validate(c *model.AppCatalogue, e Groups) []basis.Problem {
	var ps basis.Problems
	if len(c.Apps) > MaxApps {
		ps.Add("apps", "the catalogue has %d entries, more than %d; remove some", len(c.Apps), MaxApps)
	}
	seen := map[string]bool{}
	for _, a := range c.Apps {
		ps.Once(seen, a.Name, fmt.Sprintf("app %q", a.Name), "is described twice; keep one")
		for _, m := range ValidateApp(a) {
			ps.Add(fmt.Sprintf("app %q", a.Name), "%s", m)
		}
	}
	s := &c.Settings
	if s.Running < 0 || s.Running > MaxRunningQuota {
		ps.Add(defaultGroupObject, "running is %d; give a quota between 0 (none) and %d", s.Running, MaxRunningQuota)
	}
	if s.IdleWarningMinutes < 0 || s.IdleWarningMinutes > MaxLimitMinutes {
		ps.Add(defaultGroupObject, "idleWarningMinutes is %d; give 0 (the default, %d) to %d", s.IdleWarningMinutes, model.DefaultIdleWarningMinutes, MaxLimitMinutes)
	}
	groups := map[string]bool{}
	for _, g := range s.Groups {
		obj := fmt.Sprintf("apps quota of group %q", g.Group)
		ps.Once(groups, g.Group, obj, "is given twice; keep one")
		if e.GroupByName(g.Group) == nil {
			ps.Add(obj, "there is no group %q; name a group of the estate", g.Group)
		}
		if g.Running < 0 || g.Running > MaxRunningQuota {
			ps.Add(obj, "running is %d; give a quota between 0 (none) and %d", g.Running, MaxRunningQuota)
		}
	}
	return ps
}

// ValidateApp checks one entry and says what to change: its name and
// kind, its port, its launch form (a valid JSON Schema of an object), that
// its templates refer only to form fields and TemplateValues and put no
// launch value into a shell script unquoted (ShellProblems), and that its
// secret fields are form fields.
func ValidateApp(a *model.App) []string {
	var out []string
	if len(a.Name) > maxNameLength || !appName.MatchString(a.Name) {
		out = append(out, fmt.Sprintf("name %q: use 1 to %d lowercase letters, digits and dashes, starting and ending with a letter or digit", a.Name, maxNameLength))
	}
	if a.Kind != model.AppServing && a.Kind != model.AppSession {
		out = append(out, fmt.Sprintf("kind %q: use serving or session", a.Kind))
	}
	if len(a.Description) > MaxDescription {
		out = append(out, fmt.Sprintf("description: shorten it to %d characters", MaxDescription))
	}
	if a.Port < 1 || a.Port > 65535 {
		out = append(out, fmt.Sprintf("port %d: give the port the app listens on, 1 to 65535", a.Port))
	}
	if a.Run.Process == "" && a.Run.Image == "" && a.Run.Pod == "" && a.Run.Batch == "" {
		out = append(out, "run: say how the app runs in at least one runner mode (process, image, pod or batch)")
	}
	if len(a.Run.Args) > MaxArgs {
		out = append(out, fmt.Sprintf("run.args: give at most %d", MaxArgs))
	}
	if a.MaxLifetimeMinutes < 0 || a.MaxLifetimeMinutes > MaxLimitMinutes {
		out = append(out, fmt.Sprintf("maxLifetimeMinutes %d: give 0 (none) to %d", a.MaxLifetimeMinutes, MaxLimitMinutes))
	}
	if a.IdleMinutes < 0 || a.IdleMinutes > MaxLimitMinutes {
		out = append(out, fmt.Sprintf("idleMinutes %d: give 0 (none) to %d", a.IdleMinutes, MaxLimitMinutes))
	}
	f, err := CompileForm(a.Form)
	if err != nil {
		return append(out, "form: "+err.Error())
	}
	known := append(slices.Clone(f.Fields), TemplateValues...)
	fields := make([]string, 0, len(Templates(a)))
	for field := range Templates(a) {
		fields = append(fields, field)
	}
	sort.Strings(fields)
	for _, field := range fields {
		tmpl := Templates(a)[field]
		if len(tmpl) > MaxTemplateLength {
			out = append(out, fmt.Sprintf("%s: shorten it to %d characters", field, MaxTemplateLength))
		}
		for _, r := range References(tmpl) {
			if !slices.Contains(known, r) {
				out = append(out, fmt.Sprintf("%s refers to {%s}, which is neither a field of the launch form nor one of %v; add it to the form or fix the reference", field, r, TemplateValues))
			}
		}
	}
	out = append(out, ShellProblems(a)...)
	for _, s := range a.Secrets {
		if !slices.Contains(f.Fields, s) {
			out = append(out, fmt.Sprintf("secrets names %q, which is not a field of the launch form; add it to the form or remove it", s))
		}
	}
	return out
}
