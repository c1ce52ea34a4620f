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
}

func (e *Error) Error() string { return e.Msg }

// Errorf returns an *Error of the kind with a formatted message.
func Errorf(kind ErrorKind, format string, args ...any) error {
	return &Error{Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

// KindOf returns the kind of err: Internal unless err wraps an *Error.
func KindOf(err error) ErrorKind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return Internal
}
