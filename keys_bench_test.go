package strata

import (
	"testing"
	"time"
)

// BenchmarkKeys: one op is a whole Store.Keys pass over 1M value-state keys (16-byte keys, 8-byte
// values) held in memory — all in the FreshTable (tier=fresh: the active segment, indexed and
// sorted by the scan) or all in the SliceTable (tier=slice) — beside ranging over a Go map's
// keys. ns/key is the op's time per key yielded; allocs/op counts the whole pass.
func BenchmarkKeys(b *testing.B) {
	const n = 1_000_000
	bk := getBenchKeys(n)
	for _, impl := range []string{"strata/tier=fresh", "strata/tier=slice", "gomap"} {
		b.Run("impl="+impl+"/keys=1M", func(b *testing.B) {
			var pass func() int
			if impl == "gomap" {
				m := make(map[string][]byte, n)
				for i := range int32(n) {
					m[string(bk.key(i))] = benchVal
				}
				pass = func() int {
					c := 0
					for k := range m {
						sink += len(k)
						c++
					}
					return c
				}
			} else {
				s, v := benchKeysStore(b, bk, impl == "strata/tier=slice")
				defer s.Close()
				pass = func() int {
					seq, errf := s.Keys(v, nil)
					c := 0
					for k := range seq {
						sink += len(k.Bytes())
						c++
					}
					if err := errf(); err != nil {
						b.Fatal(err)
					}
					return c
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				if c := pass(); c != n {
					b.Fatalf("%d keys, want %d", c, n)
				}
			}
			b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(b.N*n), "ns/key")
		})
	}
}

// BenchmarkApplyToAllKeys: one op is a whole ApplyToAllKeys pass over 1M value-state keys in
// the SliceTable whose function rewrites each key's value (op=rewrite: a Put per key, so the
// scan's steps run between writes that fill the FreshTable) or clears it (op=clear; the keys
// are put back between ops, outside the timer).
func BenchmarkApplyToAllKeys(b *testing.B) {
	const n = 1_000_000
	bk := getBenchKeys(n)
	for _, op := range []string{"rewrite", "clear"} {
		b.Run("impl=strata/op="+op+"/keys=1M", func(b *testing.B) {
			s, v := benchKeysStore(b, bk, true)
			defer s.Close()
			fn := func(k Key) error { return v.Put(k, benchVal) }
			if op == "clear" {
				fn = v.Clear
			}
			b.ReportAllocs()
			b.ResetTimer()
			var elapsed time.Duration
			for i := range b.N {
				if op == "clear" && i > 0 {
					b.StopTimer()
					for i := range int32(n) {
						must(0, v.Put(s.Key(bk.key(i)), benchVal))
					}
					b.StartTimer()
				}
				start := time.Now()
				c := 0
				if err := s.ApplyToAllKeys(nil, v, func(k Key) error { c++; return fn(k) }); err != nil {
					b.Fatal(err)
				}
				elapsed += time.Since(start)
				if c != n {
					b.Fatalf("%d keys visited, want %d", c, n)
				}
			}
			b.ReportMetric(float64(elapsed.Nanoseconds())/float64(b.N*n), "ns/key")
		})
	}
}

// benchKeysStore loads n keys of bk into a value state of a Store in memory; slices: sealed
// and transformed into the SliceTable (the FreshTable empty).
func benchKeysStore(b *testing.B, bk *benchKeys, slices bool) (*Store, *ValueState[[]byte]) {
	s := benchStore(b)
	v := must(NewValueState(s, ValueDescriptor[[]byte]{Name: "v", Codec: Bytes}))
	for i := range int32(bk.n) {
		must(0, v.Put(s.Key(bk.key(i)), benchVal))
	}
	if slices {
		must(0, s.seal())
		must(0, s.e.Drain())
		if st := s.Stats(); st.Fresh.SealedSegments != 0 || st.Fresh.Segments != 0 {
			b.Fatalf("FreshTable not empty: %+v", st)
		}
	}
	return s, v
}
