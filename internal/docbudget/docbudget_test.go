package docbudget

import (
	"errors"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/klique-ai/klique/internal/docbudget/docbudgettest"
)

// roomy counts everything and refuses nothing but the misuse of anchors.
var roomy = Budget{Document: "test document"}

// tight is a budget small enough for hand-counted documents to pass it.
var tight = Budget{Document: "pipeline definition", MaxBytes: 1 << 20, MaxNodes: 200, MaxAliases: 20, MaxDepth: 8, Split: "split the pipeline into smaller ones"}

func count(t *testing.T, doc string) Usage {
	t.Helper()
	u, err := roomy.count([]byte(doc))
	if err != nil {
		t.Fatalf("count %q: %v", doc, err)
	}
	return u
}

func refusal(t *testing.T, err error) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("got %v (%T), want a *docbudget.Error", err, err)
	}
	return e
}

func TestCountsValuesAliasesAndNesting(t *testing.T) {
	cases := []struct {
		name string
		doc  string
		want Usage
	}{
		// root map, 2 keys, the list and its 3 items, the nested map, its key and value
		{"block style", "a: [1, 2, 3]\nb: {c: d}\n", Usage{Nodes: 1 + 2 + 4 + 3, Depth: 2}},
		// JSON is YAML in flow style: the same values, keys included
		{"JSON flow style", `{"a": {"b": [1, 2, {"c": null}]}}`, Usage{Nodes: 1 + 1 + 1 + 1 + 1 + 2 + 1 + 2, Depth: 4}},
		// l0: list of 3 (4 values); l1: list of 3 aliases of l0 (1 + 3×4 = 13); l2: 1 + 3×13 = 40;
		// x's map: 1 + 3 keys + 4 + 13 + 40 = 61; root: 1 + 2 keys + 61 + y's 40 = 104.
		// Aliases: 3 in l1, 3×(1+3) in l2, and y's 1 + 12.
		{"nested anchors", "x: " + docbudgettest.Anchors(3, 3) + "\ny: *l2\n", Usage{Nodes: 104, Aliases: 3 + 12 + 13, Depth: 5}},
		// base: 1 + 2 keys + 2 values = 5; step: 1 + the merge key + the alias's 5 + z and 3 = 9; root: 1 + 2 + 5 + 9
		{"merge key", "base: &b {x: 1, y: 2}\nstep: {<<: *b, z: 3}\n", Usage{Nodes: 17, Aliases: 1, Depth: 3}},
		// a merge of a list of aliases counts each
		{"merge of a list", "a: &a {x: 1}\nb: &b {y: 2}\nc: {<<: [*a, *b]}\n", Usage{Nodes: 1 + 3 + 3 + 3 + (1 + 1 + 1 + 3 + 3), Aliases: 2, Depth: 4}},
		{"tags and comments count as their value", "# head\na: !!str 1 # why\n", Usage{Nodes: 3, Depth: 1}},
		{"an alias as a key", "a: &k key\n*k : v\n", Usage{Nodes: 5, Aliases: 1, Depth: 1}},
		{"each document of a stream", "a: 1\n---\nb: [2]\n", Usage{Nodes: 3 + 4, Depth: 2}},
		{"empty", "", Usage{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := count(t, tc.doc)
			tc.want.Bytes = int64(len(tc.doc))
			if got != tc.want {
				t.Fatalf("count = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// JSON counted as JSON and counted as YAML gives the same values and
// nesting, so a form is held to one budget whichever way it is read.
func TestJSONCountsAsYAMLDoes(t *testing.T) {
	for _, doc := range []string{`{"a": {"b": [1, 2, {"c": null}]}}`, `[]`, `{"type":"object","properties":{"x":{"type":"string","enum":["a","b"]}}}`, `"s"`} {
		y := count(t, doc)
		var j Usage
		b := Budget{Document: "form", MaxNodes: 1}
		if err := b.JSON([]byte(doc)); err != nil {
			j.Nodes = refusal(t, err).Count
		} else {
			j.Nodes = 1
		}
		if y.Nodes != j.Nodes {
			t.Errorf("%s: %d values as YAML, %d as JSON", doc, y.Nodes, j.Nodes)
		}
	}
}

func TestRefusals(t *testing.T) {
	t.Run("bytes over the limit are refused before the document is read", func(t *testing.T) {
		b := tight
		b.MaxBytes = 1000
		e := refusal(t, b.YAML([]byte(strings.Repeat("#", 1001))))
		if e.Measure != "bytes" || e.Count != 1001 || e.Limit != 1000 {
			t.Fatalf("refusal %+v", e)
		}
	})
	t.Run("values over the limit", func(t *testing.T) {
		e := refusal(t, tight.YAML([]byte("["+strings.Repeat("1,", 250)+"1]")))
		if e.Measure != "values" || e.Count != 252 {
			t.Fatalf("refusal %+v", e)
		}
	})
	t.Run("aliases over the limit, with the message that names the limit and the way out", func(t *testing.T) {
		err := tight.YAML([]byte("x: " + docbudgettest.Anchors(3, 3) + "\ny: *l2\n"))
		want := "pipeline definition: 28 aliases expanded; the limit is 20: use fewer anchors and aliases (write the values out), or split the pipeline into smaller ones"
		if err == nil || err.Error() != want {
			t.Fatalf("got %v, want %q", err, want)
		}
	})
	t.Run("an alias bomb's values are counted as expanded", func(t *testing.T) {
		b := tight
		b.MaxAliases = 0
		e := refusal(t, b.YAML([]byte("a: &a [x, x, x, x, x, x, x, x, x, x]\nb: [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a, *a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n")))
		if e.Measure != "values" || e.Count != 1+2+11+1+20*11 || !strings.Contains(e.Remedy, "each alias counts as all its anchor holds") {
			t.Fatalf("refusal %+v", e)
		}
	})
	t.Run("the issue's probe is counted exactly, without expanding it", func(t *testing.T) {
		doc := docbudgettest.Pipeline(8, 10)
		e := refusal(t, tight.YAML([]byte(doc)))
		// Each anchor's definition holds its aliases, and the command
		// expands the last one once more.
		want := docbudgettest.Expansions(8, 10)
		for l := 1; l < 8; l++ {
			want += docbudgettest.Expansions(l+1, 10) - 1
		}
		if e.Measure != "aliases expanded" || e.Count != want || len(doc) > 600 {
			t.Fatalf("refusal %+v of %d bytes, want %d aliases", e, len(doc), want)
		}
	})
	t.Run("counts past what an int64 holds say so", func(t *testing.T) {
		e := refusal(t, tight.YAML([]byte("x: "+docbudgettest.Anchors(40, 10)+"\ny: "+docbudgettest.Last(40)+"\n")))
		if e.Count != saturated || !strings.HasPrefix(e.Error(), "pipeline definition: more than 1,152,921,504,606,846,976 aliases expanded") {
			t.Fatalf("refusal %v", e)
		}
	})
	t.Run("nesting is refused on the tokens, before the parser that is slow on it", func(t *testing.T) {
		for _, doc := range []string{
			strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
			strings.Repeat("{a: ", 10000) + "1" + strings.Repeat("}", 10000),
			strings.Repeat("- ", 10000) + "x\n",
			nestedBlock(9),
		} {
			e := refusal(t, tight.YAML([]byte(doc)))
			if e.Measure != "levels of nesting" || e.Count <= 8 {
				t.Fatalf("%.40q: refusal %+v", doc, e)
			}
		}
		if err := tight.YAML([]byte(nestedBlock(8))); err != nil {
			t.Fatalf("8 levels: %v", err)
		}
	})
	t.Run("nesting through aliases is counted as expanded", func(t *testing.T) {
		e := refusal(t, tight.YAML([]byte("a: &a [[[[1]]]]\nb: [[[[[*a]]]]]\n")))
		if e.Measure != "levels of nesting" || e.Count != 10 {
			t.Fatalf("refusal %+v", e)
		}
	})
	for _, tc := range []struct{ name, doc, want string }{
		{"an anchor defined twice", "a: &x 1\nb: &x [*y]\n", "anchor &x is defined again on line 2; give each anchor its own name"},
		{"an alias before its anchor", "a: *x\nb: &x 1\n", "alias *x (line 1) comes before any anchor &x"},
		{"an alias inside its own anchor", "a: &x [1, *x]\n", "alias *x (line 1) is inside its own anchor &x"},
	} {
		t.Run(tc.name+" is refused", func(t *testing.T) {
			e := refusal(t, tight.YAML([]byte(tc.doc)))
			if e.Measure != "" || !strings.Contains(e.Error(), tc.want) || !strings.HasPrefix(e.Error(), "pipeline definition: ") {
				t.Fatalf("refusal %q, want %q", e, tc.want)
			}
		})
	}
	t.Run("a syntax error is the parser's, as the decoder gives it", func(t *testing.T) {
		err := tight.YAML([]byte("a: [1, 2\n"))
		var e *Error
		if err == nil || errors.As(err, &e) {
			t.Fatalf("got %v, want the parser's error", err)
		}
		var want any
		if derr := yaml.Unmarshal([]byte("a: [1, 2\n"), &want); derr == nil || derr.Error() != err.Error() {
			t.Fatalf("got %v, the decoder says %v", err, derr)
		}
	})
	t.Run("JSON over its budget", func(t *testing.T) {
		b := Budget{Document: "launch form", MaxBytes: 100, MaxNodes: 5, MaxDepth: 3}
		if e := refusal(t, b.JSON([]byte(strings.Repeat(" ", 101)))); e.Measure != "bytes" {
			t.Fatalf("refusal %+v", e)
		}
		if e := refusal(t, b.JSON([]byte(`[1,2,3,4,5]`))); e.Measure != "values" || e.Count != 6 {
			t.Fatalf("refusal %+v", e)
		}
		if e := refusal(t, b.JSON([]byte(`[[[[1]]]]`))); e.Measure != "levels of nesting" {
			t.Fatalf("refusal %+v", e)
		}
		if e := refusal(t, b.Value(map[string]any{"a": []any{1, 2, 3, 4}})); e.Measure != "values" {
			t.Fatalf("refusal %+v", e)
		}
		if err := b.JSON([]byte(`{"a": [1`)); err != nil {
			t.Fatalf("JSON that does not parse is for the decoder to report: %v", err)
		}
	})
}

func nestedBlock(levels int) string {
	var b strings.Builder
	for l := range levels {
		b.WriteString(strings.Repeat("  ", l) + "k:\n")
	}
	b.WriteString(strings.Repeat("  ", levels) + "v\n")
	return b.String()
}

func TestUnmarshalDecodesWhatIsWithinBudget(t *testing.T) {
	doc := "base: &b {x: 1}\nsteps:\n  - {<<: *b, name: a}\n  - name: b\n    x: 2\n"
	var got, want any
	if err := tight.Unmarshal([]byte(doc), &got); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal([]byte(doc), &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Unmarshal = %v, yaml.Unmarshal = %v", got, want)
	}
	var none any
	if err := tight.Unmarshal([]byte(docbudgettest.Pipeline(8, 10)), &none); err == nil || none != nil {
		t.Fatalf("the probe decoded to %v, %v", none, err)
	}
}

// The probe of issue 39 is refused in well under 50 ms of CPU. The test is
// not parallel, so the process's CPU time is the refusals' own.
func TestTheProbeIsRefusedCheaply(t *testing.T) {
	docs := [][]byte{[]byte(docbudgettest.Pipeline(8, 10)), []byte(docbudgettest.Estate(8, 10)), []byte(docbudgettest.Pipeline(40, 10))}
	const rounds = 20
	before := cpu(t)
	for range rounds {
		for _, d := range docs {
			if err := tight.YAML(d); err == nil {
				t.Fatal("the probe passed")
			}
		}
	}
	if per := (cpu(t) - before) / (rounds * time.Duration(len(docs))); per > 50*time.Millisecond {
		t.Fatalf("a refusal took %v of CPU, more than 50 ms", per)
	}
}

func cpu(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func BenchmarkRefuseTheProbe(b *testing.B) {
	doc := []byte(docbudgettest.Pipeline(8, 10))
	for b.Loop() {
		if tight.YAML(doc) == nil {
			b.Fatal("the probe passed")
		}
	}
}

func TestThousands(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -1234: "-1,234", 100000: "100,000"} {
		if got := Thousands(n); got != want {
			t.Errorf("Thousands(%d) = %q, want %q", n, got, want)
		}
	}
}

// Deep flow nesting is refused on its tokens: the parser's cost grows with
// the square of the depth (10,000 levels take it most of a second, 100,000 minutes), the lexer's
// only with the length.
func TestDeepNestingIsRefusedBeforeItIsParsed(t *testing.T) {
	doc := []byte(strings.Repeat("[", 30000) + strings.Repeat("]", 30000))
	before := cpu(t)
	e := refusal(t, tight.YAML(doc))
	if took := cpu(t) - before; e.Measure != "levels of nesting" || took > 3*time.Second {
		t.Fatalf("refusal %+v after %v of CPU", e, took)
	}
}
