// Package runenv holds the rules for the environment work runs in, as IT
// and users give it: environment variables (a task's own, and those of a
// compute resource) and the extra mounts of a compute resource's containers.
// The platform service (task specs), the estate validator (compute
// resources) and the worker daemon (what it is told to mount) all use it, so
// a value valid in one place is valid in the others and a credential is
// refused everywhere.
package runenv

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
)

// Bounds on one set of variables.
const (
	// MaxVars is the most variables one task or compute resource sets.
	MaxVars = 256
	// MaxNameLength bounds a variable's name.
	MaxNameLength = 128
	// MaxValueLength bounds a variable's value in bytes.
	MaxValueLength = 8192
)

var nameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ValidName reports whether name can be an environment variable: letters,
// digits and '_', not starting with a digit, at most MaxNameLength.
func ValidName(name string) bool {
	return len(name) <= MaxNameLength && nameRE.MatchString(name)
}

// credentialWords are the words of a parameter or variable name that say
// it holds a credential.
var credentialWords = map[string]bool{
	"password": true, "passwd": true, "pwd": true, "secret": true, "token": true, "apikey": true,
	"credential": true, "credentials": true, "privatekey": true, "accesskey": true,
}

// credentialValues are shapes of well-known credentials.
var credentialValues = regexp.MustCompile(`^(AKIA[0-9A-Z]{16}|gh[pousr]_[A-Za-z0-9]{30,}|sk-[A-Za-z0-9_-]{20,}|kqw?_[0-9A-Za-z]{40,}|xox[abprs]-[A-Za-z0-9-]{10,}|hf_[A-Za-z0-9]{30,}|glpat-[A-Za-z0-9_-]{20,})$|-----BEGIN [A-Z ]*PRIVATE KEY-----`)

// LooksLikeCredential reports whether a parameter or environment variable
// seems to carry a credential: by a word of its name (HF_TOKEN,
// db_password; not max_tokens or tokenizer), or by the shape of its value.
// Credentials belong in a vault, whose values are sealed, never read back
// and cut out of logs; a variable is stored and shown as written.
func LooksLikeCredential(key, value string) bool {
	if value == "" {
		return false
	}
	if credentialValues.MatchString(strings.TrimSpace(value)) {
		return true
	}
	words := strings.FieldsFunc(key, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	for i, w := range words {
		w = strings.ToLower(w)
		if credentialWords[w] {
			return true
		}
		if i+1 < len(words) && credentialWords[w+strings.ToLower(words[i+1])] {
			return true // api_key, access_key, private_key
		}
	}
	return false
}

// Bounds on mounts.
const (
	// MaxMounts is the most mounts one compute resource adds.
	MaxMounts = 32
	// MaxMountLength bounds one mount as written.
	MaxMountLength = 1024
)

// CheckMount says what is wrong with a mount written as docker -v writes
// it, /host/path:/container/path with an optional :ro or :rw, or returns
// nil. Both paths are absolute, hold no ".." component (the path is the one
// written, not somewhere above it), no comma (docker's --mount syntax
// splits on commas), no space and no control character; the container path
// is not "/".
func CheckMount(m string) error {
	if len(m) > MaxMountLength {
		return fmt.Errorf("mount is longer than %d characters", MaxMountLength)
	}
	if strings.ContainsFunc(m, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) || r == unicode.ReplacementChar }) {
		return fmt.Errorf("mount %q holds a space or a control character", m)
	}
	if strings.Contains(m, ",") {
		return fmt.Errorf("mount %q holds a comma", m)
	}
	parts := strings.Split(m, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return fmt.Errorf("mount %q must be /host/path:/container/path, optionally followed by :ro or :rw", m)
	}
	if len(parts) == 3 && parts[2] != "ro" && parts[2] != "rw" {
		return fmt.Errorf("mount %q ends in %q: the mode is ro (read-only) or rw (read-write)", m, parts[2])
	}
	for i, p := range parts[:2] {
		which := "host"
		if i == 1 {
			which = "container"
		}
		if !strings.HasPrefix(p, "/") {
			return fmt.Errorf("mount %q: the %s path %q must be absolute (start with /)", m, which, p)
		}
		for _, c := range strings.Split(p, "/") {
			if c == ".." {
				return fmt.Errorf("mount %q: the %s path %q must not hold a '..' component", m, which, p)
			}
		}
	}
	if strings.Trim(parts[1], "/") == "" {
		return fmt.Errorf("mount %q: the container path cannot be /", m)
	}
	return nil
}

// MountTarget is the container path of a mount CheckMount accepts.
func MountTarget(m string) string {
	parts := strings.Split(m, ":")
	if len(parts) < 2 {
		return ""
	}
	return strings.TrimRight(parts[1], "/")
}
