package fresh

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/strata-db/strata/memory"
)

// benchKeys returns n 16-byte keys (flat), their hashes, values of 8..64
// bytes, and a random access order.
func benchKeys(n int) (keys []byte, hashes []uint64, vals [][]byte, order []uint32) {
	rng := rand.New(rand.NewPCG(1, 2))
	keys = make([]byte, 16*n)
	hashes = make([]uint64, n)
	vals = make([][]byte, n)
	order = make([]uint32, n)
	for i := 0; i < n; i++ {
		binary.LittleEndian.PutUint64(keys[16*i:], rng.Uint64())
		binary.LittleEndian.PutUint64(keys[16*i+8:], uint64(i))
		hashes[i] = hashOf(keys[16*i : 16*i+16])
		vals[i] = make([]byte, 8+rng.IntN(benchValSpan))
		order[i] = uint32(i)
	}
	rng.Shuffle(n, func(i, j int) { order[i], order[j] = order[j], order[i] })
	return
}

var benchValSpan = 57

var benchSizes = []struct {
	name string
	n    int
}{{"1K", 1 << 10}, {"1M", 1 << 20}}

func newBenchTable(b *testing.B) *Table {
	p, err := memory.NewPool(memory.NewBudget(4<<30), memory.SegmentSize64M)
	if err != nil {
		b.Fatal(err)
	}
	t, err := New(Options{Pool: p})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { t.Close(); p.Close() })
	return t
}

// BenchmarkGet compares FreshTable value lookups with a Go
// map[string][]byte on the same keys; the FreshTable hashes each key with
// xxh3 inside the loop (the map hashes internally).
func BenchmarkGet(b *testing.B) {
	for _, sz := range benchSizes {
		keys, _, vals, order := benchKeys(sz.n)
		b.Run(fmt.Sprintf("impl=fresh/keys=%s", sz.name), func(b *testing.B) {
			t := newBenchTable(b)
			for i := 0; i < sz.n; i++ {
				k := keys[16*i : 16*i+16]
				if err := t.Put(hashOf(k), k, vals[i]); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			var sink int
			for i := 0; i < b.N; i++ {
				j := order[i&(sz.n-1)]
				k := keys[16*j : 16*j+16]
				v, _ := t.Get(hashOf(k), k)
				sink += len(v)
			}
			_ = sink
			b.ReportMetric(float64(t.Stats().Segments), "segments")
		})
		b.Run(fmt.Sprintf("impl=gomap/keys=%s", sz.name), func(b *testing.B) {
			m := make(map[string][]byte)
			for i := 0; i < sz.n; i++ {
				m[string(keys[16*i:16*i+16])] = append([]byte(nil), vals[i]...)
			}
			b.ReportAllocs()
			b.ResetTimer()
			var sink int
			for i := 0; i < b.N; i++ {
				j := order[i&(sz.n-1)]
				sink += len(m[string(keys[16*j:16*j+16])])
			}
			_ = sink
		})
	}
}

// BenchmarkPut overwrites existing keys with values of their own size (the
// read-modify-write shape of value state): in place for the FreshTable,
// a slice-header store (no copy) for the Go map.
func BenchmarkPut(b *testing.B) {
	for _, sz := range benchSizes {
		keys, _, vals, order := benchKeys(sz.n)
		b.Run(fmt.Sprintf("impl=fresh/keys=%s", sz.name), func(b *testing.B) {
			t := newBenchTable(b)
			for i := 0; i < sz.n; i++ {
				k := keys[16*i : 16*i+16]
				if err := t.Put(hashOf(k), k, vals[i]); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				j := order[i&(sz.n-1)]
				k := keys[16*j : 16*j+16]
				if err := t.Put(hashOf(k), k, vals[j]); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("impl=gomap/keys=%s", sz.name), func(b *testing.B) {
			m := make(map[string][]byte)
			for i := 0; i < sz.n; i++ {
				m[string(keys[16*i:16*i+16])] = append([]byte(nil), vals[i]...)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				j := order[i&(sz.n-1)]
				m[string(keys[16*j:16*j+16])] = vals[j]
			}
		})
	}
}

// BenchmarkLoad inserts n new keys into an empty table (index growth and
// appends included), per key.
func BenchmarkLoad(b *testing.B) {
	keys, _, vals, _ := benchKeys(1 << 20)
	b.Run("impl=fresh/keys=1M", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			t := newBenchTable(b)
			b.StartTimer()
			for j := 0; j < 1<<20; j++ {
				k := keys[16*j : 16*j+16]
				if err := t.Put(hashOf(k), k, vals[j]); err != nil {
					b.Fatal(err)
				}
			}
			// Release now, not at Cleanup: b.N tables of ~100 MiB each
			// would otherwise stay mapped until the benchmark ends.
			b.StopTimer()
			t.Close()
			t.pool.Close()
			b.StartTimer()
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N<<20), "ns/key")
	})
	b.Run("impl=gomap/keys=1M", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			m := make(map[string][]byte)
			for j := 0; j < 1<<20; j++ {
				m[string(keys[16*j:16*j+16])] = append([]byte(nil), vals[j]...)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N<<20), "ns/key")
	})
}

// BenchmarkListAppend and BenchmarkMapPut measure the other record kinds.
func BenchmarkListAppend(b *testing.B) {
	keys, _, _, order := benchKeys(1 << 16)
	batch := make([]byte, 16)
	b.Run("impl=fresh/keys=64K", func(b *testing.B) {
		t := newBenchTable(b)
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			j := order[i&(1<<16-1)]
			k := keys[16*j : 16*j+16]
			if err := t.ListAppend(hashOf(k), k, batch); err != nil {
				b.Fatal(err)
			}
			if i&(1<<20-1) == 1<<20-1 {
				b.StopTimer()
				t.Close()
				t.pool.Close() // its free segments too, not at Cleanup
				t = newBenchTable(b)
				b.StartTimer()
			}
		}
	})
}

func BenchmarkMapPut(b *testing.B) {
	keys, _, _, order := benchKeys(1 << 16)
	val := make([]byte, 16)
	mk := []byte("0123456789abcdef")
	hm := hashOf(mk)
	b.Run("impl=fresh/entries=64K", func(b *testing.B) {
		t := newBenchTable(b)
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			j := order[i&(1<<16-1)]
			k := keys[16*j : 16*j+16]
			if err := t.MapPut(hm, mk, hashOf(k), k, val); err != nil {
				b.Fatal(err)
			}
		}
	})
}
