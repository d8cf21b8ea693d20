package identity

import "errors"

// ErrUnauthenticated is wrapped by every error that means "this credential
// does not identify anyone": unknown, revoked, expired, badly signed, or
// belonging to a disabled user. The HTTP layer answers such errors with 401.
//
// Failures of the control plane itself (the database or the identity
// provider's key endpoint cannot be reached) do not wrap it: the credential
// may be fine, and telling a client otherwise would make it throw a good
// credential away.
var ErrUnauthenticated = errors.New("unauthenticated")

// authError is an authentication failure with a short reason fit to show a
// person. The reason never contains the credential. The underlying cause is
// deliberately not part of the error chain, so that, say, a store.ErrNotFound
// behind "unknown credential" cannot be mistaken for a missing object (404)
// by a caller that checks errors.Is.
type authError struct{ reason string }

func (e *authError) Error() string { return e.reason }

func (e *authError) Unwrap() error { return ErrUnauthenticated }

// unauthenticated returns an error wrapping ErrUnauthenticated whose message
// is reason.
func unauthenticated(reason string) error { return &authError{reason: reason} }

// Reasons shown to people. They are fixed strings so that tests and clients
// can rely on them, and so that no credential can slip into one.
const (
	reasonMissing         = "missing credential"
	reasonUnknown         = "unknown credential"
	reasonTooLong         = "credential too long"
	reasonKeyRevoked      = "API key revoked"
	reasonKeyExpired      = "API key expired"
	reasonUserDisabled    = "user disabled"
	reasonUserUnknown     = "unknown user"
	reasonSignature       = "token signature invalid"
	reasonMalformed       = "token malformed"
	reasonAudience        = "token audience invalid"
	reasonIssuer          = "token issuer invalid"
	reasonClaimMissing    = "token missing a required claim"
	reasonKeyUnknown      = "token signing key unknown"
	reasonAlgKeyMismatch  = "token signing algorithm does not match its key"
	reasonAlgNotAllowed   = "token signing algorithm not allowed"
	reasonAccessExpired   = "access token expired"
	reasonAccessNotYet    = "access token not valid yet"
	reasonIdentityExpired = "identity token expired"
	reasonIdentityNotYet  = "identity token not valid yet"
	reasonLifetime        = "access token lifetime is longer than this control plane issues (KLIQUE_TOKEN_TTL); sign in again"
	reasonTokenSource     = "access token does not name the credential it was issued from; sign in again"
	reasonTokenKeyRevoked = "the API key this access token was issued from was revoked; sign in with another key"
	reasonTokenKeyExpired = "the API key this access token was issued from has expired; sign in with another key"
	reasonTokenKeyGone    = "the API key this access token was issued from no longer exists; sign in with another key"
	reasonScopeLost       = "the access token is scoped to a project its user may no longer use (no longer in the project's group, or the project is gone); sign in again"
)
