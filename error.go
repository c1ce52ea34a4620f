package quotashare

import (
	"errors"
	"fmt"
)

// ErrorKind is the closed set of error kinds the API maps to its answers.
type ErrorKind int

// The error kinds.
const (
	// Internal is our own fault (ServerException).
	Internal ErrorKind = iota
	// Invalid is bad input: the message names the field and the rule (ClientException).
	Invalid
	// NotFound is a missing resource (ClientException).
	NotFound
	// Conflict is a request that contradicts the current state (ClientException).
	Conflict
)

// Error is an error of a known kind.
type Error struct {
	Kind ErrorKind
	Msg  string
	// cause is what the message wraps (its %w arguments), for errors.Is and errors.As.
	cause error
}

func (e *Error) Error() string { return e.Msg }

// Unwrap returns what the error wraps: the %w arguments of its Errorf, if any.
func (e *Error) Unwrap() error { return e.cause }

// Errorf returns an *Error of the kind with a message formatted as fmt.Errorf does: the
// arguments of %w verbs stay reachable through errors.Is and errors.As.
func Errorf(kind ErrorKind, format string, args ...any) error {
	w := fmt.Errorf(format, args...)
	e := &Error{Kind: kind, Msg: w.Error()}
	if w != nil && (errors.Unwrap(w) != nil || isMulti(w)) {
		e.cause = w
	}
	return e
}

// isMulti reports whether err wraps several errors (fmt.Errorf with more than one %w).
func isMulti(err error) bool {
	_, ok := err.(interface{ Unwrap() []error })
	return ok
}

// KindOf returns the kind of err: Internal unless err wraps an *Error.
func KindOf(err error) ErrorKind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return Internal
}
