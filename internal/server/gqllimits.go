package server

import (
	"context"
	"fmt"
	"strings"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/parser"
)

// DocumentLimits bound what one GraphQL document may cost before gqlgen
// validates it and computes its complexity. Both of those steps can cost far
// more than the document's size suggests: complexity expands every fragment
// spread (fragments that spread one another twice per level double the work
// per level), and gqlparser's check that fields can be merged compares the
// fields of one response name pairwise. The limits are checked on the
// parsed document without expanding anything, so a refusal costs about as
// much as reading the document once.
type DocumentLimits struct {
	// MaxBytes bounds the query text.
	MaxBytes int
	// MaxTokens bounds the tokens gqlparser's lexer may read; parsing stops
	// at the limit.
	MaxTokens int
	// MaxSelections bounds the fields and inline fragments of the document
	// as gqlgen would see them with every fragment spread expanded.
	MaxSelections int
	// MaxSpreads bounds the fragment spreads with every spread expanded.
	MaxSpreads int
	// MaxSameName bounds how often one response name (a field's alias or
	// name) is selected in one selection set, counting the fields that
	// inline fragments and fragment spreads add to it: gqlparser compares
	// such fields pairwise, so their cost is the square of their number.
	MaxSameName int
}

// DefaultDocumentLimits are far above what the dashboard and the CLI send
// (their largest query has under 250 selections and no fragments) and far
// below what costs the server noticeable CPU: validating or computing the
// complexity of a document at these limits takes milliseconds.
var DefaultDocumentLimits = DocumentLimits{
	MaxBytes:      64 << 10,
	MaxTokens:     15_000,
	MaxSelections: 1_000,
	MaxSpreads:    500,
	MaxSameName:   20,
}

// documentCode is the extensions.code of a refused document.
const documentCode = "QUERY_TOO_LARGE"

// check parses query within the limits and refuses it when it is too big,
// too many selections or spreads once expanded, or when its fragments spread
// one another in a cycle. A document gqlparser cannot parse passes: the
// executor parses it again and says what is wrong with it.
func (l DocumentLimits) check(query string) *gqlerror.Error {
	if l.MaxBytes > 0 && len(query) > l.MaxBytes {
		return documentError("query is %d bytes; the limit is %d", len(query), l.MaxBytes)
	}
	doc, err := parser.ParseQueryWithTokenLimit(&ast.Source{Input: query}, l.MaxTokens)
	if err != nil {
		if l.MaxTokens > 0 && strings.Contains(err.Error(), "exceeded token limit") {
			return documentError("query has more than %d tokens; the limit is %d", l.MaxTokens, l.MaxTokens)
		}
		return nil
	}
	c := counter{frags: map[string]*ast.FragmentDefinition{}, done: map[string]cost{}, onPath: map[string]bool{},
		fragNames: map[string]map[string]int{}}
	for _, f := range doc.Fragments {
		c.frags[f.Name] = f
	}
	var total cost
	for _, op := range doc.Operations {
		total = total.add(c.set(op.SelectionSet))
	}
	// Fragments that no operation uses are refused by the validator, but
	// the validator looks at them first.
	for _, f := range doc.Fragments {
		if _, seen := c.done[f.Name]; !seen {
			total = total.add(c.fragment(f.Name))
		}
	}
	switch {
	case c.cycle != "":
		return documentError("fragment %s spreads itself (%s); a fragment may not spread itself directly or through others", c.cycleName, c.cycle)
	case l.MaxSpreads > 0 && total.spreads > l.MaxSpreads:
		return documentError("query has %s fragment spreads once its fragments are expanded; the limit is %d", count(total.spreads), l.MaxSpreads)
	case l.MaxSelections > 0 && total.selections > l.MaxSelections:
		return documentError("query has %s selections once its fragments are expanded; the limit is %d", count(total.selections), l.MaxSelections)
	case l.MaxSameName > 0 && c.sameName > l.MaxSameName:
		return documentError("query selects %q %s times in one selection set; the limit is %d (give each selection its own alias or select it once)",
			c.sameNameOf, count(c.sameName), l.MaxSameName)
	}
	return nil
}

// saturated is where counts stop growing, well below overflow: fragments
// that double per level reach any limit after a few dozen levels.
const saturated = 1 << 40

// count prints a count, saying "more than" for a saturated one.
func count(n int) string {
	if n >= saturated {
		return fmt.Sprintf("more than %d", saturated)
	}
	return fmt.Sprint(n)
}

// cost is what a selection set amounts to with its spreads expanded.
type cost struct{ selections, spreads int }

func (a cost) add(b cost) cost {
	return cost{min(a.selections+b.selections, saturated), min(a.spreads+b.spreads, saturated)}
}

// counter computes expanded costs once per fragment (memoised), so its work
// is linear in the document however often a fragment is spread.
type counter struct {
	frags  map[string]*ast.FragmentDefinition
	done   map[string]cost
	onPath map[string]bool
	path   []string
	// cycle describes the first cycle found, as "A → B → A".
	cycle, cycleName string
	// fragNames memoises each fragment's top-level response names, with
	// how often each occurs once the fragment is flattened.
	fragNames map[string]map[string]int
	// sameName is the highest number of selections of one response name
	// (sameNameOf) in one selection set.
	sameName   int
	sameNameOf string
}

func (c *counter) set(s ast.SelectionSet) cost {
	names := map[string]int{}
	c.names(s, 1, names)
	for n, k := range names {
		if k > c.sameName {
			c.sameName, c.sameNameOf = k, n
		}
	}
	var t cost
	for _, sel := range s {
		switch sel := sel.(type) {
		case *ast.Field:
			t = t.add(cost{selections: 1}).add(c.set(sel.SelectionSet))
		case *ast.InlineFragment:
			t = t.add(cost{selections: 1}).add(c.set(sel.SelectionSet))
		case *ast.FragmentSpread:
			t = t.add(cost{spreads: 1}).add(c.fragment(sel.Name))
		}
	}
	return t
}

// names adds the response names a selection set selects at its own level
// (through inline fragments and spreads too), times, to into.
func (c *counter) names(s ast.SelectionSet, times int, into map[string]int) {
	for _, sel := range s {
		switch sel := sel.(type) {
		case *ast.Field:
			n := sel.Alias
			if n == "" {
				n = sel.Name
			}
			into[n] = min(into[n]+times, saturated)
		case *ast.InlineFragment:
			c.names(sel.SelectionSet, times, into)
		case *ast.FragmentSpread:
			fn, ok := c.fragNames[sel.Name]
			if !ok {
				f := c.frags[sel.Name]
				c.fragNames[sel.Name] = nil // a cycle adds nothing; it is refused anyway
				if f != nil {
					fn = map[string]int{}
					c.names(f.SelectionSet, 1, fn)
				}
				c.fragNames[sel.Name] = fn
			}
			for n, k := range fn {
				into[n] = min(into[n]+min(k*times, saturated), saturated)
			}
		}
	}
}

func (c *counter) fragment(name string) cost {
	if v, ok := c.done[name]; ok {
		return v
	}
	f := c.frags[name]
	if f == nil {
		return cost{} // an unknown fragment: the validator says so
	}
	if c.onPath[name] {
		if c.cycle == "" {
			i := len(c.path) - 1
			for i > 0 && c.path[i] != name {
				i--
			}
			c.cycle, c.cycleName = strings.Join(append(append([]string{}, c.path[i:]...), name), " → "), name
		}
		return cost{}
	}
	c.onPath[name] = true
	c.path = append(c.path, name)
	v := c.set(f.SelectionSet)
	c.path = c.path[:len(c.path)-1]
	delete(c.onPath, name)
	c.done[name] = v
	return v
}

func documentError(format string, args ...any) *gqlerror.Error {
	err := gqlerror.Errorf(format, args...)
	errcode.Set(err, documentCode)
	return err
}

// documentGuard is the gqlgen extension that applies DocumentLimits. It is
// an OperationParameterMutator, so it runs in CreateOperationContext before
// gqlgen parses and validates the query, on every transport (POST, GET and
// WebSocket subscriptions alike) and for every caller. A query in the
// executor's cache passed it before and is not checked again.
type documentGuard struct {
	limits DocumentLimits
	cache  graphql.Cache[*ast.QueryDocument]
	// refused counts refusals by reason, for the metrics.
	refused func(reason string)
}

func (documentGuard) ExtensionName() string                   { return "DocumentLimits" }
func (documentGuard) Validate(graphql.ExecutableSchema) error { return nil }

func (g documentGuard) MutateOperationParameters(ctx context.Context, p *graphql.RawParams) *gqlerror.Error {
	if err := ctx.Err(); err != nil {
		return cancelledError()
	}
	if g.cache != nil {
		if _, ok := g.cache.Get(ctx, p.Query); ok {
			return nil
		}
	}
	err := g.limits.check(p.Query)
	if err != nil && g.refused != nil {
		g.refused(reasonOf(err.Message))
	}
	return err
}

// reasonOf names a refusal for the metrics label.
func reasonOf(msg string) string {
	for _, r := range []string{"bytes", "tokens", "fragment spreads", "selections", "spreads itself"} {
		if strings.Contains(msg, r) {
			return strings.ReplaceAll(r, " ", "_")
		}
	}
	return "other"
}

// cancelledError is what an operation whose request has ended gets; nobody
// reads it, but the executor needs an error to stop.
func cancelledError() *gqlerror.Error {
	err := gqlerror.Errorf("request cancelled")
	errcode.Set(err, "CANCELLED")
	return err
}

// stopWhenGone is an OperationContextMutator placed before the complexity
// limit: once validation is over, an operation whose request has ended
// (the client hung up, the server is shutting down) goes no further.
type stopWhenGone struct{}

func (stopWhenGone) ExtensionName() string                   { return "StopWhenGone" }
func (stopWhenGone) Validate(graphql.ExecutableSchema) error { return nil }

func (stopWhenGone) MutateOperationContext(ctx context.Context, _ *graphql.OperationContext) *gqlerror.Error {
	if ctx.Err() != nil {
		return cancelledError()
	}
	return nil
}

// countedComplexity is gqlgen's complexity limit, counted, so that the
// metrics (and the tests) show that refused documents never reach it.
type countedComplexity struct {
	*extension.ComplexityLimit
	computed prometheus.Counter
}

func (c countedComplexity) MutateOperationContext(ctx context.Context, oc *graphql.OperationContext) *gqlerror.Error {
	c.computed.Inc()
	return c.ComplexityLimit.MutateOperationContext(ctx, oc)
}

// A refused document is a protocol error: gqlgen answers it with 422 over
// HTTP, like a document that does not parse.
func init() { errcode.RegisterErrorType(documentCode, errcode.KindProtocol) }
