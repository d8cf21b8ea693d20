package estate

import (
	"fmt"
	"reflect"
	"strings"
	"unicode"

	"github.com/klique-ai/klique/internal/estate/appconf"
	"github.com/klique-ai/klique/internal/estate/llmconf"
)

// Action is what a change does to one object.
type Action string

const (
	Create Action = "create"
	Update Action = "update"
	Delete Action = "delete"
)

// Object kinds, as changes and audit entries name them. The gateway's
// objects have the kinds llmconf names (llmconf.KindModel, …).
const (
	KindGPUClass        = "gpu_class"
	KindPool            = "pool"
	KindProfile         = "profile"
	KindGroup           = "group"
	KindPolicy          = "resource_policy"
	KindComputeResource = "compute_resource"
	KindProject         = "project"
)

// Change is one object created, updated or deleted.
type Change struct {
	Action Action
	Kind   string
	ID     string
	// Name says which object in words: a name, or for policies and compute
	// resources the group they belong to.
	Name string
	// Fields lists what an update changed.
	Fields []string
	// Object is the object after the change (before it, for a delete).
	Object any
}

func (c Change) String() string {
	s := fmt.Sprintf("%s %s %s", c.Action, strings.ReplaceAll(c.Kind, "_", " "), c.Name)
	if len(c.Fields) > 0 {
		s += " (" + strings.Join(c.Fields, ", ") + ")"
	}
	return s
}

// Diff lists the changes that turn from into to, in an order that a store
// with foreign keys accepts: compute resources and projects that go are
// deleted first, then objects are created and updated with what they refer
// to before them, then the rest of the deletions, referrers first.
func Diff(from, to *Estate) []Change {
	var early, writes, late []Change
	d := func(kind string, old, cur []named, list *[]Change, deletes *[]Change) {
		oldByID := map[string]named{}
		for _, o := range old {
			oldByID[o.id] = o
		}
		curIDs := map[string]bool{}
		for _, c := range cur {
			curIDs[c.id] = true
			if o, ok := oldByID[c.id]; !ok {
				*list = append(*list, Change{Action: Create, Kind: kind, ID: c.id, Name: c.name, Object: c.obj})
			} else if fields := changedFields(o.obj, c.obj); len(fields) > 0 {
				*list = append(*list, Change{Action: Update, Kind: kind, ID: c.id, Name: c.name, Fields: fields, Object: c.obj})
			}
		}
		for _, o := range old {
			if !curIDs[o.id] {
				*deletes = append(*deletes, Change{Action: Delete, Kind: kind, ID: o.id, Name: o.name, Object: o.obj})
			}
		}
	}
	var lateByKind [8][]Change
	d(KindGPUClass, from.namedClasses(), to.namedClasses(), &writes, &lateByKind[7])
	// Departments before the groups that sit in them, and deleted after
	// them.
	d(KindDepartment, from.namedGroupsOfKind(true), to.namedGroupsOfKind(true), &writes, &lateByKind[6])
	d(KindGroup, from.namedGroupsOfKind(false), to.namedGroupsOfKind(false), &writes, &lateByKind[5])
	d(KindPool, from.namedPools(), to.namedPools(), &writes, &lateByKind[4])
	d(KindProfile, from.namedProfiles(), to.namedProfiles(), &writes, &lateByKind[3])
	d(KindPolicy, from.namedPolicies(), to.namedPolicies(), &writes, &lateByKind[2])
	d(KindComputeResource, from.namedComputeResources(), to.namedComputeResources(), &writes, &early)
	d(KindProject, from.namedProjects(), to.namedProjects(), &writes, &early)
	for _, l := range lateByKind {
		late = append(late, l...)
	}
	// Gateway objects are written as one document: their order does not
	// matter to the store.
	for _, kind := range llmconf.Kinds() {
		d(kind, namedKeyed(llmconf.Objects(&from.Gateway, kind)), namedKeyed(llmconf.Objects(&to.Gateway, kind)), &writes, &writes)
	}
	for _, kind := range appconf.Kinds() {
		d(kind, namedAppObjects(appconf.Objects(&from.Apps, kind)), namedAppObjects(appconf.Objects(&to.Apps, kind)), &writes, &writes)
	}
	out := append(early, writes...)
	return append(out, late...)
}

// namedKeyed names gateway objects by their key (they have no ids).
func namedKeyed(objects []llmconf.Keyed) []named {
	var out []named
	for _, o := range objects {
		out = append(out, named{o.Key, o.Key, o.Object})
	}
	return out
}

// namedAppObjects names catalogue objects by their key.
func namedAppObjects(objects []appconf.Keyed) []named {
	var out []named
	for _, o := range objects {
		out = append(out, named{o.Key, o.Key, o.Object})
	}
	return out
}

type named struct {
	id, name string
	obj      any
}

func (e *Estate) namedClasses() []named {
	var out []named
	for _, v := range e.GPUClasses {
		out = append(out, named{v.ID, v.Name, v})
	}
	return out
}

// namedGroupsOfKind names the departments, or the teams.
func (e *Estate) namedGroupsOfKind(departments bool) []named {
	var out []named
	for _, v := range e.Groups {
		if v.IsDepartment() == departments {
			out = append(out, named{v.ID, v.Name, v})
		}
	}
	return out
}

func (e *Estate) namedPools() []named {
	var out []named
	for _, v := range e.Pools {
		out = append(out, named{v.ID, v.Name, v})
	}
	return out
}

func (e *Estate) namedProfiles() []named {
	var out []named
	for _, v := range e.Profiles {
		out = append(out, named{v.ID, v.Name, v})
	}
	return out
}

func (e *Estate) namedPolicies() []named {
	var out []named
	for _, v := range e.Policies {
		out = append(out, named{v.ID, "of " + strings.Replace(e.GroupLabel(v.GroupID), `"`+e.GroupName(v.GroupID)+`"`, e.GroupName(v.GroupID), 1), v})
	}
	return out
}

func (e *Estate) namedComputeResources() []named {
	var out []named
	for _, v := range e.ComputeResources {
		out = append(out, named{v.ID, fmt.Sprintf("%q of group %s", v.Name, e.PolicyGroupName(v.PolicyID)), v})
	}
	return out
}

func (e *Estate) namedProjects() []named {
	var out []named
	for _, v := range e.Projects {
		out = append(out, named{v.ID, v.Name, v})
	}
	return out
}

// bookkeeping fields are not part of what an object says.
var bookkeeping = map[string]bool{"ID": true, "TenantID": true, "CreatedAt": true, "UpdatedAt": true}

// changedFields compares two objects of the same struct type field by field
// and names the fields that differ, in lowerCamel case. Empty and nil
// collections compare equal.
func changedFields(a, b any) []string {
	va, vb := reflect.ValueOf(a).Elem(), reflect.ValueOf(b).Elem()
	var out []string
	for i := 0; i < va.NumField(); i++ {
		f := va.Type().Field(i)
		if bookkeeping[f.Name] {
			continue
		}
		x, y := va.Field(i), vb.Field(i)
		if (x.Kind() == reflect.Map || x.Kind() == reflect.Slice) && x.Len() == 0 && y.Len() == 0 {
			continue
		}
		if !reflect.DeepEqual(x.Interface(), y.Interface()) {
			out = append(out, lowerFirst(f.Name))
		}
	}
	return out
}

func lowerFirst(s string) string {
	r := []rune(s)
	// Keep initialisms readable: GPUClassID -> gpuClassID.
	i := 0
	for i < len(r) && unicode.IsUpper(r[i]) && (i+1 == len(r) || unicode.IsUpper(r[i+1]) || i == 0) {
		r[i] = unicode.ToLower(r[i])
		i++
	}
	return string(r)
}
