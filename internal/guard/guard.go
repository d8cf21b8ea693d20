// Package guard compiles and applies the LLM gateway's pattern guardrails
// (a model-level package: the platform's llm domain compiles and caches
// them per estate version, the gateway checks calls with them): deny patterns
// that block a call whose input or output matches, and allow patterns that
// input must match when any are set. Output of a stream is checked as it
// arrives, so a stream stops at the chunk that completes a denied pattern.
package guard

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/klique-ai/klique/internal/model"
)

// overlap is how much of a stream's earlier output is checked again with
// each new chunk, so that a pattern split across chunks is found. Patterns
// matching longer text than this across chunk boundaries may be missed.
const overlap = 4096

// Rule is a compiled pattern with where it came from.
type Rule struct {
	// Name says where the rule is, for the ledger and the caller:
	// "global deny 2", "alias chat deny 1".
	Name string
	re   *regexp.Regexp
}

// Set is the guardrails of one alias: the global ones, then its own.
type Set struct {
	deny  []Rule
	allow []Rule
}

// Compile builds the set for an alias from the global policy and the
// alias's own. Errors name the pattern that does not compile.
func Compile(global model.Guardrails, alias string, own model.Guardrails) (*Set, error) {
	s := &Set{}
	add := func(list *[]Rule, where, kind string, patterns []string) error {
		for i, p := range patterns {
			re, err := regexp.Compile(p)
			if err != nil {
				return fmt.Errorf("%s %s pattern %d %q: %w", where, kind, i+1, p, err)
			}
			*list = append(*list, Rule{Name: fmt.Sprintf("%s %s %d", where, kind, i+1), re: re})
		}
		return nil
	}
	if err := add(&s.deny, "global", "deny", global.Deny); err != nil {
		return nil, err
	}
	if err := add(&s.allow, "global", "allow", global.Allow); err != nil {
		return nil, err
	}
	if err := add(&s.deny, "alias "+alias, "deny", own.Deny); err != nil {
		return nil, err
	}
	if err := add(&s.allow, "alias "+alias, "allow", own.Allow); err != nil {
		return nil, err
	}
	return s, nil
}

// Validate compiles patterns and says which one is wrong, for the estate
// validator.
func Validate(patterns []string) error {
	for i, p := range patterns {
		if _, err := regexp.Compile(p); err != nil {
			return fmt.Errorf("pattern %d %q is not a valid regular expression: %v", i+1, p, err)
		}
	}
	return nil
}

// Empty reports whether the set has no rules.
func (s *Set) Empty() bool { return s == nil || len(s.deny)+len(s.allow) == 0 }

// Input checks a call's input: the name of the rule that blocks it, or "".
func (s *Set) Input(texts []string) string {
	if s.Empty() {
		return ""
	}
	for _, r := range s.deny {
		for _, t := range texts {
			if r.re.MatchString(t) {
				return r.Name
			}
		}
	}
	if len(s.allow) == 0 {
		return ""
	}
	text := strings.Join(texts, "\n")
	for _, r := range s.allow {
		if r.re.MatchString(text) {
			return ""
		}
	}
	return "allow list (no allow pattern matched)"
}

// Output checks a whole response's output text.
func (s *Set) Output(text string) string {
	if s.Empty() {
		return ""
	}
	for _, r := range s.deny {
		if r.re.MatchString(text) {
			return r.Name
		}
	}
	return ""
}

// Stream checks a stream's output as it arrives.
type Stream struct {
	set  *Set
	tail string
}

// Stream starts checking one stream's output.
func (s *Set) Stream() *Stream { return &Stream{set: s} }

// Add checks the next piece of output together with the end of what came
// before: the name of the rule that blocks the stream, or "".
func (st *Stream) Add(piece string) string {
	if st.set.Empty() || piece == "" {
		return ""
	}
	text := st.tail + piece
	if rule := st.set.Output(text); rule != "" {
		return rule
	}
	if len(text) > overlap {
		text = text[len(text)-overlap:]
	}
	st.tail = text
	return ""
}
