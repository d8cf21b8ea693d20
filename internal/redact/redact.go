// Package redact cuts the values of a task's secrets out of the text the
// task writes: log lines, metric names, outputs, the message of its end.
//
// A task that prints a secret rarely prints it verbatim on purpose; it
// prints it encoded (a base64 basic-auth header, a hex dump, a JSON body, a
// URL with the token in its query), case-folded, reversed, or cut over two
// lines. A redactor therefore matches, for each secret, a set of variants
// (see Variants) with one multi-pattern matcher (strings.Replacer, a trie),
// so the cost of a line stays linear in its length whatever the number of
// secrets (docs/performance.md has the figures).
//
// Values shorter than MinSecretLength are not redacted: replacing every
// "1", "on" or "yes" in a log would hide more than it protects.
package redact

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"slices"
	"strings"
)

// Redacted replaces a secret's value, in any of its forms.
const Redacted = "[redacted]"

// MinSecretLength is the shortest value redacted, and the shortest
// variant matched: shorter ones would match ordinary text.
const MinSecretLength = 4

// minOpenEnd is the shortest start of a variant redacted at the end of the
// last line of a batch (Lines): shorter ones, 4 hex digits say, end too
// many ordinary lines. At most minOpenEnd-1 bytes of a variant cut over
// two batches can thus reach the log.
const minOpenEnd = 6

// Redactor replaces every variant of a set of secret values with Redacted.
// The zero value and nil redact nothing. It is safe for concurrent use.
type Redactor struct {
	r        *strings.Replacer
	variants []string // longest first
	maxLen   int
}

// New returns a redactor for the values; values shorter than
// MinSecretLength are ignored.
func New(values ...string) *Redactor {
	seen := map[string]bool{}
	var vs []string
	for _, v := range values {
		for _, x := range Variants(v) {
			if !seen[x] {
				seen[x] = true
				vs = append(vs, x)
			}
		}
	}
	if len(vs) == 0 {
		return &Redactor{}
	}
	// Longest first: at a position the first pattern given that matches
	// wins, so a variant that contains another is replaced whole.
	slices.SortStableFunc(vs, func(a, b string) int { return len(b) - len(a) })
	pairs := make([]string, 0, 2*len(vs))
	for _, v := range vs {
		pairs = append(pairs, v, Redacted)
	}
	return &Redactor{r: strings.NewReplacer(pairs...), variants: vs, maxLen: len(vs[0])}
}

// Empty reports whether the redactor has nothing to cut.
func (r *Redactor) Empty() bool { return r == nil || r.r == nil }

// String redacts one piece of text.
func (r *Redactor) String(s string) string {
	if r.Empty() {
		return s
	}
	return r.r.Replace(s)
}

// Strings redacts each of a list, in place, and returns it.
func (r *Redactor) Strings(ss []string) []string {
	for i, s := range ss {
		ss[i] = r.String(s)
	}
	return ss
}

// Variants are the forms of a secret value a redactor matches: the value,
// its lines (a key file is logged a line at a time), upper- and lower-case,
// reversed, hex (both cases), base64 (standard and URL alphabets, padded or
// not, and the part of its encoding that does not depend on the bytes
// around it at each of the three byte alignments, so that a secret inside
// a longer base64 blob is found), percent-encoded (query, path and every
// byte) and JSON-escaped. Variants shorter than MinSecretLength are left
// out, and so is everything for a value shorter than it.
func Variants(v string) []string {
	if len(v) < MinSecretLength {
		return nil
	}
	var out []string
	add := func(xs ...string) {
		for _, x := range xs {
			if len(x) >= MinSecretLength && !slices.Contains(out, x) {
				out = append(out, x)
			}
		}
	}
	forms := []string{v}
	for _, l := range strings.Split(v, "\n") {
		if l = strings.TrimSpace(l); l != v {
			forms = append(forms, l)
		}
	}
	for _, f := range forms {
		if len(f) < MinSecretLength {
			continue
		}
		add(f, strings.ToUpper(f), strings.ToLower(f), reverse(f))
		add(hex.EncodeToString([]byte(f)), strings.ToUpper(hex.EncodeToString([]byte(f))))
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
			add(enc.EncodeToString([]byte(f)))
			add(embedded(enc.WithPadding(base64.NoPadding), f)...)
		}
		add(url.QueryEscape(f), url.PathEscape(f), percentAll(f, "%02X"), percentAll(f, "%02x"))
		// Some encoders escape '/' too.
		add(jsonEscape(f, true), jsonEscape(f, false), strings.ReplaceAll(jsonEscape(f, false), "/", `\/`))
	}
	return out
}

// embedded is the part of the base64 encoding of v that is the same
// whatever bytes come before and after it, for v starting at each of the
// three offsets of a 3-byte group.
func embedded(enc *base64.Encoding, v string) []string {
	out := make([]string, 0, 3)
	for k := 0; k < 3; k++ {
		e := enc.EncodeToString(append(make([]byte, k), v...))
		from, to := (8*k+5)/6, 8*(k+len(v))/6
		if to > len(e) {
			to = len(e)
		}
		if from < to {
			out = append(out, e[from:to])
		}
	}
	return out
}

func reverse(s string) string {
	b := []byte(s)
	slices.Reverse(b)
	return string(b)
}

// percentAll percent-encodes every byte of s, as some clients do.
func percentAll(s, format string) string {
	var b strings.Builder
	const digits = "0123456789ABCDEF"
	lower := format == "%02x"
	for i := 0; i < len(s); i++ {
		hi, lo := digits[s[i]>>4], digits[s[i]&15]
		if lower {
			hi, lo = toLower(hi), toLower(lo)
		}
		b.WriteByte('%')
		b.WriteByte(hi)
		b.WriteByte(lo)
	}
	return b.String()
}

func toLower(c byte) byte {
	if c >= 'A' && c <= 'F' {
		return c + 'a' - 'A'
	}
	return c
}

// jsonEscape is s as it appears inside a JSON string.
func jsonEscape(s string, html bool) string {
	var b strings.Builder
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(html)
	if err := e.Encode(s); err != nil {
		return s
	}
	out := strings.TrimSpace(b.String())
	return strings.TrimSuffix(strings.TrimPrefix(out, `"`), `"`)
}

// Lines redacts consecutive lines of one stream, catching a variant cut
// over a line boundary: tail is the last line of the stream before these
// (already stored; "" when none), used to find the rest of a secret whose
// start it holds. The lines are redacted in place; the returned tail is
// the (unredacted) last line, for the next call. A line that ends with the
// first minOpenEnd or more bytes of a variant has that end redacted
// too, since the rest may arrive in a later call, when this line is stored.
func (r *Redactor) Lines(tail string, lines []string) (next string) {
	if len(lines) == 0 {
		return tail
	}
	if r.Empty() {
		return lines[len(lines)-1]
	}
	n := len(lines)
	// cutHead[i]: bytes at the start of line i to redact; cutTail[i]:
	// bytes at its end.
	cutHead, cutTail := make([]int, n), make([]int, n)
	prev := tail
	for i, l := range lines {
		h, t := r.crossing(prev, l)
		cutHead[i] = max(cutHead[i], h)
		if i > 0 {
			cutTail[i-1] = max(cutTail[i-1], t)
		}
		prev = l
	}
	cutTail[n-1] = max(cutTail[n-1], r.openEnd(lines[n-1]))
	next = lines[n-1]
	for i, l := range lines {
		h, t := cutHead[i], cutTail[i]
		if h == 0 && t == 0 {
			lines[i] = r.String(l)
			continue
		}
		if h+t >= len(l) {
			lines[i] = Redacted
			continue
		}
		var b strings.Builder
		if h > 0 {
			b.WriteString(Redacted)
		}
		b.WriteString(r.String(l[h : len(l)-t]))
		if t > 0 {
			b.WriteString(Redacted)
		}
		lines[i] = b.String()
	}
	return next
}

// crossing finds variants that start in a and end in b (a line and the
// next, joined without the line break) and returns how many bytes of b's
// start and of a's end they cover.
func (r *Redactor) crossing(a, b string) (head, tail int) {
	if a == "" || b == "" {
		return 0, 0
	}
	w := r.maxLen - 1
	if len(a) > w {
		a = a[len(a)-w:]
	}
	if len(b) > w {
		b = b[:w]
	}
	joined := a + b
	for _, v := range r.variants {
		for from := 0; from < len(a); {
			i := strings.Index(joined[from:], v)
			if i < 0 {
				break
			}
			i += from
			if i >= len(a) {
				break
			}
			if end := i + len(v); end > len(a) {
				head = max(head, end-len(a))
				tail = max(tail, len(a)-i)
			}
			from = i + 1
		}
	}
	return head, tail
}

// openEnd is how many bytes at the end of s are the start (minOpenEnd
// bytes or more, but not all) of a variant.
func (r *Redactor) openEnd(s string) int {
	best := 0
	for _, v := range r.variants {
		for k := min(len(v)-1, len(s)); k >= minOpenEnd && k > best; k-- {
			if strings.HasSuffix(s, v[:k]) {
				best = k
				break
			}
		}
	}
	return best
}

// Quoted redacts a piece of text that quotes a task's output, such as the
// reason of a failure with its last line: every variant, as String does,
// and also any start or end of a variant of minOpenEnd bytes or more,
// wherever it appears. A quoted line may begin in the middle of a secret
// (the secret was cut over two lines, and the log redacts both halves as
// one stream) or end in it (the quote was cut to a length limit); String
// matches neither part alone. At most minOpenEnd-1 bytes of a variant can
// thus remain. The text should be redacted before it is cut, and may be
// again after.
func (r *Redactor) Quoted(s string) string {
	if r.Empty() {
		return s
	}
	s = r.String(s)
	for _, v := range r.variants {
		if len(v) <= minOpenEnd {
			continue
		}
		s = cutFragments(s, v)
	}
	return s
}

// cutFragments replaces, in s, each run that is a start or an end of v of
// minOpenEnd bytes or more with Redacted. It finds every place where v's
// first (or last) minOpenEnd bytes occur and grows the match from there, so
// its cost is linear in s for each occurrence, not quadratic in v.
func cutFragments(s, v string) string {
	type span struct{ from, to int }
	var spans []span
	head, tail := v[:minOpenEnd], v[len(v)-minOpenEnd:]
	for from := 0; from < len(s); {
		i := strings.Index(s[from:], head)
		if i < 0 {
			break
		}
		i += from
		n := minOpenEnd
		for n < len(v) && i+n < len(s) && s[i+n] == v[n] {
			n++
		}
		spans = append(spans, span{i, i + n})
		from = i + 1
	}
	for from := 0; from < len(s); {
		i := strings.Index(s[from:], tail)
		if i < 0 {
			break
		}
		i += from
		end := i + minOpenEnd
		n := minOpenEnd
		for n < len(v) && end-n-1 >= 0 && s[end-n-1] == v[len(v)-n-1] {
			n++
		}
		spans = append(spans, span{end - n, end})
		from = i + 1
	}
	if len(spans) == 0 {
		return s
	}
	slices.SortFunc(spans, func(a, b span) int { return a.from - b.from })
	var b strings.Builder
	at := 0
	for _, sp := range spans {
		if sp.to <= at {
			continue
		}
		if sp.from >= at {
			b.WriteString(s[at:sp.from])
			b.WriteString(Redacted)
		}
		at = sp.to
	}
	b.WriteString(s[at:])
	return b.String()
}
