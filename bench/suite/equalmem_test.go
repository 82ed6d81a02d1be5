package suite

import (
	"testing"

	"github.com/strata-db/strata/bench/peers"
)

// Equal memory (issue 14, "Performance at equal memory"; "honest gates"): the value get and
// map get rows with every implementation given the same memory — Strata's MemoryBudget = the
// block cache of Pebble, Badger and goleveldb = eqBudget (256 MiB) — and a state of about half
// of it, so that a peer's cache holds the whole state and Strata must too:
//
//	BenchmarkEqualMemory/budget=256MiB/state=value/keys=1M/key=8B/value=100B/impl=pebble/op=get
//	BenchmarkEqualMemory/budget=256MiB/state=map/keys=100K/key=16B+ns8B/map=10x100B/impl=strata/op=get
//
// The states, in both key Shapes (state bytes as the peers write them, without the key group):
//
//   - value: 1M keys × 100 B values: 1M × 108 B = 103 MiB (key=8B), 1M × 124 B = 118 MiB
//     (key=16B+ns8B);
//   - map: 100K keys × 10 user keys (8 B Longs 0..9) × 100 B values, one entry per user key:
//     1M × 116 B = 111 MiB (key=8B), 1M × 132 B = 126 MiB (key=16B+ns8B).
//
// After loading, every entry is read once in key-id order, outside the timer, so that each
// store's cache holds what it can of the state before the first measured get (the question
// these rows answer is the steady state at equal memory, not a cold start: without it a
// peer's block cache, empty after the compaction that ends loading, would miss on most of the
// few hundred thousand gets of a row). Gets then visit the keys in a shuffled order (as
// Flink's benchmarks), the map's user key i mod 10. Strata opens on a temporary directory as everywhere (what exceeds the budget spills
// to its LsmStore), with its default segment size; bbolt, the Go map and swiss have no memory
// setting and run as in the other rows (the in-memory references). The gate (cmd/gates): get ≥
// 3× Pebble in both states and shapes.
const (
	eqBudget    = 256 << 20
	eqValueKeys = 1_000_000
	eqMapKeys   = 100_000
	eqMapUKs    = 10
	eqValueSize = 100
)

func BenchmarkEqualMemory(b *testing.B) {
	values := Values(1<<16, eqValueSize, 31)
	val := func(i int) []byte { return values[i&(1<<16-1)] }
	var ukBuf [8]byte
	uk := func(u int) []byte { return LongKey(&ukBuf, int64(u)) }
	cfg := peers.Config{Budget: eqBudget}
	for _, shape := range Shapes {
		kr := NewKeyer(shape)
		b.Run("budget=256MiB/state=value/keys="+SizeLabel(eqValueKeys)+"/key="+shape.Name+"/value=100B", func(b *testing.B) {
			const n = eqValueKeys
			order := Perm(0, n, 41)
			load := func(st peers.Store) {
				for i := range n {
					st.ValuePut(kr.Key(int64(i)), val(i))
				}
			}
			warm := func(st peers.Store) {
				for i := range n {
					v, _ := st.ValueGet(kr.Key(int64(i)))
					sink += len(v)
				}
			}
			forImplsWarm(b, impls(), cfg, load, warm, func(b *testing.B, l *lazyStore) {
				leaf(b, l, "op=get", func(st peers.Store, i int) {
					v, _ := st.ValueGet(kr.Key(int64(order[i%n])))
					sink += len(v)
				})
			})
		})
		b.Run("budget=256MiB/state=map/keys="+SizeLabel(eqMapKeys)+"/key="+shape.Name+"/map=10x100B", func(b *testing.B) {
			const n = eqMapKeys
			order := Perm(0, n, 42)
			load := func(st peers.Store) {
				for i := range n {
					k := kr.Key(int64(i))
					for u := range eqMapUKs {
						st.MapPut(k, uk(u), val(i*eqMapUKs+u))
					}
				}
			}
			warm := func(st peers.Store) {
				for i := range n {
					k := kr.Key(int64(i))
					for u := range eqMapUKs {
						v, _ := st.MapGet(k, uk(u))
						sink += len(v)
					}
				}
			}
			forImplsWarm(b, impls(), cfg, load, warm, func(b *testing.B, l *lazyStore) {
				leaf(b, l, "op=get", func(st peers.Store, i int) {
					v, _ := st.MapGet(kr.Key(int64(order[i%n])), uk(i%eqMapUKs))
					sink += len(v)
				})
			})
		})
	}
}
