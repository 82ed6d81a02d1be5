package engine

import (
	"context"
	"runtime"
	"testing"

	"github.com/strata-db/strata/memory"
)

// BenchmarkTransform measures the background transform of one sealed segment (the entries of
// its live records in entry order, packed into slices) with no other work running: kind=map is
// the last sealed segment of 1M map entries (125K keys of 8 user keys), kind=value of 1M
// values. ns/op is per segment; ns/entry per live record. The built slices are
// released, not installed, so every round transforms the same segment. cpu-ns/entry is the
// thread's CPU time (Linux), steadier than wall time on a busy machine.
func BenchmarkTransform(b *testing.B) {
	for _, kind := range []string{"map", "value"} {
		b.Run("kind="+kind, func(b *testing.B) {
			s := openTest(b, Options{Budget: memory.NewBudget(8 << 30), SegmentSize: 64 << 20})
			val := []byte("8bytes!!")
			for i := range uint64(1_000_000) {
				if kind == "map" {
					mk, hm := testKey(1, u64(i/8*8))
					must(0, s.Apply(opMapPut(mk, hm, u64(i%8), val)))
				} else {
					k, h := testKey(1, u64(i))
					must(0, s.Apply(opPut(k, h, val)))
				}
			}
			if err := s.Drain(); err != nil {
				b.Fatal(err)
			}
			s.noCompact = true
			if err := s.f.Seal(); err != nil {
				b.Fatal(err)
			}
			sealed := s.f.Sealed()
			seg := sealed[len(sealed)-1]
			ctx := context.Background()
			n := 0
			for it := seg.Entries(); it.Next(); {
				n++
			}
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := threadCPU()
			for range b.N {
				out, err := s.transform(ctx, seg)
				if err != nil {
					b.Fatal(err)
				}
				s.sl.Release(out)
			}
			cpu := threadCPU() - cpu0
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/entry")
			b.ReportMetric(float64(cpu)/float64(b.N)/float64(n), "cpu-ns/entry")
			b.ReportMetric(float64(n), "entries")
		})
	}
}
