// Package appconf is the app catalogue's part of the estate: the `apps:`
// section of an estate file, the built-in entries shipped with the product,
// the checks an entry passes before it is stored (its launch form is a
// valid JSON Schema, its templates name only known values), and the
// rendering of an entry's templates with a launch's values.
//
// Templates use a simple {name} substitution rather than text/template: an
// entry is written by an admin and run on the estate's GPUs, so it can do
// nothing but insert values, and every reference is checked when the entry
// is put. A name is a form field, or one of the values a launch always has
// (TemplateValues). Other braces (JSON, a shell's ${VAR}) are left as they
// are.
package appconf

import (
	"bytes"
	"encoding/json"
	"slices"

	"github.com/klique-ai/klique/internal/model"
)

// Object kinds, as changes and audit entries name them.
const (
	KindApp         = "app"
	KindAppSettings = "app_settings"
)

// Kinds are the kinds of the catalogue's objects.
func Kinds() []string { return []string{KindApp, KindAppSettings} }

// OwnsKind reports whether a kind of object belongs to the catalogue, which
// the store keeps as one document.
func OwnsKind(kind string) bool { return kind == KindApp || kind == KindAppSettings }

// Keyed is an object with the key a diff matches it by.
type Keyed struct {
	Key    string
	Object any
}

// Objects lists the catalogue's objects of a kind with their keys. The
// settings are one object, keyed "apps", present once they say anything.
func Objects(c *model.AppCatalogue, kind string) []Keyed {
	var out []Keyed
	switch kind {
	case KindApp:
		for _, a := range c.Apps {
			out = append(out, Keyed{a.Name, a})
		}
	case KindAppSettings:
		if !settingsEmpty(&c.Settings) {
			s := c.Settings
			out = append(out, Keyed{"apps", &s})
		}
	}
	return out
}

func settingsEmpty(s *model.AppSettings) bool {
	return !s.LaunchesDisabled && s.Running == 0 && len(s.Groups) == 0 && s.IdleWarningMinutes == 0
}

// Empty reports whether a tenant's catalogue says nothing of its own.
func Empty(c *model.AppCatalogue) bool { return len(c.Apps) == 0 && settingsEmpty(&c.Settings) }

// Clone copies a catalogue deeply enough that changing the copy's entries
// leaves the original alone.
func Clone(c *model.AppCatalogue) model.AppCatalogue {
	var out model.AppCatalogue
	for _, a := range c.Apps {
		x := *a
		x.Run.Args = slices.Clone(a.Run.Args)
		x.Secrets = slices.Clone(a.Secrets)
		out.Apps = append(out.Apps, &x)
	}
	out.Settings = c.Settings
	out.Settings.Groups = nil
	for _, g := range c.Settings.Groups {
		x := *g
		out.Settings.Groups = append(out.Settings.Groups, &x)
	}
	return out
}

// Normalize puts a catalogue in the form it is stored and compared in:
// entries and group quotas by name, forms as compact JSON with sorted keys,
// empty lists as nil.
func Normalize(c *model.AppCatalogue) {
	slices.SortFunc(c.Apps, func(a, b *model.App) int { return compare(a.Name, b.Name) })
	slices.SortFunc(c.Settings.Groups, func(a, b *model.AppGroupQuota) int { return compare(a.Group, b.Group) })
	if len(c.Settings.Groups) == 0 {
		c.Settings.Groups = nil
	}
	for _, a := range c.Apps {
		a.BuiltIn = false
		a.Form = CanonicalForm(a.Form)
		if len(a.Run.Args) == 0 {
			a.Run.Args = nil
		}
		if len(a.Secrets) == 0 {
			a.Secrets = nil
		}
	}
}

// CanonicalForm rewrites a form as compact JSON with sorted keys, so that
// the same schema written two ways is one value. Text that is not JSON is
// left for Validate to refuse.
func CanonicalForm(form string) string {
	if form == "" {
		return ""
	}
	var v any
	d := json.NewDecoder(bytes.NewReader([]byte(form)))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		return form
	}
	b, err := json.Marshal(v)
	if err != nil {
		return form
	}
	return string(b)
}

func compare(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Find returns the tenant's own entry named name, or nil.
func Find(c *model.AppCatalogue, name string) *model.App {
	for _, a := range c.Apps {
		if a.Name == name {
			return a
		}
	}
	return nil
}

// Put creates or replaces the tenant's entry with the same name.
func Put(c *model.AppCatalogue, a *model.App) {
	for i, x := range c.Apps {
		if x.Name == a.Name {
			c.Apps[i] = a
			return
		}
	}
	c.Apps = append(c.Apps, a)
}

// Remove deletes the tenant's entry named name, reporting whether it was
// there.
func Remove(c *model.AppCatalogue, name string) bool {
	n := len(c.Apps)
	c.Apps = slices.DeleteFunc(c.Apps, func(a *model.App) bool { return a.Name == name })
	return len(c.Apps) < n
}

// Catalogue is what a tenant's users see: the built-ins, each replaced by
// the tenant's entry of the same name when there is one, and the tenant's
// own entries, by name.
func Catalogue(c *model.AppCatalogue) []*model.App {
	var out []*model.App
	for _, b := range BuiltIns() {
		if Find(c, b.Name) == nil {
			out = append(out, b)
		}
	}
	for _, a := range c.Apps {
		x := *a
		if BuiltIn(a.Name) != nil {
			x.BuiltIn = true
		}
		out = append(out, &x)
	}
	slices.SortFunc(out, func(a, b *model.App) int { return compare(a.Name, b.Name) })
	return out
}

// Lookup returns the entry of the tenant's catalogue named name, or nil.
func Lookup(c *model.AppCatalogue, name string) *model.App {
	for _, a := range Catalogue(c) {
		if a.Name == name {
			return a
		}
	}
	return nil
}

// GroupQuota returns the running-apps quota of a group (0: none).
func GroupQuota(s *model.AppSettings, group string) int {
	for _, g := range s.Groups {
		if g.Group == group {
			return g.Running
		}
	}
	return 0
}

// RenameGroup follows a group's rename in the quotas.
func RenameGroup(c *model.AppCatalogue, from, to string) {
	for _, g := range c.Settings.Groups {
		if g.Group == from {
			g.Group = to
		}
	}
}
