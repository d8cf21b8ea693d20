package tasks

import (
	"fmt"
	"slices"
	"strings"
)

// MaxTags and MaxTagLength bound a task's tags: labels, not documents.
const (
	MaxTags      = 16
	MaxTagLength = 64
)

// ValidateTags checks a task's tags and returns them trimmed, without
// duplicates, in their first order. A tag is letters, digits, '-', '_',
// '.', ':' and '/', so that it reads the same in a URL, a shell and a
// trigger.
func ValidateTags(tags []string) ([]string, error) {
	var out []string
	for _, tag := range tags {
		tag = strings.TrimSpace(tag)
		if tag == "" {
			return nil, fmt.Errorf("a tag is empty: remove it")
		}
		if len(tag) > MaxTagLength {
			return nil, fmt.Errorf("tag %q is longer than %d characters", tag, MaxTagLength)
		}
		for _, c := range tag {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("-_.:/", c)) {
				return nil, fmt.Errorf("tag %q: use letters, digits, '-', '_', '.', ':' and '/'", tag)
			}
		}
		if !slices.Contains(out, tag) {
			out = append(out, tag)
		}
	}
	if len(out) > MaxTags {
		return nil, fmt.Errorf("%d tags: a task has at most %d", len(out), MaxTags)
	}
	return out, nil
}
