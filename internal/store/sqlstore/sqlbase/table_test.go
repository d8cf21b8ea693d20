package sqlbase

import (
	"database/sql/driver"
	"errors"
	"reflect"
	"testing"
	"time"
)

type thing struct {
	ID     string
	Ref    string
	At     time.Time
	Ended  *time.Time
	Tags   []string
	Labels map[string]string
	Kind   kind
}

type kind string

var things = Table[thing]{
	C("id", func(t *thing) any { return &t.ID }),
	C("ref", func(t *thing) any { return Ref(&t.Ref) }),
	C("at", func(t *thing) any { return Time(&t.At) }),
	C("ended", func(t *thing) any { return TimePtr(&t.Ended) }),
	C("tags", func(t *thing) any { return JSON(&t.Tags, "[]") }),
	C("labels", func(t *thing) any { return Dict(&t.Labels) }),
	C("kind", func(t *thing) any { return Str(&t.Kind) }),
}

// row is a stored row: Scan hands each destination its value as a driver
// would, through sql.Scanner for the converters.
type row []any

func (r row) Scan(dest ...any) error {
	if len(dest) != len(r) {
		return errors.New("column count")
	}
	for i, d := range dest {
		switch d := d.(type) {
		case *string:
			*d = r[i].(string)
		case interface{ Scan(any) error }:
			if err := d.Scan(r[i]); err != nil {
				return err
			}
		default:
			return errors.New("unexpected destination")
		}
	}
	return nil
}

func TestTableStatements(t *testing.T) {
	if got, want := things.List(), "id, ref, at, ended, tags, labels, kind"; got != want {
		t.Errorf("List() = %q, want %q", got, want)
	}
	if got, want := things.Only("kind", "id").As("x"), "x.kind, x.id"; got != want {
		t.Errorf("Only(kind, id).As(x) = %q, want %q", got, want)
	}
	if got, want := things.Without("ref", "at", "ended", "tags", "labels").Insert("things"),
		"INSERT INTO things (id, kind) VALUES (?, ?)"; got != want {
		t.Errorf("Insert = %q, want %q", got, want)
	}
	if got, want := things.Only("id", "kind").Assign(), "id = ?, kind = ?"; got != want {
		t.Errorf("Assign = %q, want %q", got, want)
	}
	defer func() {
		if recover() == nil {
			t.Error("Only of a column the table lacks did not panic")
		}
	}()
	things.Only("nope")
}

// values are the stored forms of v's columns, as the driver gets them.
func values(t *testing.T, v *thing) []any {
	t.Helper()
	args := things.Values(v, "more")
	for i, a := range args {
		if vr, ok := a.(driver.Valuer); ok {
			s, err := vr.Value()
			if err != nil {
				t.Fatal(err)
			}
			args[i] = s
		}
	}
	return args
}

func TestTableRoundTrip(t *testing.T) {
	at := time.UnixMicro(1_700_000_000_123_456).UTC()
	full := thing{ID: "a", Ref: "r", At: at, Ended: &at, Tags: []string{"x"}, Labels: map[string]string{"k": "v"}, Kind: "big"}
	stored := values(t, &full)
	want := []any{"a", "r", at.UnixMicro(), at.UnixMicro(), `["x"]`, `{"k":"v"}`, "big", "more"}
	if !reflect.DeepEqual(stored, want) {
		t.Errorf("Values = %#v, want %#v", stored, want)
	}
	got, err := things.Scan(row(stored[:len(things)]))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(*got, full) {
		t.Errorf("Scan = %+v, want %+v", *got, full)
	}

	// Empty values: a reference is NULL, a nil time NULL, nil lists and
	// maps their empty forms; read back, the list is nil again (JSON) and
	// the map empty but not nil (Dict).
	empty := thing{ID: "b", At: at}
	stored = values(t, &empty)
	want = []any{"b", nil, at.UnixMicro(), nil, "[]", "{}", "", "more"}
	if !reflect.DeepEqual(stored, want) {
		t.Errorf("Values = %#v, want %#v", stored, want)
	}
	got, err = things.Scan(row(stored[:len(things)]))
	if err != nil {
		t.Fatal(err)
	}
	empty.Labels = map[string]string{}
	if !reflect.DeepEqual(*got, empty) {
		t.Errorf("Scan = %+v, want %+v", *got, empty)
	}
}

func TestPlaceholders(t *testing.T) {
	for n, want := range map[int]string{1: "?", 3: "?, ?, ?"} {
		if got := Placeholders(n); got != want {
			t.Errorf("Placeholders(%d) = %q, want %q", n, got, want)
		}
	}
}
