package batchapi

import (
	"fmt"
	"testing"

	"github.com/quotashare/quotashare"
)

// TestFieldPaths: a field the core names in its own terms reaches the wire as the field's
// path in the AWS request, through any wrapping, with the rest of the message kept.
func TestFieldPaths(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{quotashare.FieldErrorf(quotashare.FieldPriority, "10000 must be from 0 to 9999"), "schedulingPriority: 10000 must be from 0 to 9999"},
		{quotashare.Errorf(quotashare.Invalid, "serviceRequestPayload.ResourceConfig: %w",
			&quotashare.FieldError{Field: quotashare.FieldNeed, Index: 0, Part: quotashare.PartCount, Msg: "0 must be positive"}),
			"serviceRequestPayload.ResourceConfig: resourceConfig[0].maxCapacity: 0 must be positive"},
		{fmt.Errorf("quota share a: %w", &quotashare.FieldError{Field: quotashare.FieldLimits, Index: 1, Part: quotashare.PartType, Msg: "instance type x is listed twice"}),
			"quota share a: capacityLimits[1].capacityUnit: instance type x is listed twice"},
		{quotashare.FieldErrorf(quotashare.FieldMinRunTimeAgainstReclaim, "applies only with a minimum run time above 0 seconds"),
			"quotashareMinRunTime.againstReclaim: applies only with a minimum run time above 0 seconds"},
		{quotashare.Errorf(quotashare.Invalid, "jobQueue: %s does not exist", "q"), "jobQueue: q does not exist"},
	} {
		if got := message(c.err); got != c.want {
			t.Errorf("message(%q) = %q, want %q", c.err, got, c.want)
		}
	}
	// Every field the core has has a path.
	for f := quotashare.FieldJobID; f <= quotashare.FieldMinRunTimeAgainstReclaim; f++ {
		if fieldPaths[f] == "" {
			t.Errorf("field %v has no API path", f)
		}
	}
}
