package dispatch

import (
	"context"
	"runtime"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/control"
)

// loadBatch is how many records go to a decoding goroutine at once.
const loadBatch = 512

// loadParallel reads the store and hands its records to fn in the store's order, each
// decoded beforehand (control.Predecode) on one of GOMAXPROCS goroutines while the store
// reads on: a restart's JSON decoding, most of its work, then uses every core. fn runs on
// the calling goroutine. progress, if set, hears how many records fn has taken so far,
// after each batch.
func loadParallel(ctx context.Context, store quotashare.Store, fn func(control.Loaded) error, progress func(int)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type batch struct {
		recs []quotashare.Record
		out  chan []control.Loaded
	}
	workers := runtime.GOMAXPROCS(0)
	work := make(chan batch, 2*workers)
	order := make(chan batch, 4*workers)
	var readErr error
	go func() {
		defer close(order)
		defer close(work)
		cur := make([]quotashare.Record, 0, loadBatch)
		send := func() error {
			b := batch{recs: cur, out: make(chan []control.Loaded, 1)}
			cur = make([]quotashare.Record, 0, loadBatch)
			// To a worker first: a batch in order is then always decoded.
			select {
			case work <- b:
			case <-ctx.Done():
				return ctx.Err()
			}
			select {
			case order <- b:
			case <-ctx.Done():
				return ctx.Err()
			}
			return nil
		}
		readErr = store.Load(ctx, func(r quotashare.Record) error {
			if cur = append(cur, r); len(cur) == loadBatch {
				return send()
			}
			return nil
		})
		if readErr == nil && len(cur) > 0 {
			readErr = send()
		}
	}()
	for range workers {
		go func() {
			for b := range work {
				out := make([]control.Loaded, len(b.recs))
				for i, r := range b.recs {
					out[i] = control.Predecode(r)
				}
				b.out <- out
			}
		}()
	}
	n := 0
	for b := range order {
		for _, l := range <-b.out {
			if err := fn(l); err != nil {
				cancel()
				for range order { // let the reader finish
				}
				return err
			}
		}
		n += len(b.recs)
		if progress != nil {
			progress(n)
		}
	}
	return readErr // set before order was closed
}
