package sqlite

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/quotashare/quotashare"
)

func load(t *testing.T, d *DB) []quotashare.Record {
	t.Helper()
	var got []quotashare.Record
	if err := d.Load(func(r quotashare.Record) error { got = append(got, r); return nil }); err != nil {
		t.Fatal(err)
	}
	return got
}

func TestCommitLoadReopen(t *testing.T) {
	dir := t.TempDir()
	d, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(d.Commit([]quotashare.Record{
		{Kind: "job", Key: "b", Body: []byte(`{"n":1}`)},
		{Kind: "job", Key: "a", Body: []byte(`{"n":2}`)},
		{Kind: "share", Key: "s", Body: []byte(`{}`)},
	}))
	must(d.Commit([]quotashare.Record{
		{Kind: "job", Key: "b", Body: []byte(`{"n":3}`)}, // update
		{Kind: "share", Key: "s"},                        // delete
		{Kind: "share", Key: "never"},                    // delete of nothing is fine
	}))
	must(d.Close())

	d, err = Open(dir) // reopen: the schema is not migrated twice, the data is there
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	want := []quotashare.Record{
		{Kind: "job", Key: "a", Body: []byte(`{"n":2}`)},
		{Kind: "job", Key: "b", Body: []byte(`{"n":3}`)},
	}
	if diff := cmp.Diff(want, load(t, d)); diff != "" {
		t.Fatalf("after reopen (-want +got):\n%s", diff)
	}
}

func TestLoadStopsOnError(t *testing.T) {
	d, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Commit([]quotashare.Record{{Kind: "k", Key: "1", Body: []byte("x")}, {Kind: "k", Key: "2", Body: []byte("y")}}); err != nil {
		t.Fatal(err)
	}
	n := 0
	err = d.Load(func(quotashare.Record) error { n++; return fmt.Errorf("stop") })
	if err == nil || n != 1 {
		t.Fatalf("Load = %v after %d records, want the callback's error after 1", err, n)
	}
}
