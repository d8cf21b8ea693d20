package sqlbase

import (
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"time"
)

// The converters below are what Col.Field returns for a field stored in
// another form than its own: each scans the stored form into the field
// (sql.Scanner) and gives the stored form of the field to a write
// (driver.Valuer).

// TimeCol stores a time as unix microseconds (Micros).
type TimeCol struct{ P *time.Time }

// Time is the converter of a time field.
func Time(p *time.Time) TimeCol { return TimeCol{p} }

func (c TimeCol) Value() (driver.Value, error) { return Micros(*c.P), nil }

// Scan reads a time; NULL is the zero time (a task not placed yet).
func (c TimeCol) Scan(src any) error {
	if src == nil {
		*c.P = time.Time{}
		return nil
	}
	v, err := asInt64(src)
	*c.P = FromMicros(v)
	return err
}

// TimePtrCol stores an optional time: nil is NULL.
type TimePtrCol struct{ P **time.Time }

// TimePtr is the converter of an optional time field.
func TimePtr(p **time.Time) TimePtrCol { return TimePtrCol{p} }

func (c TimePtrCol) Value() (driver.Value, error) { return NullMicros(*c.P), nil }

func (c TimePtrCol) Scan(src any) error {
	*c.P = nil
	if src == nil {
		return nil
	}
	v, err := asInt64(src)
	t := FromMicros(v)
	*c.P = &t
	return err
}

// RefCol stores an optional reference: "" is NULL (NullString), and NULL
// reads back as "".
type RefCol struct{ P *string }

// Ref is the converter of an optional reference.
func Ref(p *string) RefCol { return RefCol{p} }

func (c RefCol) Value() (driver.Value, error) { return NullString(*c.P), nil }

func (c RefCol) Scan(src any) error {
	*c.P = ""
	if src == nil {
		return nil
	}
	s, err := asString(src)
	*c.P = s
	return err
}

// StrCol stores a string type of the model (a status, a kind) as text.
type StrCol[S ~string] struct{ P *S }

// Str is the converter of a field of a string type.
func Str[S ~string](p *S) StrCol[S] { return StrCol[S]{p} }

func (c StrCol[S]) Value() (driver.Value, error) { return string(*c.P), nil }

func (c StrCol[S]) Scan(src any) error {
	s, err := asString(src)
	*c.P = S(s)
	return err
}

// IntCol stores an integer type of the model (MilliGPU) as a number.
type IntCol[I ~int64 | ~int] struct{ P *I }

// Int is the converter of a field of an integer type.
func Int[I ~int64 | ~int](p *I) IntCol[I] { return IntCol[I]{p} }

func (c IntCol[I]) Value() (driver.Value, error) { return int64(*c.P), nil }

func (c IntCol[I]) Scan(src any) error {
	v, err := asInt64(src)
	*c.P = I(v)
	return err
}

// IntPtrCol stores an optional number: nil is NULL.
type IntPtrCol struct{ P **int }

// IntPtr is the converter of an optional number.
func IntPtr(p **int) IntPtrCol { return IntPtrCol{p} }

// Value is the number as an int64, the one integer type a driver.Value
// may hold.
func (c IntPtrCol) Value() (driver.Value, error) {
	if *c.P == nil {
		return nil, nil
	}
	return int64(**c.P), nil
}

func (c IntPtrCol) Scan(src any) error {
	*c.P = nil
	if src == nil {
		return nil
	}
	v, err := asInt64(src)
	n := int(v)
	*c.P = &n
	return err
}

// FloatPtrCol stores an optional real number: nil is NULL.
type FloatPtrCol struct{ P **float64 }

// FloatPtr is the converter of an optional real number.
func FloatPtr(p **float64) FloatPtrCol { return FloatPtrCol{p} }

func (c FloatPtrCol) Value() (driver.Value, error) { return NullFloat(*c.P), nil }

func (c FloatPtrCol) Scan(src any) error {
	*c.P = nil
	switch v := src.(type) {
	case nil:
	case float64:
		*c.P = &v
	case int64:
		f := float64(v)
		*c.P = &f
	default:
		return fmt.Errorf("a real number stored as %T", src)
	}
	return nil
}

// BoolIntCol stores a flag as 0 or 1 in an integer column.
type BoolIntCol struct{ P *bool }

// BoolInt is the converter of a flag kept in an integer column.
func BoolInt(p *bool) BoolIntCol { return BoolIntCol{p} }

func (c BoolIntCol) Value() (driver.Value, error) {
	if *c.P {
		return int64(1), nil
	}
	return int64(0), nil
}

func (c BoolIntCol) Scan(src any) error {
	v, err := asInt64(src)
	*c.P = v != 0
	return err
}

// JSONCol stores a value as JSON text. Nil maps, slices and pointers are
// stored as Empty (MarshalJSON); Empty, "null" and "" read back as the zero
// value, so a list stored as "[]" reads back nil.
type JSONCol[V any] struct {
	P     *V
	Empty string
}

// JSON is the converter of a field stored as JSON, empty standing for its
// zero value.
func JSON[V any](p *V, empty string) JSONCol[V] { return JSONCol[V]{p, empty} }

func (c JSONCol[V]) Value() (driver.Value, error) {
	s, err := MarshalJSON(*c.P, c.Empty)
	if err != nil {
		return nil, fmt.Errorf("encode JSON: %w", err)
	}
	return s, nil
}

func (c JSONCol[V]) Scan(src any) error {
	var zero V
	*c.P = zero
	text, err := asString(src)
	if err != nil || text == "" || text == "null" || text == c.Empty {
		return err
	}
	if err := json.Unmarshal([]byte(text), c.P); err != nil {
		return fmt.Errorf("decode JSON: %w", err)
	}
	return nil
}

// ListCol stores a slice as a JSON array that reads back non-nil, empty
// when there is nothing, so callers range and append without nil checks
// and JSON APIs print [] rather than null.
type ListCol[E any] struct{ P *[]E }

// List is the converter of a slice field.
func List[E any](p *[]E) ListCol[E] { return ListCol[E]{p} }

func (c ListCol[E]) Value() (driver.Value, error) { return JSON(c.P, "[]").Value() }

func (c ListCol[E]) Scan(src any) error {
	if err := JSON(c.P, "").Scan(src); err != nil {
		return err
	}
	if *c.P == nil {
		*c.P = []E{}
	}
	return nil
}

// DictCol stores a map as a JSON object that reads back non-nil, as
// ListCol does a slice.
type DictCol[V any] struct{ P *map[string]V }

// Dict is the converter of a map field.
func Dict[V any](p *map[string]V) DictCol[V] { return DictCol[V]{p} }

func (c DictCol[V]) Value() (driver.Value, error) { return JSON(c.P, "{}").Value() }

func (c DictCol[V]) Scan(src any) error {
	if err := JSON(c.P, "").Scan(src); err != nil {
		return err
	}
	if *c.P == nil {
		*c.P = map[string]V{}
	}
	return nil
}

// DurationCol stores a duration as a whole number of Unit.
type DurationCol struct {
	P    *time.Duration
	Unit time.Duration
}

// Duration is the converter of a duration stored in units of unit.
func Duration(p *time.Duration, unit time.Duration) DurationCol { return DurationCol{p, unit} }

func (c DurationCol) Value() (driver.Value, error) { return int64(*c.P / c.Unit), nil }

func (c DurationCol) Scan(src any) error {
	v, err := asInt64(src)
	*c.P = time.Duration(v) * c.Unit
	return err
}

// DurationPtrCol stores an optional duration in units of Unit: nil is
// NULL.
type DurationPtrCol struct {
	P    **time.Duration
	Unit time.Duration
}

// DurationPtr is the converter of an optional duration.
func DurationPtr(p **time.Duration, unit time.Duration) DurationPtrCol {
	return DurationPtrCol{p, unit}
}

func (c DurationPtrCol) Value() (driver.Value, error) {
	if *c.P == nil {
		return nil, nil
	}
	return int64(**c.P / c.Unit), nil
}

func (c DurationPtrCol) Scan(src any) error {
	*c.P = nil
	if src == nil {
		return nil
	}
	v, err := asInt64(src)
	d := time.Duration(v) * c.Unit
	*c.P = &d
	return err
}

// asInt64 reads a stored integer.
func asInt64(src any) (int64, error) {
	switch v := src.(type) {
	case int64:
		return v, nil
	case int32:
		return int64(v), nil
	case bool:
		if v {
			return 1, nil
		}
		return 0, nil
	}
	return 0, fmt.Errorf("an integer stored as %T", src)
}

// asString reads stored text; NULL is "".
func asString(src any) (string, error) {
	switch v := src.(type) {
	case nil:
		return "", nil
	case string:
		return v, nil
	case []byte:
		return string(v), nil
	}
	return "", fmt.Errorf("text stored as %T", src)
}
