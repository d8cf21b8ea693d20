package identity

import (
	"errors"
	"testing"
)

func TestParseAuthorization(t *testing.T) {
	for _, tc := range []struct {
		name, header string
		cred         string
		err          error
	}{
		{"absent", "", "", nil},
		{"only spaces", "   ", "", nil},
		{"bearer", "Bearer kq_abc", "kq_abc", nil},
		{"scheme in lower case", "bearer kq_abc", "kq_abc", nil},
		{"scheme in upper case", "BEARER kq_abc", "kq_abc", nil},
		{"spaces around the credential", "  Bearer   kq_abc  ", "kq_abc", nil},
		{"a JWT", "Bearer eyJhbGciOiJFZERTQSJ9.eyJpc3MiOiJ4In0.c2ln", "eyJhbGciOiJFZERTQSJ9.eyJpc3MiOiJ4In0.c2ln", nil},
		{"the scheme alone", "Bearer", "", ErrEmptyCredential},
		{"the scheme and a space", "Bearer ", "", ErrEmptyCredential},
		{"the scheme and spaces", "Bearer    ", "", ErrEmptyCredential},
		{"another scheme", "Basic YWxpY2U6c2VjcmV0", "", ErrNotBearer},
		{"a bare credential", "kq_abc", "", ErrNotBearer},
		{"a scheme that starts like bearer", "Bearerkq_abc", "", ErrNotBearer},
		{"a tab after the scheme", "Bearer\tkq_abc", "", ErrNotBearer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cred, err := ParseAuthorization(tc.header)
			if cred != tc.cred || !errors.Is(err, tc.err) || (err == nil) != (tc.err == nil) {
				t.Fatalf("ParseAuthorization(%q) = %q, %v; want %q, %v", tc.header, cred, err, tc.cred, tc.err)
			}
		})
	}
}
