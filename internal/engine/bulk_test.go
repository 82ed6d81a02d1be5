package engine

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-db/strata/changelog"
	"github.com/strata-db/strata/internal/base"
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

// TestSplitBulkParts: a batch splits by key-group range into parts of about equal record
// counts (invariant 30) — whatever part of the key groups its records use, with no empty part
// and a heavy key group never cut — each part keeping its records' newest-first order, and a
// batch of one key group stays one part.
func TestSplitBulkParts(t *testing.T) {
	const maxPar = 64
	e := &Engine{stride: base.Stride(maxPar)}
	cases := []struct {
		name string
		kgs  func(i int) uint16 // the key group of record i
		want int                // parts
	}{
		{"uniform", func(i int) uint16 { return uint16(i % maxPar) }, 3},
		{"lower half", func(i int) uint16 { return uint16(i % (maxPar / 2)) }, 3},
		{"upper quarter", func(i int) uint16 { return uint16(maxPar - 1 - i%(maxPar/4)) }, 3},
		{"one key group", func(int) uint16 { return 17 }, 1},
		{"two key groups", func(i int) uint16 { return uint16(5 + 30*(i%2)) }, 2},
		{"one heavy key group", func(i int) uint16 { return uint16(max(0, i%40-30)) }, 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			const n = 6000
			recs, tmp := make([]segRec, n), make([]segRec, n)
			hist := make([]int32, 1<<16)
			for i := range recs {
				kg := c.kgs(i)
				recs[i] = segRec{order: base.OrderHash(kg, e.stride, uint64(i)*0x9e3779b97f4a7c15), off: uint32(i)}
				hist[kg]++
			}
			var parts [maxBulkParts]bulkPart
			k := e.splitBulkParts(recs, tmp, hist, parts[:3])
			if k != c.want {
				t.Fatalf("%d parts, want %d", k, c.want)
			}
			if k == 1 {
				return
			}
			total := 0
			lastKG := -1
			for i, pt := range parts[:k] {
				if len(pt.recs) == 0 || len(pt.recs) != len(pt.tmp) {
					t.Fatalf("part %d: %d records, %d scratch", i, len(pt.recs), len(pt.tmp))
				}
				total += len(pt.recs)
				lo, hi := 1<<16, -1
				for j, r := range pt.recs {
					kg := int(base.KeyGroupOfOrder(r.order, e.stride))
					lo, hi = min(lo, kg), max(hi, kg)
					if j > 0 && r.off <= pt.recs[j-1].off {
						t.Fatalf("part %d: record %d after %d: order of the batch lost", i, r.off, pt.recs[j-1].off)
					}
				}
				if lo <= lastKG {
					t.Fatalf("part %d holds key groups %d..%d, the part before up to %d", i, lo, hi, lastKG)
				}
				lastKG = hi
			}
			if total != n {
				t.Fatalf("%d records in the parts, want %d", total, n)
			}
			if c.name == "uniform" || c.name == "lower half" || c.name == "upper quarter" {
				for i, pt := range parts[:k] {
					if d := len(pt.recs) - n/k; d < -n/10 || d > n/10 {
						t.Errorf("part %d: %d records of %d in %d parts", i, len(pt.recs), n, k)
					}
				}
			}
		})
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
				if _, _, err := e.bulkReplay(context.Background(), bt, keep, "bench", true); err != nil {
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

// TestBulkSourceTouch pins bulkSource.Touch to what it must load: the first byte of record i
// (a changelog record's kind; a bulk load change's key), for a Batch, for BulkEntries and
// through shiftedSource, so the touches of a bulk replay land on the records it decodes next.
// The kinds and first key bytes vary from record to record, so a touch of another record
// gives another byte.
func TestBulkSourceTouch(t *testing.T) {
	const records = 3000
	kinds := []OpKind{OpPut, OpDelete, OpListAppend, OpListDelete}
	bt := memTail(t, records, func(l *changelog.Log, w *changelog.Writer) error {
		for i := range records {
			k, _ := testKey(1, u64(uint64(i%700)))
			kind := kinds[(i*7+i/3)%len(kinds)]
			var v []byte
			if kind == OpPut || kind == OpListAppend {
				v = []byte{byte(i)}
			}
			if err := l.Append(uint8(kind), uint16(k[0])<<8|uint16(k[1]), uint64(i+1), k, nil, v); err != nil {
				return err
			}
			if i%1000 == 999 { // several objects: several spans
				if _, err := w.Persist(context.Background()); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if bt.Len() != records {
		t.Fatalf("collected %d records of %d", bt.Len(), records)
	}
	var be BulkEntries
	for i := range 70_000 { // more than one ref chunk (bulkRefBits)
		be.Add(Op{Kind: OpPut, Key: []byte{byte(i * 13), byte(i), 1, 2}, Value: []byte{byte(i)}})
	}
	var r changelog.Record
	for _, src := range []bulkSource{bt, &be, shiftedSource{src: &be, base: 5}} {
		for i := range src.Len() {
			if err := src.Record(i, &r); err != nil {
				t.Fatal(err)
			}
			want := r.Key[0]
			if _, ok := src.(*changelog.Batch); ok {
				want = r.Kind
			}
			if got := src.Touch(i); got != want {
				t.Fatalf("%T.Touch(%d) = %d, want %d", src, i, got, want)
			}
		}
	}
}

// TestForEachLanesPanic: a panic on the calling goroutine's lane (lane 0) is its error, as on
// the other lanes, and forEachLanes returns only after every lane ended — what the lanes read
// (a Batch's off-heap buffer, the sort buffers) is released by the caller right after.
func TestForEachLanesPanic(t *testing.T) {
	e := openTest(t, Options{Workers: 2})
	var running, done atomic.Int64
	me := goroutineID()
	err := e.forEachLanes("test", 8, 3, func(i int) error {
		running.Add(1)
		defer done.Add(1)
		if goroutineID() == me { // lane 0: panics once every lane is inside f
			for deadline := time.Now().Add(10 * time.Second); running.Load() < 3 && time.Now().Before(deadline); {
				runtime.Gosched()
			}
			panic("lane 0")
		}
		time.Sleep(20 * time.Millisecond)
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "panicked: lane 0") {
		t.Fatalf("forEachLanes with a panic on its owner's lane = %v", err)
	}
	if r, d := running.Load(), done.Load(); r != d {
		t.Fatalf("forEachLanes returned with %d of %d calls still running", r-d, r)
	}
}

// goroutineID is the calling goroutine's number, from its stack header ("goroutine N [").
func goroutineID() string {
	var b [64]byte
	f := strings.Fields(string(b[:runtime.Stack(b[:], false)]))
	return f[1]
}
