package main

import (
	"strings"
	"testing"

	"github.com/quotashare/quotashare/internal/batchapi"
)

func view(name, strategy string, limit, inUse, borrowed int) shareView {
	return shareView{ShareNumbers: batchapi.ShareNumbers{QuotaShareName: name,
		Types: []batchapi.TypeNumbers{{CapacityUnit: "ml.g5.xlarge", Limit: limit, InUse: inUse, Borrowed: borrowed}}}, Strategy: strategy}
}

// TestSharesLentAndOverLimit: what borrowers hold shows as LENT against the lenders with
// the most unused first, and no longer as UNUSED; a RESERVE share's unused capacity is
// never lent; a share that does not borrow and holds more than a lowered limit shows
// "over N", not BORROWED, and says so under the table.
func TestSharesLentAndOverLimit(t *testing.T) {
	var b strings.Builder
	printShares(&b, []shareView{
		view("big", "LEND_AND_BORROW", 4, 7, 3), // borrows 3
		view("l1", "LEND", 2, 0, 0),             // 2 unused
		view("l2", "LEND", 3, 0, 0),             // 3 unused: lent first
		view("res", "RESERVE", 2, 0, 0),         // never lends
		view("low", "LEND", 1, 2, 1),            // over a lowered limit
	})
	want := `SHARE      STRATEGY        TYPE         LIMIT IN USE BORROWED LENT UNUSED QUEUED
big        LEND_AND_BORROW g5.xlarge        4      7        3    0      0      0
l1         LEND            g5.xlarge        2      0        0    0      2      0
l2         LEND            g5.xlarge        3      0        0    3      0      0
res        RESERVE         g5.xlarge        2      0        0    0      2      0
low        LEND            g5.xlarge        1      2   over 1    0      0      0
over limit: low holds 1 ml.g5.xlarge above its lowered limit of 1
lent: l2's 3 ml.g5.xlarge to big
LENT: held by borrowers (lending is one pool, shown on the largest lenders)
`
	if b.String() != want {
		t.Errorf("printed:\n%s\nwant:\n%s", b.String(), want)
	}
}
