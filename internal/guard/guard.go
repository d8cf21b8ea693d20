// Package guard compiles and applies the LLM gateway's pattern guardrails
// (a model-level package: the platform's llm domain compiles and caches
// them per estate version, the gateway checks calls with them): deny patterns
// that block a call whose input or output matches, and allow patterns that
// input must match when any are set. Output of a stream is checked as it
// arrives, so a stream stops at the chunk that completes a denied pattern.
package guard

import (
	"bytes"
	"fmt"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"unicode/utf8"

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
	// needs are literals, folded, one of which every match contains (nil:
	// none known); see literals.go.
	needs [][]byte
	// longest is the length of the longest of needs.
	longest int
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
			rule := Rule{Name: fmt.Sprintf("%s %s %d", where, kind, i+1), re: re}
			if parsed, err := syntax.Parse(p, syntax.Perl); err == nil {
				for _, l := range needs(parsed.Simplify()) {
					rule.needs = append(rule.needs, []byte(l))
					rule.longest = max(rule.longest, len(l))
				}
			}
			*list = append(*list, rule)
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
// A call's input is every text of its request, an inline image's data:
// URL among them (megabytes of base64), so a long text is searched first
// for the literals a rule's matches need (see literals.go), and the rule
// run over it only when one is there: a plain substring search, where
// running a case-insensitive pattern over a screenshot's data: URL took a
// third of a second.
func (s *Set) Input(texts []string) string {
	if s.Empty() {
		return ""
	}
	// The first rule (in order) that matches any text blocks: each text
	// is checked against the rules before the best found so far.
	best := len(s.deny)
	var folded []byte
	for _, t := range texts {
		folded = folded[:0]
		for i := range s.deny[:best] {
			r := &s.deny[i]
			if r.mayMatch(t, &folded) && r.re.MatchString(t) {
				best = i
				break
			}
		}
	}
	if best < len(s.deny) {
		return s.deny[best].Name
	}
	if len(s.allow) == 0 {
		return ""
	}
	text := strings.Join(texts, "\n")
	folded = folded[:0]
	for i := range s.allow {
		if r := &s.allow[i]; r.mayMatch(text, &folded) && r.re.MatchString(text) {
			return ""
		}
	}
	return "allow list (no allow pattern matched)"
}

// prefilterAt is the length from which a text is searched for a rule's
// literals before the rule is run over it: below it, folding the text
// costs more than the rule.
const prefilterAt = 4 << 10

// mayMatch says whether r can match t: false when t is long and holds
// none of the literals every match of r contains. folded is t folded,
// made on the first call that needs it (empty until then).
func (r *Rule) mayMatch(t string, folded *[]byte) bool {
	if r.needs == nil || len(t) < prefilterAt {
		return true
	}
	if len(*folded) == 0 {
		*folded = appendFold(slices.Grow(*folded, len(t)), t)
	}
	for _, l := range r.needs {
		if bytes.Contains(*folded, l) {
			return true
		}
	}
	return false
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
	set *Set
	// tail is the end of the output so far (at most overlap bytes) and
	// folded the same folded (at most overlap bytes too, which folding
	// never makes longer: it covers at least the runes tail does).
	tail, folded []byte
	// partial is the start of a rune the last piece ended in the middle
	// of, folded with the next piece.
	partial []byte
	// base is where folded starts in the whole output folded, and seen,
	// for each deny rule, where the last of its literals found starts
	// there (-1: none yet): a rule is run while one is in the window, and
	// only the new end of the window is searched for them.
	base int
	seen []int
}

// Stream starts checking one stream's output.
func (s *Set) Stream() *Stream { return &Stream{set: s} }

// Add checks the next piece of output together with the end of what came
// before: the name of the rule that blocks the stream, or "". A rule is
// run only when the output's end holds one of the literals its matches
// need (or it needs none known).
func (st *Stream) Add(piece string) string {
	if st.set.Empty() || piece == "" {
		return ""
	}
	if st.seen == nil {
		st.seen = make([]int, len(st.set.deny))
		for i := range st.seen {
			st.seen[i] = -1
		}
	}
	before := len(st.folded)
	st.tail = append(st.tail, piece...)
	st.folded, st.partial = st.foldPiece(st.folded, piece)
	defer st.trim()
	for i := range st.set.deny {
		r := &st.set.deny[i]
		if r.needs != nil {
			// A literal found now ends in the new bytes.
			from := max(0, before-r.longest+1)
			if j := lastIndexAny(st.folded[from:], r.needs); j >= 0 {
				st.seen[i] = st.base + from + j
			}
			if st.seen[i] < st.base {
				continue
			}
		}
		if r.re.Match(st.tail) {
			return r.Name
		}
	}
	return ""
}

// trim keeps the window's end.
func (st *Stream) trim() {
	st.tail = keepEnd(st.tail)
	n := len(st.folded)
	st.folded = keepEnd(st.folded)
	st.base += n - len(st.folded)
}

// foldPiece appends a piece folded to dst, with the start of a rune the
// last piece was cut in, and keeps the start of one it is cut in for the
// next: a model server may split a chunk inside a rune.
func (st *Stream) foldPiece(dst []byte, piece string) (folded, partial []byte) {
	if len(st.partial) > 0 {
		piece = string(st.partial) + piece
	}
	partial = st.partial[:0]
	if cut := incompleteEnd(piece); cut < len(piece) {
		partial = append(partial, piece[cut:]...)
		piece = piece[:cut]
	}
	return appendFold(dst, piece), partial
}

// incompleteEnd is where s ends in the start of a rune that the bytes
// after it would complete (len(s) when it does not).
func incompleteEnd(s string) int {
	for i := len(s) - 1; i >= 0 && i >= len(s)-utf8.UTFMax+1; i-- {
		if utf8.RuneStart(s[i]) {
			if !utf8.FullRuneInString(s[i:]) {
				return i
			}
			break
		}
	}
	return len(s)
}

// keepEnd keeps the last overlap bytes of b, in place.
func keepEnd(b []byte) []byte {
	if len(b) <= overlap {
		return b
	}
	n := copy(b, b[len(b)-overlap:])
	return b[:n]
}

// lastIndexAny is where the last of lits found in b starts, or -1.
func lastIndexAny(b []byte, lits [][]byte) int {
	at := -1
	for _, l := range lits {
		at = max(at, bytes.LastIndex(b, l))
	}
	return at
}
