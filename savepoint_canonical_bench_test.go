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

// BenchmarkCanonicalRestore: Restore of a canonical savepoint of one value state (14-byte
// keys, 64-byte values; state= its logical bytes) into one Store, its entries written in bulk
// (path=bulk: engine.BulkLoad, L0 files) or through Apply (path=apply: engine.ReplayByApply,
// the path before the bulk load), in the same binary and run. The savepoint is written once
// per run of the benchmark function (not timed). Reported: ns per restore, s/GiB of logical
// state, ns/entry, and cpu-s/op — the process's CPU time during Restore (every thread, so the
// background transforms and evictions an Apply restore starts count too; less sensitive to a
// loaded machine than wall time). Restore's persist waits for the background work it
// started; compactions of a bulk load's L0 files start after Restore (engine.BulkLoad).
//
//	go test -run '^$' -bench 'BenchmarkCanonicalRestore/state=64MiB' -benchtime 1x -count 6 .
func BenchmarkCanonicalRestore(b *testing.B) {
	for _, size := range []int{64 << 20, 256 << 20} {
		b.Run(fmt.Sprintf("state=%dMiB", size>>20), func(b *testing.B) {
			const keyLen, valLen = 14, 64
			keys := size / (keyLen + valLen)
			ctx := context.Background()
			dir := b.TempDir()
			sp, err := checkpoint.NewDirStorage(filepath.Join(dir, "sp"))
			if err != nil {
				b.Fatal(err)
			}
			opts := Options{MaxParallelism: 128, MemoryBudget: 128 << 20, SegmentSize: 16 << 20,
				Checkpoint: CheckpointOptions{Storage: sp, Owner: "bench"}}
			s, err := Open(filepath.Join(dir, "src"), opts)
			if err != nil {
				b.Fatal(err)
			}
			v := must(NewValueState(s, ValueDescriptor[[]byte]{Name: "v", Codec: Bytes}))
			val := make([]byte, valLen)
			for i := range keys {
				val[0], val[1], val[2] = byte(i), byte(i>>8), byte(i>>16)
				if err := v.Put(s.Key(fmt.Appendf(nil, "key-%010d", i)), val); err != nil {
					b.Fatal(err)
				}
			}
			h, err := s.Savepoint(ctx, sp, SavepointCanonical, 1, nil)
			if err != nil {
				b.Fatal(err)
			}
			if err := s.Close(); err != nil {
				b.Fatal(err)
			}
			os.RemoveAll(filepath.Join(dir, "src"))
			for _, path := range []string{"apply", "bulk"} {
				b.Run("path="+path, func(b *testing.B) {
					prev := engine.ReplayByApply(path == "apply")
					defer engine.ReplayByApply(prev)
					b.ReportAllocs()
					b.SetBytes(int64(keys * (keyLen + valLen)))
					n := 0
					var cpu int64
					for b.Loop() {
						n++
						o := opts
						o.Checkpoint.Storage, o.Checkpoint.Owner = nil, fmt.Sprintf("r-%s-%d", path, n)
						rdir := filepath.Join(dir, "r")
						c0 := processCPU()
						r, err := Restore(rdir, o, sp, h)
						if err != nil {
							b.Fatal(err)
						}
						cpu += processCPU() - c0
						b.StopTimer()
						if got := r.RestoreStats().CanonicalEntries; got != int64(keys) {
							b.Fatalf("%d canonical entries restored, want %d", got, keys)
						}
						r.Close()
						os.RemoveAll(rdir)
						b.StartTimer()
					}
					perRestore := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
					b.ReportMetric(perRestore/float64(keys), "ns/entry")
					b.ReportMetric(perRestore/1e9/(float64(keys*(keyLen+valLen))/(1<<30)), "s/GiB")
					b.ReportMetric(float64(cpu)/float64(b.N)/1e9, "cpu-s/op")
				})
			}
		})
	}
}
