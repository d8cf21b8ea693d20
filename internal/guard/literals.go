package guard

import (
	"regexp/syntax"
	"strings"
	"unicode"
	"unicode/utf8"
)

// A stream is checked at every chunk against the end of what came before
// (overlap), so a long answer would otherwise run every deny pattern over
// up to 4 KiB again at each of its hundreds of chunks: for case-insensitive
// patterns, whose scan Go's regexp cannot speed up with a literal prefix,
// that was most of the CPU a streamed call cost. Most deny patterns name a
// word (password, api key, a codename) that every match must contain; a
// stream whose recent output contains none of a rule's words cannot match
// it, and looking for a word is a plain substring search. So each rule
// keeps the literals one of which every match contains (needs), and a
// stream keeps its recent output folded (see fold) to look for them in.

// needs returns literals, folded, at least one of which every match of re
// contains; nil when there is no such set (the rule is then always run).
func needs(re *syntax.Regexp) []string {
	switch re.Op {
	case syntax.OpLiteral:
		return []string{fold(string(re.Rune))}
	case syntax.OpCapture, syntax.OpPlus:
		return needs(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return needs(re.Sub[0])
		}
	case syntax.OpConcat:
		// Any one part's literals will do: take the part whose shortest
		// literal is longest, as the most selective.
		var best []string
		for _, sub := range re.Sub {
			if l := needs(sub); shortest(l) > shortest(best) {
				best = l
			}
		}
		return best
	case syntax.OpAlternate:
		// A match is one branch's: every branch must need a literal.
		var all []string
		for _, sub := range re.Sub {
			l := needs(sub)
			if l == nil {
				return nil
			}
			all = append(all, l...)
		}
		return all
	}
	return nil
}

func shortest(l []string) int {
	if len(l) == 0 {
		return 0
	}
	n := len(l[0])
	for _, s := range l[1:] {
		n = min(n, len(s))
	}
	return n
}

// fold maps each rune of s to the least rune that case folding makes
// equal to it (s, S and ſ all to S): text that matches a literal, in any
// case a case-insensitive pattern allows, folds to the literal folded. A
// case-sensitive literal is folded too, which only lets more text by.
func fold(s string) string {
	var sb strings.Builder
	sb.Grow(len(s))
	for _, r := range s {
		sb.WriteRune(foldRune(r))
	}
	return sb.String()
}

// appendFold appends s folded to dst.
func appendFold(dst []byte, s string) []byte {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			dst = append(dst, asciiFold[c])
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		dst = utf8.AppendRune(dst, foldRune(r))
		i += n
	}
	return dst
}

// foldRune is the least rune of r's case folding orbit.
func foldRune(r rune) rune {
	if r < utf8.RuneSelf {
		return rune(asciiFold[r])
	}
	least := r
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		least = min(least, f)
	}
	return least
}

// asciiFold is foldRune for ASCII (whose orbits' least runes are ASCII).
var asciiFold = func() (t [utf8.RuneSelf]byte) {
	for c := range t {
		least := rune(c)
		for f := unicode.SimpleFold(rune(c)); f != rune(c); f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		t[c] = byte(least)
	}
	return t
}()
