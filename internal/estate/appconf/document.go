package appconf

import (
	"encoding/json"
	"fmt"

	"github.com/klique-ai/klique/internal/estate/basis"
	"github.com/klique-ai/klique/internal/model"
)

// AppsDoc is the `apps:` section of an estate file: the tenant's own
// entries and overrides of built-ins, matched by name and described whole,
// and the launch rules, which replace the stored ones when present.
// Entries the file does not mention stay as they are.
type AppsDoc struct {
	// Launches is "enabled" or "disabled" (the tenant-wide switch).
	Launches string `yaml:"launches,omitempty"`
	// Running is the company's running-apps quota.
	Running *basis.Number `yaml:"running,omitempty"`
	// Groups are the per-group quotas.
	Groups []GroupQuotaDoc `yaml:"groups,omitempty"`
	// IdleWarningMinutes is how long before its idle limits stop an
	// instance it is warned (default 10).
	IdleWarningMinutes *basis.Number `yaml:"idleWarningMinutes,omitempty"`
	Entries            []AppDoc      `yaml:"catalogue,omitempty"`
}

// GroupQuotaDoc is a group's running-apps quota.
type GroupQuotaDoc struct {
	Group   string        `yaml:"group"`
	Running *basis.Number `yaml:"running"`
}

// AppDoc describes a catalogue entry. The form is written as YAML (or
// JSON) and stored as JSON.
type AppDoc struct {
	Name               string        `yaml:"name"`
	Description        string        `yaml:"description,omitempty"`
	Kind               string        `yaml:"kind"`
	Run                RunDoc        `yaml:"run"`
	Port               *basis.Number `yaml:"port"`
	HealthPath         string        `yaml:"healthPath,omitempty"`
	Form               any           `yaml:"form,omitempty"`
	Secrets            []string      `yaml:"secrets,omitempty"`
	MaxLifetimeMinutes *basis.Number `yaml:"maxLifetimeMinutes,omitempty"`
	IdleMinutes        *basis.Number `yaml:"idleMinutes,omitempty"`
	Locked             bool          `yaml:"locked,omitempty"`
}

// RunDoc is how an entry runs in each runner mode.
type RunDoc struct {
	Process string   `yaml:"process,omitempty"`
	Image   string   `yaml:"image,omitempty"`
	Args    []string `yaml:"args,omitempty"`
	Pod     string   `yaml:"pod,omitempty"`
	Batch   string   `yaml:"batch,omitempty"`
}

// Apply writes the section into a catalogue.
func (d *AppsDoc) Apply(c *model.AppCatalogue) []basis.Problem {
	var ps basis.Problems
	whole := func(obj, field string, n *basis.Number) int {
		if n == nil {
			return 0
		}
		v, err := n.Whole(field)
		if err != nil {
			ps.Add(obj, "%v", err)
		}
		return int(v)
	}
	if d.Launches != "" || d.Running != nil || d.Groups != nil || d.IdleWarningMinutes != nil {
		s := model.AppSettings{Running: whole("apps", "running", d.Running),
			IdleWarningMinutes: whole("apps", "idleWarningMinutes", d.IdleWarningMinutes)}
		switch d.Launches {
		case "", "enabled":
		case "disabled":
			s.LaunchesDisabled = true
		default:
			ps.Add("apps", "launches %q: write enabled or disabled", d.Launches)
		}
		for _, g := range d.Groups {
			s.Groups = append(s.Groups, &model.AppGroupQuota{Group: g.Group, Running: whole(fmt.Sprintf("apps quota of group %q", g.Group), "running", g.Running)})
		}
		c.Settings = s
	}
	for _, v := range d.Entries {
		obj := fmt.Sprintf("app %q", v.Name)
		a := &model.App{Name: v.Name, Description: v.Description, Kind: model.AppKind(v.Kind),
			Run:  model.AppRun{Process: v.Run.Process, Image: v.Run.Image, Args: v.Run.Args, Pod: v.Run.Pod, Batch: v.Run.Batch},
			Port: whole(obj, "port", v.Port), HealthPath: v.HealthPath, Secrets: v.Secrets, Locked: v.Locked,
			MaxLifetimeMinutes: whole(obj, "maxLifetimeMinutes", v.MaxLifetimeMinutes), IdleMinutes: whole(obj, "idleMinutes", v.IdleMinutes)}
		switch f := v.Form.(type) {
		case nil:
		case string:
			a.Form = f
		default:
			b, err := json.Marshal(jsonable(f))
			if err != nil {
				ps.Add(obj, "form: %v; write it as a JSON Schema object", err)
			}
			a.Form = string(b)
		}
		Put(c, a)
	}
	return ps
}

// jsonable turns what a YAML decoder made into values encoding/json
// accepts (maps with non-string keys become string-keyed).
func jsonable(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			out[k] = jsonable(e)
		}
		return out
	case map[any]any:
		out := map[string]any{}
		for k, e := range x {
			out[fmt.Sprint(k)] = jsonable(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = jsonable(e)
		}
		return out
	}
	return v
}

// Duplicates names entries and group quotas the section gives twice.
func (d *AppsDoc) Duplicates() []basis.Problem {
	var ps basis.Problems
	seen := map[string]bool{}
	for _, v := range d.Entries {
		ps.Once(seen, v.Name, fmt.Sprintf("app %q", v.Name), "is described twice in the file; keep one")
	}
	seen = map[string]bool{}
	for _, g := range d.Groups {
		ps.Once(seen, g.Group, fmt.Sprintf("apps quota of group %q", g.Group), "is given twice in the file; keep one")
	}
	return ps
}

// Export writes a catalogue as the section, nil when the tenant has
// nothing of its own. Forms are written as JSON text, which YAML reads back
// as the same string.
func Export(src *model.AppCatalogue) *AppsDoc {
	if Empty(src) {
		return nil
	}
	c := Clone(src)
	Normalize(&c)
	d := &AppsDoc{}
	if !settingsEmpty(&c.Settings) {
		d.Launches = "enabled"
		if c.Settings.LaunchesDisabled {
			d.Launches = "disabled"
		}
		d.Running = basis.NumberOf(int64(c.Settings.Running))
		if c.Settings.IdleWarningMinutes != 0 {
			d.IdleWarningMinutes = basis.NumberOf(int64(c.Settings.IdleWarningMinutes))
		}
		d.Groups = []GroupQuotaDoc{}
		for _, g := range c.Settings.Groups {
			d.Groups = append(d.Groups, GroupQuotaDoc{Group: g.Group, Running: basis.NumberOf(int64(g.Running))})
		}
	}
	for _, a := range c.Apps {
		v := AppDoc{Name: a.Name, Description: a.Description, Kind: string(a.Kind),
			Run:  RunDoc{Process: a.Run.Process, Image: a.Run.Image, Args: a.Run.Args, Pod: a.Run.Pod, Batch: a.Run.Batch},
			Port: basis.NumberOf(int64(a.Port)), HealthPath: a.HealthPath, Secrets: a.Secrets, Locked: a.Locked}
		if a.Form != "" {
			v.Form = a.Form
		}
		if a.MaxLifetimeMinutes != 0 {
			v.MaxLifetimeMinutes = basis.NumberOf(int64(a.MaxLifetimeMinutes))
		}
		if a.IdleMinutes != 0 {
			v.IdleMinutes = basis.NumberOf(int64(a.IdleMinutes))
		}
		d.Entries = append(d.Entries, v)
	}
	return d
}
