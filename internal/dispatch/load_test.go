package dispatch

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/control"
	"github.com/quotashare/quotashare/internal/storetest"
)

// TestLoadParallel: the records reach fn in the store's order, every one, over many
// batches, with progress after each batch; an error of fn stops the load and is returned,
// and no goroutine is left behind (synctest.Test fails on one still blocked).
func TestLoadParallel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := storetest.NewMemory()
		s := m.Open()
		lease, err := s.Acquire(context.Background(), quotashare.LeaseHolder{ID: "t"})
		if err != nil {
			t.Fatal(err)
		}
		const n = 5*loadBatch + 7
		var batch []quotashare.Record
		for i := range n {
			batch = append(batch, quotashare.Record{Kind: "job", Key: fmt.Sprintf("%06d", i), Body: []byte(`{"id":"x"}`)})
		}
		if err := s.Commit(context.Background(), lease, batch); err != nil {
			t.Fatal(err)
		}
		var keys []string
		var steps []int
		err = loadParallel(context.Background(), s, func(l control.Loaded) error {
			keys = append(keys, l.Key)
			return nil
		}, func(k int) { steps = append(steps, k) })
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) != n {
			t.Fatalf("%d records, want %d", len(keys), n)
		}
		for i, k := range keys {
			if k != fmt.Sprintf("%06d", i) {
				t.Fatalf("record %d is %s: out of order", i, k)
			}
		}
		if len(steps) != 6 || steps[5] != n {
			t.Fatalf("progress %v, want 6 steps ending at %d", steps, n)
		}

		stop := errors.New("stop")
		seen := 0
		err = loadParallel(context.Background(), s, func(control.Loaded) error {
			if seen++; seen == loadBatch+3 {
				return stop
			}
			return nil
		}, nil)
		if !errors.Is(err, stop) || seen != loadBatch+3 {
			t.Fatalf("after fn's error: %v, %d records taken", err, seen)
		}

		// The store's own error is returned too.
		s.Close()
		if err := loadParallel(context.Background(), s, func(control.Loaded) error { return nil }, nil); err == nil {
			t.Fatal("a closed store loaded without an error")
		}
	})
}
