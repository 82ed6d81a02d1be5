package engine

import (
	"bytes"
	"fmt"
	"testing"
)

// spreadMap writes one map of n entries (user keys u64(i), 8-byte values) into e so that the
// even user keys lie in the lower tier and the odd ones in the SliceTable (spread=true: one
// run of many slices over the LsmStore, as a map outgrowing the SliceTable is), or all of them
// in the lower tier (spread=false: the map pushed down whole). It returns the map key and hash.
func spreadMap(tb testing.TB, e *Engine, n int, spread bool) ([]byte, uint64) {
	tb.Helper()
	mk, hm := testKey(1, []byte("the map"))
	put := func(from int) {
		for i := from; i < n; i += 2 {
			if err := e.Apply(opMapPut(mk, hm, u64(uint64(i)), u64(uint64(i)*7))); err != nil {
				tb.Fatal(err)
			}
		}
		must(0, e.Seal())
		must(0, e.WaitBackground())
	}
	pushDown := func() {
		for i := 0; i < 1000 && e.Stats().Slices > 0; i++ {
			ok, err := e.Evict()
			must(0, err)
			if !ok {
				break
			}
			must(0, e.WaitBackground())
		}
		if st := e.Stats(); st.Slices != 0 {
			tb.Fatalf("push-down left %d slices", st.Slices)
		}
	}
	put(0)
	pushDown()
	put(1)
	if !spread {
		pushDown()
	}
	return mk, hm
}

// TestMapIterSpread: iterating a map whose entries lie in many slices over the lower tier
// searches each slice a bounded number of times, not once per entry of the lower tier (issue
// 21, item 8: the lower phase asked the SliceTable for every entry, and each ask searched every
// slice of the map: 3 M entries over 840 slices iterated at 5–50 K entries/s). The measure is
// slice.Stats.MapSearches; the iteration must also yield every entry once, in any order.
func TestMapIterSpread(t *testing.T) {
	const n = 100_000
	e := openTest(t, Options{Dir: t.TempDir(), SegmentSize: 4 << 20})
	mk, hm := spreadMap(t, e, n, true)
	st := e.Stats()
	if st.Slices < 20 || st.LSMFiles == 0 {
		t.Fatalf("the map is not spread: %d slices, %d LSM files", st.Slices, st.LSMFiles)
	}
	before := e.sl.Stats().MapSearches
	seen := make([]bool, n)
	it := e.MapIter(hm, mk)
	count := 0
	for it.Next() {
		i := int(bytesU64(it.UserKey()))
		if i >= n || seen[i] || !bytes.Equal(it.Value(), u64(uint64(i)*7)) {
			t.Fatalf("entry %d: seen %v, value %x", i, i < n && seen[i], it.Value())
		}
		seen[i] = true
		count++
	}
	it.Close()
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	if count != n {
		t.Fatalf("%d entries, want %d", count, n)
	}
	searches := e.sl.Stats().MapSearches - before
	t.Logf("%d entries over %d slices and %d LSM files: %d slice searches", n, st.Slices, st.LSMFiles, searches)
	if limit := int64(4*st.Slices + 16); searches > limit {
		t.Fatalf("one iteration searched slices %d times (%.1f per entry); want at most %d (4 per slice)",
			searches, float64(searches)/n, limit)
	}
}

func bytesU64(b []byte) uint64 {
	var x uint64
	for _, c := range b {
		x = x<<8 | uint64(c)
	}
	return x
}

// BenchmarkMapIter iterates one map of 100 K entries laid out two ways: layout=spread, half of
// it in a run of many slices over the other half in the LsmStore; layout=lower, all of it in
// the LsmStore. The two must cost about the same per entry (issue 21, item 8).
func BenchmarkMapIter(b *testing.B) {
	const n = 100_000
	for _, spread := range []bool{true, false} {
		layout := "lower"
		if spread {
			layout = "spread"
		}
		b.Run(fmt.Sprintf("layout=%s/entries=100K", layout), func(b *testing.B) {
			e := openTest(b, Options{Dir: b.TempDir(), SegmentSize: 4 << 20})
			mk, hm := spreadMap(b, e, n, spread)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				it := e.MapIter(hm, mk)
				c := 0
				for it.Next() {
					c++
				}
				it.Close()
				if it.Err() != nil || c != n {
					b.Fatalf("%d entries, %v", c, it.Err())
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/entry")
			b.ReportMetric(float64(e.Stats().Slices), "slices")
		})
	}
}
