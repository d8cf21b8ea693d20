package guard_test

import (
	"strings"
	"testing"

	"github.com/klique-ai/klique/internal/guard"
	"github.com/klique-ai/klique/internal/model"
)

func TestInputAndOutput(t *testing.T) {
	s, err := guard.Compile(model.Guardrails{Deny: []string{`(?i)\bpassword\b`}},
		"chat", model.Guardrails{Deny: []string{`\d{3}-\d{2}-\d{4}`}, Allow: []string{`(?i)fraud|model`}})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		input []string
		want  string
	}{
		{[]string{"explain the fraud model"}, ""},
		{[]string{"be brief", "what is my PASSWORD for the model"}, "global deny 1"},
		{[]string{"fraud check for 123-45-6789"}, "alias chat deny 1"},
		{[]string{"tell me a joke"}, "allow list (no allow pattern matched)"},
	}
	for _, c := range cases {
		if got := s.Input(c.input); got != c.want {
			t.Errorf("Input(%q) = %q, want %q", c.input, got, c.want)
		}
	}
	if got := s.Output("the ssn is 123-45-6789"); got != "alias chat deny 1" {
		t.Errorf("Output = %q", got)
	}
}

func TestAStreamIsStoppedAtTheChunkThatCompletesADeniedPattern(t *testing.T) {
	s, err := guard.Compile(model.Guardrails{Deny: []string{`secret plan`}}, "chat", model.Guardrails{})
	if err != nil {
		t.Fatal(err)
	}
	st := s.Stream()
	for i, piece := range []string{"the ", "sec", "ret", " pl", "an is"} {
		got := st.Add(piece)
		if (i == 4) != (got != "") {
			t.Fatalf("piece %d %q: %q", i, piece, got)
		}
		if got != "" {
			break
		}
	}
	// Long streams keep a bounded tail.
	st = s.Stream()
	for i := 0; i < 1000; i++ {
		if st.Add(strings.Repeat("x", 100)) != "" {
			t.Fatal("blocked harmless text")
		}
	}
}

func TestABadPatternIsNamed(t *testing.T) {
	_, err := guard.Compile(model.Guardrails{}, "chat", model.Guardrails{Deny: []string{"ok", "(unclosed"}})
	if err == nil || !strings.Contains(err.Error(), `alias chat deny pattern 2 "(unclosed"`) {
		t.Fatalf("err = %v", err)
	}
	if err := guard.Validate([]string{"a", "[z-a]"}); err == nil || !strings.Contains(err.Error(), `pattern 2 "[z-a]"`) {
		t.Fatalf("Validate: %v", err)
	}
	var none *guard.Set
	if !none.Empty() || none.Input([]string{"x"}) != "" {
		t.Fatal("a nil set blocks")
	}
}
