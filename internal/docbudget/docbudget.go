// Package docbudget bounds the documents the server reads from outside
// (estate files, pipeline definitions, study files, app launch forms and
// their values) on their bytes, their values once aliases are expanded,
// their alias expansions and their nesting, and refuses one over its
// budget before it is decoded.
//
// The check must come first: a YAML decoder expands aliases while it fills
// typed fields, so a few hundred bytes of anchors nesting aliases ten to a
// level become a hundred million values, and the server runs out of memory
// before anything it could refuse afterwards. The YAML library has no
// limit of its own on that (it bounds only its recursion), so a document is
// read to tokens and then to a syntax tree, whose aliases are not expanded,
// and counted there; each anchor's size is counted once and reused at each
// of its aliases, so counting costs no more than reading. Nesting is bounded
// on the tokens before the tree is built, because the parser's own cost
// grows faster than the depth of what it reads.
//
// Each document kind states its Budget next to its other bounds; the
// values are in docs/operations.md's Limits table.
package docbudget

import (
	"fmt"
	"strconv"
)

// Budget is what one kind of document may hold.
type Budget struct {
	// Document names the kind in messages: "pipeline definition".
	Document string
	// MaxBytes bounds the document's text.
	MaxBytes int
	// MaxNodes bounds its values (scalars, keys, lists and maps) as the
	// decoder would build them: an alias counts as everything its anchor
	// holds.
	MaxNodes int64
	// MaxAliases bounds alias expansions: an alias inside an anchor counts
	// once for each time that anchor is used.
	MaxAliases int64
	// MaxDepth bounds the nesting of lists and maps.
	MaxDepth int
	// Split, when set, is how to make a document of this kind smaller
	// ("split the pipeline into smaller ones"); it ends the messages about
	// size.
	Split string
}

// Usage is what a document holds, as a Budget counts it.
type Usage struct {
	Bytes   int64
	Nodes   int64
	Aliases int64
	Depth   int64
}

// Error is a document refused by its budget: it names the document, what
// was counted, the limit and what to change.
type Error struct {
	Document string
	// Measure is what was counted: "bytes", "values", "aliases expanded",
	// "levels of nesting"; empty for a misuse of anchors.
	Measure string
	// Count is how many there are; Limit is the most allowed.
	Count, Limit int64
	// Remedy says what to change.
	Remedy string
}

func (e *Error) Error() string {
	if e.Measure == "" {
		return fmt.Sprintf("%s: %s", e.Document, e.Remedy)
	}
	count := Thousands(e.Count)
	if e.Count >= saturated {
		count = "more than " + Thousands(saturated)
	}
	return fmt.Sprintf("%s: %s %s; the limit is %s: %s", e.Document, count, e.Measure, Thousands(e.Limit), e.Remedy)
}

// saturated is where counting stops: a count this large is reported as
// "more than" it, and sums of two stay far from overflowing.
const saturated int64 = 1 << 60

func add(a, b int64) int64 { return min(a+b, saturated) }

// Check compares a usage with the budget, in the order that says most
// about what to change: bytes, aliases, values, then nesting.
func (b Budget) Check(u Usage) error {
	if b.MaxBytes > 0 && u.Bytes > int64(b.MaxBytes) {
		return b.over("bytes", u.Bytes, int64(b.MaxBytes), "make it smaller")
	}
	if b.MaxAliases > 0 && u.Aliases > b.MaxAliases {
		return b.over("aliases expanded", u.Aliases, b.MaxAliases, "use fewer anchors and aliases (write the values out)")
	}
	if b.MaxNodes > 0 && u.Nodes > b.MaxNodes {
		remedy := "make it smaller"
		if u.Aliases > 0 {
			remedy = "use fewer anchors and aliases (each alias counts as all its anchor holds), or make it smaller"
		}
		return b.over("values", u.Nodes, b.MaxNodes, remedy)
	}
	if b.MaxDepth > 0 && u.Depth > int64(b.MaxDepth) {
		return b.over("levels of nesting", u.Depth, int64(b.MaxDepth), "nest its lists and maps less deeply")
	}
	return nil
}

func (b Budget) over(measure string, count, limit int64, remedy string) error {
	if b.Split != "" {
		remedy += ", or " + b.Split
	}
	return &Error{Document: b.Document, Measure: measure, Count: count, Limit: limit, Remedy: remedy}
}

func (b Budget) refuse(format string, args ...any) error {
	return &Error{Document: b.Document, Remedy: fmt.Sprintf(format, args...)}
}

// Thousands writes n with commas between groups of three digits, as the
// limits are written in messages and docs.
func Thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := n < 0
	if neg {
		s = s[1:]
	}
	out := make([]byte, 0, len(s)+len(s)/3+1)
	if neg {
		out = append(out, '-')
	}
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	return string(out)
}
