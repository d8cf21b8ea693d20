package basis_test

import (
	"strings"
	"testing"

	"github.com/klique-ai/klique/internal/estate/basis"
)

func TestCheckName(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
	}{
		{"a name with inner spaces is fine", "multi-node training", ""},
		{"a name of exactly the limit is fine", strings.Repeat("n", basis.MaxNameLength), ""},
		{"a unicode name is fine", "équipe vision", ""},
		{"an empty name is refused", "", "name is empty"},
		{"a name with a leading space is refused", " x", "starts or ends with a space"},
		{"a name with a newline is refused", "a\nb", "control or invalid character"},
		{"a name with a replacement character is refused", "a\uFFFDb", "control or invalid character"},
		{"a name one over the limit is refused", strings.Repeat("n", basis.MaxNameLength+1), "longer than 100"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := basis.CheckName(tc.in)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("CheckName(%q) = %v, want nil", tc.in, err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("CheckName(%q) = %v, want an error holding %q", tc.in, err, tc.want)
			}
		})
	}
}

func TestScaleDecimal(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		f      float64
		places int
		want   int64
		err    string
	}{
		{"a price with six decimals is scaled exactly", 2.400001, 6, 2_400_001, ""},
		{"a time weight of an eighth is 125 thousandths", 0.125, 3, 125, ""},
		{"a tenth survives float representation", 0.1, 3, 100, ""},
		{"a large budget is scaled exactly", 1_000_000.5, 3, 1_000_000_500, ""},
		{"a negative value keeps its sign", -1.5, 3, -1500, ""},
		{"a seventh decimal on a price is refused", 2.0000001, 6, 0, "price 2.0000001 has more than 6 decimals"},
		{"a fourth decimal on a large weight is refused", 1000.0004, 3, 0, "price 1000.0004 has more than 3 decimals"},
		{"a value beyond 10^12 is refused", 1e13, 3, 0, "price 1e+13 is out of range"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := basis.ScaleDecimal("price", tc.f, tc.places)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("ScaleDecimal(%v, %d) = %d, %v; want an error holding %q", tc.f, tc.places, got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ScaleDecimal(%v, %d) = %d, %v; want %d", tc.f, tc.places, got, err, tc.want)
			}
		})
	}
}
