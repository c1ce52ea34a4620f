package quotashare

import (
	"fmt"
	"regexp"
)

// Strategy says what a quota share does with capacity it does not use.
type Strategy string

// The three sharing strategies of AWS Batch quota shares.
const (
	// Reserve keeps idle capacity to the share: it neither lends nor borrows.
	Reserve Strategy = "RESERVE"
	// Lend lends idle capacity to borrowing shares and never borrows.
	Lend Strategy = "LEND"
	// LendAndBorrow lends idle capacity and may borrow others' idle capacity up to its borrow limit.
	LendAndBorrow Strategy = "LEND_AND_BORROW"
)

// Valid reports whether s is one of the three strategies.
func (s Strategy) Valid() bool { return s == Reserve || s == Lend || s == LendAndBorrow }

// Lends reports whether a share with this strategy lends its idle capacity.
func (s Strategy) Lends() bool { return s == Lend || s == LendAndBorrow }

// Borrows reports whether a share with this strategy may borrow.
func (s Strategy) Borrows() bool { return s == LendAndBorrow }

// UnlimitedBorrow is the borrowLimit that removes the cap on borrowing.
const UnlimitedBorrow = -1

// Demand is a number of instances of one instance type (AWS's capacityUnit and quantity).
type Demand struct {
	InstanceType string
	Count        int
}

// String renders the demand as "2 ml.g5.xlarge".
func (d Demand) String() string { return fmt.Sprintf("%d %s", d.Count, d.InstanceType) }

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// ValidName reports whether name is a valid resource name: 1..128 letters, digits, '-' or '_'.
func ValidName(name string) bool { return nameRE.MatchString(name) }

// MinPriority and MaxPriority bound a job's schedulingPriority.
const (
	MinPriority = 0
	MaxPriority = 9999
)
