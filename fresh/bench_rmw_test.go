package fresh

import (
	"encoding/binary"
	"fmt"
	"testing"
)

// BenchmarkGetPut is the read-modify-write of value state (Flink's
// AggregatingState.add, ValueState get then update): a Get of an existing
// key followed by a Put of the same key with a value of its size (in
// place), per pair; op=insert Gets an absent key and Puts it (the Put
// appends and inserts its slot), on a table that rolls segments as it fills.
func BenchmarkGetPut(b *testing.B) {
	for _, sz := range benchSizes {
		keys, _, vals, order := benchKeys(sz.n)
		b.Run(fmt.Sprintf("impl=fresh/keys=%s/op=update", sz.name), func(b *testing.B) {
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
				h := hashOf(k)
				v, _ := t.Get(h, k)
				sink += len(v)
				if err := t.Put(h, k, vals[j]); err != nil {
					b.Fatal(err)
				}
			}
			_ = sink
		})
	}
	b.Run("impl=fresh/op=insert", func(b *testing.B) {
		t := newBenchTable(b)
		var k [16]byte
		val := make([]byte, 32)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			binary.LittleEndian.PutUint64(k[:], uint64(i)*0x9E3779B97F4A7C15)
			binary.LittleEndian.PutUint64(k[8:], uint64(i))
			h := hashOf(k[:])
			if _, st := t.Get(h, k[:]); st != Absent {
				b.Fatal(st)
			}
			if err := t.Put(h, k[:], val); err != nil {
				b.Fatal(err)
			}
		}
	})
}
