package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"
	"time"
)

// Sentinels that an *Error matches with errors.Is.
var (
	// ErrStaleAttempt: the server has moved past this attempt of the task
	// (the lease was lost, the task was requeued, aborted or finished). A
	// worker drops the task and never retries the report.
	ErrStaleAttempt = errors.New("stale attempt")
	// ErrUnauthorized: the worker credential was refused (unknown or
	// revoked).
	ErrUnauthorized = errors.New("worker credential refused")
)

// Error is a refusal or failure the control plane answered with.
type Error struct {
	Status       int
	Code         string
	Message      string
	Method, Path string
	// RetryAfter is the server's Retry-After, when it sent one.
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	if e.Code != "" {
		return fmt.Sprintf("%s %s: %d %s: %s", e.Method, e.Path, e.Status, e.Code, msg)
	}
	return fmt.Sprintf("%s %s: %d: %s", e.Method, e.Path, e.Status, msg)
}

// Is matches ErrStaleAttempt for 409 and ErrUnauthorized for 401.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrStaleAttempt:
		return e.Status == http.StatusConflict
	case ErrUnauthorized:
		return e.Status == http.StatusUnauthorized
	}
	return false
}

// NetError is a request that got no answer: the control plane could not be
// reached, reset the connection, or did not answer in time.
type NetError struct {
	Op  string
	Err error
}

func (e *NetError) Error() string { return e.Op + ": " + e.Err.Error() }
func (e *NetError) Unwrap() error { return e.Err }

// IsTransient reports whether a call may succeed if tried again later: the
// control plane was unreachable or overloaded (no answer, 5xx, 429, 408).
// A refusal (other 4xx) or the caller giving up is not transient.
func IsTransient(err error) bool {
	if err == nil {
		return false
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Status >= 500 || e.Status == http.StatusTooManyRequests || e.Status == http.StatusRequestTimeout
	}
	if errors.Is(err, context.Canceled) {
		return false
	}
	var ne *NetError
	if errors.As(err, &ne) {
		return true
	}
	var opErr *net.OpError
	return errors.As(err, &opErr) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}
