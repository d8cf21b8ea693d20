package guard

import (
	"math/rand/v2"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"testing"

	"github.com/klique-ai/klique/internal/model"
)

// The literals a rule needs are ones every match contains: a word, any
// branch's word, nothing for a pattern that can match without one.
func TestARuleNeedsTheWordsEveryMatchContains(t *testing.T) {
	cases := map[string][]string{
		`(?i)\bpassword\s*[:=]`:             {fold("password")},
		`(?i)(password|api[_-]?key)\s*[:=]`: {fold("password"), fold("api")},
		`secret plan`:                       {fold("secret plan")},
		`\d{3}-\d{2}-\d{4}`:                 {fold("-")},
		`(?:token)+ leaked`:                 {fold(" leaked")},
		`x*`:                                nil,
		`[a-z]+@example`:                    {fold("@example")},
		`(?i)project (?:falcon|heron)?`:     {fold("project ")},
		`(?:codename|)`:                     nil,
		`(?i)ſecret`:                        {fold("secret")},
		`sk-[A-Za-z0-9]{20,}`:               {fold("sk-")},
	}
	for pattern, want := range cases {
		re, err := syntax.Parse(pattern, syntax.Perl)
		if err != nil {
			t.Fatal(err)
		}
		if got := needs(re.Simplify()); !slices.Equal(got, want) {
			t.Errorf("needs(%s) = %q, want %q", pattern, got, want)
		}
	}
	if fold("PassWord ſ K") != fold("password s k") {
		t.Errorf("fold does not equate the cases a case-insensitive pattern does: %q, %q", fold("PassWord ſ K"), fold("password s k"))
	}
}

// A stream checked with the rules' literals blocks at exactly the chunk
// where running every rule over the stream's end would: random streams of
// words and separators, in random chunks, some of them in other cases and
// Unicode's other forms of s and k, against patterns with and without
// literals.
func TestTheLiteralsNeverLetAMatchBy(t *testing.T) {
	patterns := []string{`(?i)\bpassword\s*[:=]`, `(?i)(passkey|api[_-]?key)\s*[:=]`, `secret plan`, `\d{3}-\d{2}-\d{4}`, `(?i)kelvin`, `[A-Z]{4}\d`}
	set, err := Compile(model.Guardrails{Deny: patterns}, "chat", model.Guardrails{})
	if err != nil {
		t.Fatal(err)
	}
	var res []*regexp.Regexp
	for _, p := range patterns {
		res = append(res, regexp.MustCompile(p))
	}
	// reference is the check without literals: every rule over the
	// stream's end.
	reference := func(tail, piece string) (string, string) {
		text := tail + piece
		for i, re := range res {
			if re.MatchString(text) {
				return set.deny[i].Name, text
			}
		}
		if len(text) > overlap {
			text = text[len(text)-overlap:]
		}
		return "", text
	}
	words := []string{"the", "pass", "word", "PassWord", "paſſword", "api", "_key", "-key", "secret", " plan", "123", "-45-", "6789", "Kelvin", "ABCD", "7", " ", ":", "=", "\n", "ünïcode", "x",
		// Filler long enough that a word seen early leaves the window
		// (overlap) before what completes its pattern comes.
		strings.Repeat("filler ", 150)}
	rng := rand.New(rand.NewPCG(1, 2))
	streams := 3000
	if raceDetector {
		streams = 300
	}
	blocked := 0
	for n := 0; n < streams; n++ {
		var sb strings.Builder
		for range 1 + rng.IntN(60) {
			sb.WriteString(words[rng.IntN(len(words))])
		}
		text := sb.String()
		st, tail := set.Stream(), ""
		for len(text) > 0 {
			k := 1 + rng.IntN(min(len(text), 9))
			if rng.IntN(20) == 0 {
				k = min(len(text), 1+rng.IntN(1500))
			}
			piece := text[:k]
			text = text[k:]
			want, next := reference(tail, piece)
			got := st.Add(piece)
			if got != want {
				t.Fatalf("stream %d: after %q + %q the check says %q, running every rule says %q", n, tail, piece, got, want)
			}
			if got != "" {
				blocked++
				break
			}
			tail = next
		}
	}
	if blocked < streams/10 {
		t.Fatalf("only %d of %d streams were blocked: the test does not exercise the rules", blocked, streams)
	}
}

// BenchmarkStreamCheck checks a 300-token answer streamed a token a chunk
// against the gateway benchmark's guardrail (case-insensitive, which Go's
// regexp cannot scan with a literal prefix).
//
//	go test ./internal/guard -run '^$' -bench StreamCheck -benchmem
func BenchmarkStreamCheck(b *testing.B) {
	set, err := Compile(model.Guardrails{Deny: []string{`(?i)\bpassword\s*[:=]`}}, "chat", model.Guardrails{})
	if err != nil {
		b.Fatal(err)
	}
	tokens := strings.Fields(strings.Repeat("The quick brown fox jumps over the lazy dog and keeps running far away. ", 22))[:300]
	b.ReportAllocs()
	for b.Loop() {
		st := set.Stream()
		for _, tok := range tokens {
			if st.Add(tok+" ") != "" {
				b.Fatal("blocked")
			}
		}
	}
}

// A call's input is checked with the rules' literals too when it is long
// (an inline image's data: URL): it is blocked by exactly the rule that
// running every rule over every text would name. Random inputs of a few
// texts, some long, of words in random cases and forms.
func TestInputLiteralsNeverLetAMatchBy(t *testing.T) {
	patterns := []string{`(?i)\bpassword\s*[:=]`, `(?i)(passkey|api[_-]?key)\s*[:=]`, `secret plan`, `\d{3}-\d{2}-\d{4}`, `(?i)kelvin`, `[A-Z]{4}\d`}
	set, err := Compile(model.Guardrails{Deny: patterns, Allow: []string{`(?i)fraud`}}, "chat", model.Guardrails{})
	if err != nil {
		t.Fatal(err)
	}
	var res []*regexp.Regexp
	for _, p := range patterns {
		res = append(res, regexp.MustCompile(p))
	}
	allow := regexp.MustCompile(`(?i)fraud`)
	reference := func(texts []string) string {
		for i, re := range res {
			for _, text := range texts {
				if re.MatchString(text) {
					return set.deny[i].Name
				}
			}
		}
		if !allow.MatchString(strings.Join(texts, "\n")) {
			return "allow list (no allow pattern matched)"
		}
		return ""
	}
	words := []string{"the", "pass", "word", "PassWord", "paſſword", "api", "_key", "-key", "secret", " plan", "123", "-45-", "6789", "Kelvin", "ABCD", "7", " ", ":", "=", "\n",
		"ünïcode", "FrAud", "iVBORw0KGgoAAAANSUhEUgAA", strings.Repeat("AAAA", 600)}
	rng := rand.New(rand.NewPCG(3, 4))
	inputs := 500
	if raceDetector {
		inputs = 100
	}
	var blocked, long int
	for n := 0; n < inputs; n++ {
		texts := make([]string, 1+rng.IntN(3))
		for i := range texts {
			var sb strings.Builder
			for range 1 + rng.IntN(40) {
				sb.WriteString(words[rng.IntN(len(words))])
			}
			texts[i] = sb.String()
			if len(texts[i]) >= prefilterAt {
				long++
			}
		}
		want := reference(texts)
		if got := set.Input(texts); got != want {
			t.Fatalf("input %q: the check says %q, running every rule says %q", texts, got, want)
		}
		if want != "" && !strings.HasPrefix(want, "allow") {
			blocked++
		}
	}
	if blocked < inputs/10 || long < inputs/10 {
		t.Fatalf("%d of %d inputs blocked, %d long texts: the test does not exercise the rules", blocked, inputs, long)
	}
}

// BenchmarkInputWithAnImage checks a call's input that holds a 5 MB data:
// URL (a screenshot) against the gateway benchmark's guardrail and two
// more (its literals are searched for; the rules are not run over it).
//
//	go test ./internal/guard -run '^$' -bench InputWithAnImage -benchmem
func BenchmarkInputWithAnImage(b *testing.B) {
	set, err := Compile(model.Guardrails{Deny: []string{`(?i)\bpassword\s*[:=]`, `TOPSECRET-[0-9]+`, `sk-[a-zA-Z0-9]{20,}`}}, "chat", model.Guardrails{})
	if err != nil {
		b.Fatal(err)
	}
	input := []string{"what is on this screen?", "data:image/png;base64," + strings.Repeat("iVBORw0KGgoAAAANSUhEUgAA", 5<<20/24)}
	b.ReportAllocs()
	for b.Loop() {
		if set.Input(input) != "" {
			b.Fatal("blocked")
		}
	}
}
