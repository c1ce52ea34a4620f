package quotashare

import (
	"errors"
	"io/fs"
	"testing"
)

// TestErrorWraps: an *Error made with %w keeps what it wraps reachable (errors.Is and
// errors.As), keeps its own kind outermost, and reads as fmt.Errorf would write it.
func TestErrorWraps(t *testing.T) {
	inner := Errorf(NotFound, "job %s: no such job", "x")
	err := Errorf(Invalid, "jobId: %w (and %w)", inner, fs.ErrNotExist)
	if got, want := err.Error(), "jobId: job x: no such job (and file does not exist)"; got != want {
		t.Errorf("message %q, want %q", got, want)
	}
	if KindOf(err) != Invalid {
		t.Errorf("kind %v, want the outer Invalid", KindOf(err))
	}
	if !errors.Is(err, fs.ErrNotExist) || !errors.Is(err, inner) {
		t.Errorf("errors.Is does not reach what the error wraps")
	}
	var e *Error
	if !errors.As(errors.Unwrap(err), &e) || e != inner {
		t.Errorf("errors.As below the outer error: %v", e)
	}
	if plain := Errorf(Conflict, "queue %s is DISABLED", "q"); errors.Unwrap(plain) != nil {
		t.Errorf("an error without %%w wraps %v", errors.Unwrap(plain))
	}
}
