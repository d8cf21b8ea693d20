package model

import "time"

// IdempotencyKey records the first request a client made with a key, so
// that a retry of it (the client timed out, the answer was lost) returns
// the same result instead of creating a second object. A key is scoped to
// the tenant, the user and the operation it was used for.
type IdempotencyKey struct {
	TenantID  string
	UserID    string
	Operation string
	Key       string
	// RequestHash is a digest of the request: the same key sent with a
	// different request is refused.
	RequestHash string
	// ResultID is the id of the object the first request created.
	ResultID  string
	CreatedAt time.Time
}
