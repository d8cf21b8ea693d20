package kernel

import (
	"errors"
	"fmt"

	"github.com/klique-ai/klique/internal/estate"
	"github.com/klique-ai/klique/internal/identity"
)

// Code classifies an error for every channel: GraphQL puts it in
// extensions.code, the CLI and MCP tools show the message, HTTP handlers map
// it to a status.
type Code string

// The codes every channel knows.
const (
	CodeUnauthenticated Code = "UNAUTHENTICATED"
	CodeForbidden       Code = "FORBIDDEN"
	CodeInvalid         Code = "BAD_USER_INPUT"
	CodeNotFound        Code = "NOT_FOUND"
	CodeConflict        Code = "CONFLICT"
	// CodeUnavailable: something the request needs is not set up or not
	// reachable now (a provider key missing from the vault).
	CodeUnavailable Code = "UNAVAILABLE"
	CodeInternal    Code = "INTERNAL"
)

// Error is an error a person can act on: its Message says what is wrong and
// what to change. It never holds secrets or internal details.
type Error struct {
	Code    Code
	Message string
	// Problems lists each problem when there are several (a whole estate
	// file), so that they can be shown one per line.
	Problems []string
	// Reason, when set, says which refusal this is in a word a program
	// can act on (GraphQL's extensions.reason), so that a client never
	// matches the message's text: the CLI puts its --project flag in a
	// ReasonProjectRequired refusal.
	Reason string
	err    error
}

// Reasons a client acts on (Error.Reason).
const (
	// ReasonProjectRequired: the work names no project and the caller has
	// no default project.
	ReasonProjectRequired = "PROJECT_REQUIRED"
)

func (e *Error) Error() string { return e.Message }

func (e *Error) Unwrap() error { return e.err }

// NewError returns an error with a code and a message made from format.
func NewError(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Unauthenticated: the caller is not signed in, or its credential no
// longer holds.
func Unauthenticated(format string, args ...any) *Error {
	return NewError(CodeUnauthenticated, format, args...)
}

// Forbidden: the caller may not do this.
func Forbidden(format string, args ...any) *Error { return NewError(CodeForbidden, format, args...) }

// Invalid: the input is wrong; the message says what to change.
func Invalid(format string, args ...any) *Error { return NewError(CodeInvalid, format, args...) }

// NotFound: no such object the caller may see.
func NotFound(format string, args ...any) *Error { return NewError(CodeNotFound, format, args...) }

// Conflict: the change clashes with the current state.
func Conflict(format string, args ...any) *Error { return NewError(CodeConflict, format, args...) }

// Unavailable: something the request needs is not set up or not reachable.
func Unavailable(format string, args ...any) *Error {
	return NewError(CodeUnavailable, format, args...)
}

// InvalidEstate turns an estate validation error into a BAD_USER_INPUT
// error listing every problem.
func InvalidEstate(err error) error {
	var ve *estate.ValidationError
	if !errors.As(err, &ve) {
		return err
	}
	e := &Error{Code: CodeInvalid, Message: ve.Error(), err: err}
	for _, p := range ve.Problems {
		e.Problems = append(e.Problems, p.String())
	}
	return e
}

// ErrorCode returns the code of err: the code of an *Error in its chain,
// UNAUTHENTICATED for an identity failure, INTERNAL otherwise.
func ErrorCode(err error) Code {
	var e *Error
	switch {
	case err == nil:
		return ""
	case errors.As(err, &e):
		return e.Code
	case errors.Is(err, identity.ErrUnauthenticated):
		return CodeUnauthenticated
	}
	return CodeInternal
}

// PublicMessage returns what may be shown to the caller for err: its message
// when it is a platform or identity error, and a generic sentence otherwise,
// so that internal details (SQL, file paths) never reach a user.
func PublicMessage(err error) string {
	var e *Error
	switch {
	case errors.As(err, &e):
		return e.Message
	case errors.Is(err, identity.ErrUnauthenticated):
		return err.Error()
	}
	return "internal error; the server log has the details"
}

// ErrRollback undoes a transaction without failing the operation: a dry
// run, or an engine pass whose lease was lost. Write returns it unlogged.
var ErrRollback = errors.New("rolled back")
