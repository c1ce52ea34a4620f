package sqlite

import (
	"context"
	"fmt"
	"testing"

	"github.com/quotashare/quotashare"
	"github.com/quotashare/quotashare/internal/storetest"
)

// TestConformance runs the store conformance suite on a real SQLite file; each handle is
// an Open of the same data folder, as a second server process would do.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) func() (quotashare.Store, error) {
		dir := t.TempDir()
		return func() (quotashare.Store, error) { return Open(dir) }
	})
}

// TestBackgroundCheckpoint: commits do not checkpoint (SQLite's automatic checkpoint is
// off); after checkpointEvery commits the background connection copies the WAL into the
// database without error, and everything committed is there after a reopen.
func TestBackgroundCheckpoint(t *testing.T) {
	dir := t.TempDir()
	d, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	var auto int
	if err := d.db.QueryRow(`PRAGMA wal_autocheckpoint`).Scan(&auto); err != nil || auto != 0 {
		t.Fatalf("wal_autocheckpoint = %d (%v), want 0", auto, err)
	}
	done := make(chan error, 16)
	d.mu.Lock()
	d.checkpointed = func(err error) { done <- err }
	d.mu.Unlock()
	ctx := context.Background()
	lease, err := d.Acquire(ctx, quotashare.LeaseHolder{ID: "t"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range checkpointEvery {
		if err := d.Commit(ctx, lease, []quotashare.Record{{Kind: "job", Key: fmt.Sprint(i), Body: []byte(`{}`)}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-done; err != nil { // the checkpoint the last commit asked for (or a tick's)
		t.Fatalf("checkpoint: %v", err)
	}
	d.Close()
	d, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	n := 0
	if err := d.Load(ctx, func(quotashare.Record) error { n++; return nil }); err != nil || n != checkpointEvery {
		t.Fatalf("after reopen: %d records (%v), want %d", n, err, checkpointEvery)
	}
}
