package engine

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/strata-db/strata/internal/vfs"
	"github.com/strata-db/strata/lsm"
)

// TestOpEntryKindEveryOp: a bulk replay knows the entry kind of every OpKind (a new OpKind
// fails here until bulk.go maps it to the entry the FreshTable makes of it), and refuses an
// unknown one.
func TestOpEntryKindEveryOp(t *testing.T) {
	for k := OpKind(1); k < numOpKinds; k++ {
		if _, ok := opEntryKind(k); !ok {
			t.Errorf("OpKind %v has no entry kind for a bulk replay (bulk.go, opEntryKind)", k)
		}
	}
	for _, k := range []OpKind{0, numOpKinds, 255} {
		if _, ok := opEntryKind(k); ok {
			t.Errorf("OpKind %d: an entry kind for an unknown op", k)
		}
	}
}

// BenchmarkBulkReplay: the bulk replay of 200,000 value puts to 100,000 keys (100-byte
// values) into an empty Store on disk — sort, resolve, one L0 file written and installed;
// Collect excluded (ns/record is per record of the log) — with every record sorted and the
// Resolver dropping the superseded ones (replaykeep=false, what a restore does) or after
// replayKeep's pass (replaykeep=true).
func BenchmarkBulkReplay(b *testing.B) {
	const records, keys = 200_000, 100_000
	bt := benchPutLog(b, records, keys)
	for _, pre := range []bool{false, true} {
		b.Run(fmt.Sprintf("replaykeep=%v", pre), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				dir := b.TempDir() // an LsmStore at the log's last seq, as a restore leaves it
				if err := lsm.Import(lsm.Options{FS: vfs.Default(), Dir: filepath.Join(dir, "lsm"), Name: "lsm"}, nil, records, nil); err != nil {
					b.Fatal(err)
				}
				e := openTest(b, Options{Dir: dir})
				b.StartTimer()
				var keep []bool
				if pre {
					var err error
					if keep, err = replayKeep(bt, "bench"); err != nil {
						b.Fatal(err)
					}
				}
				if _, _, err := e.bulkReplay(context.Background(), bt, keep, "bench"); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				e.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*records), "ns/record")
		})
	}
}
