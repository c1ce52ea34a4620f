package sqlite

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/quotashare/quotashare"
)

// BenchmarkCommitJobs commits batches of 90 new job records (900 bytes each, about a
// submitted job's) into a store that already holds 100,000, keyed by random UUIDs (v4)
// or by time-ordered ones (v7, whose first 48 bits are the milliseconds): how much the
// keys' order costs a group commit.
func BenchmarkCommitJobs(b *testing.B) {
	body := []byte(`{"payload":"` + strings.Repeat("x", 880) + `"}`)
	for _, kind := range []string{"v4", "v7"} {
		b.Run(kind, func(b *testing.B) {
			d, err := Open(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			defer d.Close()
			lease, err := d.Acquire(b.Context(), quotashare.LeaseHolder{ID: "b"})
			if err != nil {
				b.Fatal(err)
			}
			ms := time.Now().UnixMilli()
			key := func() string {
				var k [16]byte
				rand.Read(k[:])
				if kind == "v7" {
					ms++
					var t [8]byte
					binary.BigEndian.PutUint64(t[:], uint64(ms))
					copy(k[:6], t[2:])
				}
				return fmt.Sprintf("%x-%x-%x-%x-%x", k[0:4], k[4:6], k[6:8], k[8:10], k[10:16])
			}
			batch := func() []quotashare.Record {
				rs := make([]quotashare.Record, 90)
				for i := range rs {
					rs[i] = quotashare.Record{Kind: "job", Key: key(), Body: body}
				}
				return rs
			}
			for range 100_000 / 90 {
				if err := d.Commit(b.Context(), lease, batch()); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for b.Loop() {
				b.StopTimer()
				rs := batch()
				b.StartTimer()
				if err := d.Commit(b.Context(), lease, rs); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
