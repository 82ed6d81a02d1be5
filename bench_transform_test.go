package strata

import (
	"context"
	"runtime"
	"testing"
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
			bk := getBenchKeys(1_000_000)
			s := benchStore(b)
			defer s.Close()
			if kind == "map" {
				m := must(NewMapState(s, MapDescriptor[uint64, []byte]{Name: "m", KeyCodec: Uint64, ValueCodec: Bytes}))
				for i := range int32(bk.n) {
					mk, uk := benchMapKey(bk, i)
					must(0, m.Put(s.Key(mk), uk, benchVal))
				}
			} else {
				v := must(NewValueState(s, ValueDescriptor[[]byte]{Name: "v", Codec: Bytes}))
				for i := range int32(bk.n) {
					must(0, v.Put(s.Key(bk.key(i)), benchVal))
				}
			}
			if err := s.t.drain(); err != nil {
				b.Fatal(err)
			}
			s.t.noCompact = true
			if err := s.t.f.Seal(); err != nil {
				b.Fatal(err)
			}
			sealed := s.t.f.Sealed()
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
				out, err := s.t.transform(ctx, seg)
				if err != nil {
					b.Fatal(err)
				}
				s.t.sl.Release(out)
			}
			cpu := threadCPU() - cpu0
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/entry")
			b.ReportMetric(float64(cpu)/float64(b.N)/float64(n), "cpu-ns/entry")
			b.ReportMetric(float64(n), "entries")
		})
	}
}
