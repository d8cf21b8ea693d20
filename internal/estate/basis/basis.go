// Package basis holds what every part of an estate shares: the Number an
// estate file's values are read as, the rules on names, descriptions,
// prices and currencies, and Problem, the reason an object is refused, with
// Problems, which collects them.
//
// It is a package of its own so that estate and the packages of its parts
// (llmconf, the gateway's configuration, which estate imports) state these
// once: a name is checked by one rule, an optional value is read one way
// and a problem reads the same wherever it is found.
package basis

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
)

// Bounds on values every part of an estate shares: far above any real
// estate, low enough to rule out typos and arithmetic overflow.
const (
	MaxNameLength        = 100
	MaxDescriptionLength = 2000
	// MaxPriceMicros bounds a price (per GPU-hour, per million tokens) in
	// millionths.
	MaxPriceMicros = 1_000_000_000_000
)

// DefaultCurrency is the currency of a price an estate file or an API call
// gives without one.
const DefaultCurrency = "USD"

var currencyRE = regexp.MustCompile(`^[A-Z]{3}$`)

// CheckName says what is wrong with an object name, or returns nil. Names may
// hold spaces ("multi-node training") but no control characters and no
// leading or trailing space.
func CheckName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("name is empty")
	case len(name) > MaxNameLength:
		return fmt.Errorf("name is longer than %d characters", MaxNameLength)
	case strings.TrimSpace(name) != name:
		return fmt.Errorf("name %q starts or ends with a space", name)
	}
	for _, r := range name {
		if unicode.IsControl(r) || r == unicode.ReplacementChar {
			return fmt.Errorf("name %q holds a control or invalid character", name)
		}
	}
	return nil
}

// CheckDescription says what is wrong with an object's description, or
// returns nil.
func CheckDescription(d string) error {
	if len(d) > MaxDescriptionLength {
		return fmt.Errorf("description is longer than %d characters", MaxDescriptionLength)
	}
	return nil
}

// CheckCurrency says what is wrong with the currency of a price, or
// returns nil.
func CheckCurrency(c string) error {
	if !currencyRE.MatchString(c) {
		return fmt.Errorf("currency %q must be a three-letter ISO code such as USD or EUR", c)
	}
	return nil
}

// DescribedTwice lists a problem for each object of a kind that a file
// describes more than once, by its key: a file describes each object once,
// whole, so a second description is a mistake rather than an update.
func DescribedTwice[T any](kind string, objects []T, key func(T) string) []Problem {
	var ps Problems
	seen := map[string]bool{}
	for _, o := range objects {
		k := key(o)
		ps.Once(seen, k, fmt.Sprintf("%s %q", kind, k), "appears twice in the file; describe each object once")
	}
	return ps
}
