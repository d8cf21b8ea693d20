package basis

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml/ast"
)

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
