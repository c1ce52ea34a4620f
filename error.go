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

// Field is what a FieldError is about, in the scheduler's own terms. The core
// (internal/sched) knows no wire names; the API renders each as its field path
// (internal/batchapi: schedulingPriority, capacityLimits[0].maxCapacity, ...).
type Field int

// The fields the core checks.
const (
	FieldJobID                    Field = iota + 1 // a job's id
	FieldPriority                                  // a job's priority
	FieldNeed                                      // what a job needs: Index and Part say which demand and what of it
	FieldLimits                                    // a share's or environment's capacity limits: Index and Part as FieldNeed's
	FieldShare                                     // the share a job names, or a share's own name
	FieldStrategy                                  // a share's sharing strategy
	FieldBorrowLimit                               // a share's borrow limit
	FieldMinRunTime                                // a share's minimum run time
	FieldMinRunTimeAgainstReclaim                  // whether it also protects against reclaims
)

var fieldNames = map[Field]string{FieldJobID: "job id", FieldPriority: "priority", FieldNeed: "need", FieldLimits: "limits",
	FieldShare: "share", FieldStrategy: "strategy", FieldBorrowLimit: "borrow limit", FieldMinRunTime: "minimum run time",
	FieldMinRunTimeAgainstReclaim: "minimum run time against reclaims"}

func (f Field) String() string { return fieldNames[f] }

// Part is what of one demand (an instance type and a count) a FieldError is about.
type Part int

// The parts of a demand.
const (
	PartNone  Part = iota // the field as a whole
	PartType              // the instance type
	PartCount             // the count
)

// FieldError is bad input the core refuses: the field, which element of a list (Index,
// with Part; -1 for the field as a whole), and the rule it breaks (Msg, which names no
// field). Its kind is Invalid.
type FieldError struct {
	Field Field
	Index int
	Part  Part
	Msg   string
}

// FieldErrorf returns a *FieldError about the field as a whole.
func FieldErrorf(f Field, format string, args ...any) error {
	return &FieldError{Field: f, Index: -1, Msg: fmt.Sprintf(format, args...)}
}

// Error is the core's own rendering: "priority: 10000 must be from 0 to 9999",
// "limits[0].count: -1 must be positive".
func (e *FieldError) Error() string {
	return e.Path(e.Field.String(), "type", "count") + ": " + e.Msg
}

// Path names the field as field[index].part, in another vocabulary: the field's name and
// those of a demand's two parts (the API's "capacityLimits", "capacityUnit",
// "maxCapacity").
func (e *FieldError) Path(field, typePart, countPart string) string {
	if e.Index >= 0 {
		field += fmt.Sprintf("[%d]", e.Index)
	}
	switch e.Part {
	case PartType:
		field += "." + typePart
	case PartCount:
		field += "." + countPart
	}
	return field
}
