package basis

import "fmt"

// Problem is one reason an estate is not valid, said so that a person knows
// what to change.
type Problem struct {
	// Object names what the problem is on, such as `pool "onprem-k8s"`.
	Object  string
	Message string
}

func (p Problem) String() string {
	if p.Object == "" {
		return p.Message
	}
	return p.Object + ": " + p.Message
}

// Problems collects problems in the order they are found. The readers and
// validators of estate and of its parts embed one, so that a problem is
// added, a name or a description checked and an optional value read the
// same way everywhere.
type Problems []Problem

// Add adds a problem on object.
func (ps *Problems) Add(object, format string, args ...any) {
	*ps = append(*ps, Problem{Object: object, Message: fmt.Sprintf(format, args...)})
}

// Name adds a problem on object when name is not a valid object name.
func (ps *Problems) Name(object, name string) {
	if err := CheckName(name); err != nil {
		ps.Add(object, "%v", err)
	}
}

// Once adds a problem on object when key is in seen already, and puts it
// there: for what must be unique among its kind.
func (ps *Problems) Once(seen map[string]bool, key, object, format string, args ...any) {
	if seen[key] {
		ps.Add(object, format, args...)
	}
	seen[key] = true
}

// Named checks what every named object of a kind shares, and returns what
// its problems are said to be on (`pool "onprem-k8s"`): a valid name,
// unique among the names of its kind in seen, and a valid description
// ("" for a kind without one).
func (ps *Problems) Named(seen map[string]bool, kind, name, description string) string {
	obj := fmt.Sprintf("%s %q", kind, name)
	ps.Name(obj, name)
	ps.Once(seen, name, obj, "another %s has the same name; names must be unique", kind)
	ps.Description(obj, description)
	return obj
}

// Description adds a problem on object when d is not a valid description.
func (ps *Problems) Description(object, d string) {
	if err := CheckDescription(d); err != nil {
		ps.Add(object, "%v", err)
	}
}

// Whole reads an optional whole number (Number.Whole) of field on object:
// def when it is absent, and a problem when it cannot be read.
func (ps *Problems) Whole(object, field string, n *Number, def int64) int64 {
	return ps.read(object, n, def, func() (int64, error) { return n.Whole(field) })
}

// Count reads an optional count (Number.Count) of field on object: def when
// it is absent, and a problem when it cannot be read.
func (ps *Problems) Count(object, field string, n *Number, def int64) int64 {
	return ps.read(object, n, def, func() (int64, error) { return n.Count(field) })
}

// Scaled reads an optional decimal (Number.Scaled) of field on object as an
// integer scaled by 10^places: def when it is absent, and a problem when it
// cannot be read.
func (ps *Problems) Scaled(object, field string, n *Number, places int, def int64) int64 {
	return ps.read(object, n, def, func() (int64, error) { return n.Scaled(field, places) })
}

func (ps *Problems) read(object string, n *Number, def int64, read func() (int64, error)) int64 {
	if n == nil || *n == "" {
		return def
	}
	v, err := read()
	if err != nil {
		ps.Add(object, "%v", err)
	}
	return v
}
