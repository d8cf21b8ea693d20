package estate_test

import (
	"strings"
	"testing"

	"github.com/klique-ai/klique/internal/estate"
)

func TestCheckName(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
	}{
		{"a name with inner spaces is fine", "multi-node training", ""},
		{"a name of exactly the limit is fine", strings.Repeat("n", estate.MaxNameLength), ""},
		{"a unicode name is fine", "équipe vision", ""},
		{"an empty name is refused", "", "name is empty"},
		{"a name with a leading space is refused", " x", "starts or ends with a space"},
		{"a name with a newline is refused", "a\nb", "control or invalid character"},
		{"a name with a replacement character is refused", "a\uFFFDb", "control or invalid character"},
		{"a name one over the limit is refused", strings.Repeat("n", estate.MaxNameLength+1), "longer than 100"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := estate.CheckName(tc.in)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("CheckName(%q) = %v, want nil", tc.in, err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("CheckName(%q) = %v, want an error holding %q", tc.in, err, tc.want)
			}
		})
	}
}
