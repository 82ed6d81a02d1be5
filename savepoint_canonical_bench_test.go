package strata

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/strata-db/strata/checkpoint"
	"github.com/strata-db/strata/internal/engine"
)

// The restore benchmarks' state: value puts of restoreBenchKeyLen-byte keys and
// restoreBenchValLen-byte values into one value state "v".
const restoreBenchKeyLen, restoreBenchValLen = 14, 64

// BenchmarkCanonicalRestore: Restore of a canonical savepoint of one value state (14-byte
// keys, 64-byte values; state= its logical bytes) into one Store, its entries written in bulk
// (path=bulk: engine.BulkLoad, L0 files) or through Apply (path=apply:
// engine.Options.ReplayByApply, the path before the bulk load), in the same binary and run.
// The savepoint is written once per run of the benchmark function (not timed). Reported as
// benchRestorePaths says. Restore's persist waits for the background work it started;
// compactions of a bulk load's L0 files start after Restore (engine.BulkLoad).
//
//	go test -run '^$' -bench 'BenchmarkCanonicalRestore/state=64MiB' -benchtime 1x -count 6 .
func BenchmarkCanonicalRestore(b *testing.B) {
	for _, size := range []int{64 << 20, 256 << 20} {
		b.Run(fmt.Sprintf("state=%dMiB", size>>20), func(b *testing.B) {
			keys := size / (restoreBenchKeyLen + restoreBenchValLen)
			dir := b.TempDir()
			sp, err := checkpoint.NewDirStorage(filepath.Join(dir, "sp"))
			if err != nil {
				b.Fatal(err)
			}
			opts := Options{MaxParallelism: 128, MemoryBudget: 128 << 20, SegmentSize: 16 << 20,
				Checkpoint: CheckpointOptions{Storage: sp, Owner: "bench"}}
			s := restoreBenchStore(b, filepath.Join(dir, "src"), opts, keys)
			h, err := s.Savepoint(context.Background(), sp, SavepointCanonical, 1, nil)
			if err != nil {
				b.Fatal(err)
			}
			if err := s.Close(); err != nil {
				b.Fatal(err)
			}
			os.RemoveAll(filepath.Join(dir, "src"))
			benchRestorePaths(b, dir, opts, sp, h, keys, func(rs RestoreStats) int64 { return rs.CanonicalEntries })
		})
	}
}

// BenchmarkChangelogRestorePath: Restore of a changelog checkpoint whose log tail holds the
// whole state of one value state (14-byte keys, 64-byte values; state= its logical bytes, one
// put per key) over an empty materialization, the tail replayed in bulk (path=bulk: sorted,
// resolved, written as L0 files; engine bulk.go) or through Apply record by record (path=apply:
// engine.Options.ReplayByApply, the replay before the bulk one), in the same binary and run.
// The checkpoint is written once per run of the benchmark function (not timed). Reported as
// benchRestorePaths says. bench/suite's BenchmarkChangelogRestore measures the bulk replay
// on the suite's loaded Stores (its changelog=on row).
//
//	go test -run '^$' -bench 'BenchmarkChangelogRestorePath/state=64MiB' -benchtime 1x -count 6 .
func BenchmarkChangelogRestorePath(b *testing.B) {
	for _, size := range []int{64 << 20} {
		b.Run(fmt.Sprintf("state=%dMiB", size>>20), func(b *testing.B) {
			ctx := context.Background()
			keys := size / (restoreBenchKeyLen + restoreBenchValLen)
			dir := b.TempDir()
			st, err := checkpoint.NewDirStorage(filepath.Join(dir, "checkpoints"))
			if err != nil {
				b.Fatal(err)
			}
			opts := Options{MaxParallelism: 128, MemoryBudget: 128 << 20, SegmentSize: 16 << 20,
				Checkpoint: CheckpointOptions{Storage: st, Owner: "bench",
					Changelog: &ChangelogOptions{MaterializationInterval: -1}}}
			s := restoreBenchStore(b, filepath.Join(dir, "src"), opts, 0)
			if _, err := s.Checkpoint(ctx, 1, nil); err != nil { // the materialization: empty
				b.Fatal(err)
			}
			if err := s.NotifyCheckpointComplete(1); err != nil {
				b.Fatal(err)
			}
			restoreBenchPuts(b, s, keys)
			h, err := s.Checkpoint(ctx, 2, nil)
			if err != nil {
				b.Fatal(err)
			}
			if h.Stats.MemoryBytes != 0 {
				b.Fatalf("checkpoint 2 is not a changelog checkpoint: %+v", h.Stats)
			}
			if err := s.Close(); err != nil {
				b.Fatal(err)
			}
			os.RemoveAll(filepath.Join(dir, "src"))
			benchRestorePaths(b, dir, opts, st, h, keys, func(rs RestoreStats) int64 { return rs.ChangelogRecords })
		})
	}
}

// restoreBenchStore opens a Store over dir with opts and puts keys values into its value
// state "v" (restoreBenchPuts).
func restoreBenchStore(b *testing.B, dir string, opts Options, keys int) *Store {
	s, err := Open(dir, opts)
	if err != nil {
		b.Fatal(err)
	}
	restoreBenchPuts(b, s, keys)
	return s
}

// restoreBenchPuts puts keys values of restoreBenchValLen bytes under the keys
// "key-%010d" (restoreBenchKeyLen bytes) into s's value state "v".
func restoreBenchPuts(b *testing.B, s *Store, keys int) {
	v := must(NewValueState(s, ValueDescriptor[[]byte]{Name: "v", Codec: Bytes}))
	val := make([]byte, restoreBenchValLen)
	for i := range keys {
		val[0], val[1], val[2] = byte(i), byte(i>>8), byte(i>>16)
		if err := v.Put(s.Key(fmt.Appendf(nil, "key-%010d", i)), val); err != nil {
			b.Fatal(err)
		}
	}
}

// benchRestorePaths runs Restore of h from storage into dir/r with opts (its checkpoint
// storage and owner replaced), the restored records written through Apply (path=apply:
// engine.Options.ReplayByApply) or in bulk (path=bulk), each restored Store checked to have
// restored keys records (got reads the count from RestoreStats) and bulk files on the bulk
// path only. Reported: ns per restore, s/GiB of logical state (keys × 78 bytes), ns/entry,
// and cpu-s/op — the process's CPU time during Restore (every thread, so the background
// transforms and evictions an Apply restore starts count too; less sensitive to a loaded
// machine than wall time).
func benchRestorePaths(b *testing.B, dir string, opts Options, storage checkpoint.Storage, h CheckpointHandle, keys int, got func(RestoreStats) int64) {
	bytes := keys * (restoreBenchKeyLen + restoreBenchValLen)
	for _, path := range []string{"apply", "bulk"} {
		b.Run("path="+path, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(bytes))
			n := 0
			var cpu int64
			for b.Loop() {
				n++
				o := opts
				o.Checkpoint.Storage, o.Checkpoint.Owner = nil, fmt.Sprintf("r-%s-%d", path, n)
				o.adjust = func(eo *engine.Options) { eo.ReplayByApply = path == "apply" }
				rdir := filepath.Join(dir, "r")
				c0 := processCPU()
				r, err := Restore(rdir, o, storage, h)
				if err != nil {
					b.Fatal(err)
				}
				cpu += processCPU() - c0
				b.StopTimer()
				rs := r.RestoreStats()
				if g := got(rs); g != int64(keys) || (path == "bulk") != (rs.BulkFiles > 0) {
					b.Fatalf("%d records restored (want %d), %d bulk files", g, keys, rs.BulkFiles)
				}
				r.Close()
				os.RemoveAll(rdir)
				b.StartTimer()
			}
			perRestore := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			b.ReportMetric(perRestore/float64(keys), "ns/entry")
			b.ReportMetric(perRestore/1e9/(float64(bytes)/(1<<30)), "s/GiB")
			b.ReportMetric(float64(cpu)/float64(b.N)/1e9, "cpu-s/op")
		})
	}
}
