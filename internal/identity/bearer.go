package identity

import (
	"errors"
	"strings"
)

// Errors of ParseAuthorization. Each channel answers both with its own
// 401 and message; they are told apart for the channels that may want to
// say which, and for tests.
var (
	// ErrNotBearer: the Authorization header names another scheme
	// ("Basic ..."), or none.
	ErrNotBearer = errors.New("the Authorization header is not a bearer credential")
	// ErrEmptyCredential: the Authorization header is "Bearer" with
	// nothing after it.
	ErrEmptyCredential = errors.New("the Authorization header's bearer credential is empty")
)

// ParseAuthorization reads the value of an Authorization header (or of a
// WebSocket connection_init payload's) as a bearer credential, RFC 6750
// §2.1: "Bearer <credential>", the scheme matched case-insensitively, one
// space after it (more are tolerated), surrounding spaces trimmed. Every
// channel (GraphQL and the agent API, MCP, the gateway's /v1) parses the
// header here, so that they agree on what a credential is; each keeps its
// own answer to a header that is missing or wrong.
//
//   - "" (no header): "", nil. The caller decides whether a request
//     without a credential may go on.
//   - "Bearer <credential>": the credential, nil.
//   - "Bearer" and nothing else: "", ErrEmptyCredential.
//   - anything else ("Basic ...", a bare credential): "", ErrNotBearer.
func ParseAuthorization(v string) (credential string, err error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return "", nil
	}
	scheme, cred, _ := strings.Cut(v, " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "", ErrNotBearer
	}
	if cred = strings.TrimSpace(cred); cred == "" {
		return "", ErrEmptyCredential
	}
	return cred, nil
}
