package suite

import (
	"encoding/binary"
	"slices"
	"testing"

	"github.com/strata-db/strata/bench/peers"
)

// YCSB-style mixes, as FASTER's benchmark runs them (8-byte keys, no
// namespace), and again with a windowed job's 16 B keys in an 8 B namespace
// (Shapes): A = 50 % read / 50 % blind update, C = 100 % read,
// F = 100 % read-modify-write (read, add 1 to the first 8 bytes, write
// back); uniform and Zipf 0.99 (scrambled) key choice; 8 B and 100 B
// values. 10M keys only with -big, and with 8 B keys only.

const ycsbSamples = 1 << 22

var ycsbDraws = map[[2]int][]int32{}

// ycsbKeys returns the key sequence for n keys and dist 0 (uniform) or 1
// (zipf 0.99).
func ycsbKeys(n, dist int) []int32 {
	k := [2]int{n, dist}
	if s := ycsbDraws[k]; s != nil {
		return s
	}
	var s []int32
	if dist == 0 {
		s = Uniform(n, ycsbSamples, 21)
	} else {
		s = Zipf(n, 0.99, ycsbSamples, 22)
	}
	ycsbDraws[k] = s
	return s
}

func BenchmarkYCSB(b *testing.B) {
	for _, n := range []int{1_000_000, 10_000_000} {
		budget := *flagBudget
		if n > 1_000_000 {
			budget = max(budget, 4<<30)
		}
		shapes := Shapes
		if n > 1_000_000 {
			// The 10M rows (-big) are not gated and take most of a -big run's loading: 8 B
			// keys only.
			shapes = Shapes[:1]
		}
		for _, shape := range shapes {
			for _, vsize := range []int{8, 100} {
				ycsbRows(b, n, shape, vsize, budget)
			}
		}
	}
}

// ycsbRows runs the YCSB mixes over n keys of shape with vsize-byte values.
func ycsbRows(b *testing.B, n int, shape Shape, vsize int, budget int64) {
	b.Run("keys="+SizeLabel(n)+"/key="+shape.Name+"/value="+SizeLabel(vsize)+"B", func(b *testing.B) {
		if n > 1_000_000 && !*flagBig {
			b.Skip("keys=10M is off by default: loading 10M keys into each of 7 stores takes about 10 minutes and " +
				"up to ~10 GiB on a 2-core, 24 GiB machine; run with -big")
		}
		values := Values(1<<16, vsize, 31)
		kr := NewKeyer(shape)
		key := func(id int32) peers.Key { return kr.Key(int64(id)) }
		load := func(st peers.Store) {
			for i := range n {
				st.ValuePut(key(int32(i)), values[i&(1<<16-1)])
			}
		}
		rmw := make([]byte, vsize)
		forImpls(b, budget, load, func(b *testing.B, l *lazyStore) {
			for dist, dname := range []string{"uniform", "zipf0.99"} {
				b.Run("dist="+dname, func(b *testing.B) {
					keys := ycsbKeys(n, dist)
					next := func(i int) int32 { return keys[i&(ycsbSamples-1)] }
					leaf(b, l, "mix=A", func(st peers.Store, i int) {
						// 50/50 by a mixed bit of i, the same for every implementation.
						if (uint64(i)*0x9e3779b97f4a7c15)>>63 == 0 {
							v, _ := st.ValueGet(key(next(i)))
							sink += len(v)
							return
						}
						st.ValuePut(key(next(i)), values[i&(1<<16-1)])
					})
					leaf(b, l, "mix=C", func(st peers.Store, i int) {
						v, _ := st.ValueGet(key(next(i)))
						sink += len(v)
					})
					leaf(b, l, "mix=F", func(st peers.Store, i int) {
						k := key(next(i))
						v, _ := st.ValueGet(k)
						copy(rmw, v)
						binary.BigEndian.PutUint64(rmw, binary.BigEndian.Uint64(rmw)+1)
						st.ValuePut(k, rmw)
					})
				})
			}
		})
	})
}

// Larger than memory (DESIGN.md §5: state 10× the memory budget, Zipf 0.99):
// YCSB C (read-only) and A (50/50 read/blind update), uniform and Zipf 0.99
// (scrambled), 100 B values, over ltmKeys keys = 10× a 64 MiB memory budget
// (keys + values: ltmKeys × 110 B). Strata is opened on a temporary
// directory with MemoryBudget = ltmBudget and 16 MiB segments (its block
// cache is its default share of that budget); Pebble, Badger and goleveldb
// get a block cache of ltmBudget. The OS page cache is not limited, as in
// every published LSM benchmark of this kind: the budget bounds the stores'
// own memory. Only the implementations with a memory bound run: bbolt has no
// cache setting (it reads the page cache through its mmap) and gomap/swiss
// hold everything on the heap, so their rows would be the in-memory ones
// again.
const (
	ltmKeys   = 6_100_000
	ltmBudget = 64 << 20 // 6.1M × 110 B = 671 MB ≈ 10 × 64 MiB
)

// ltmImpls are the implementations the larger-than-memory rows run.
var ltmImpls = []string{"strata", "pebble", "badger", "leveldb"}

// ltmWindowedImpls are the implementations the windowed larger-than-memory row runs: Strata
// against the DESIGN.md §5 target's peer (≥ 3× Pebble with the same memory).
var ltmWindowedImpls = []string{"strata", "pebble"}

func BenchmarkLargerThanMemory(b *testing.B) {
	var keyBuf [8]byte
	benchLTM(b, "keys="+SizeLabel(ltmKeys)+"/value=100B/budget=64MiB", ltmImpls, []string{"uniform", "zipf0.99"},
		func(id int32) peers.Key { return peers.Key{K: LongKey(&keyBuf, int64(id))} })
}

// benchLTM runs the larger-than-memory rows under name: ltmKeys keys (key(id) for id in
// [0, ltmKeys)) with 100 B values loaded into each implementation of allowed that -impls
// selects, at ltmBudget, then YCSB C and A over the key distributions dists ("uniform",
// "zipf0.99").
func benchLTM(b *testing.B, name string, allowed, dists []string, key func(int32) peers.Key) {
	const n, vsize = ltmKeys, 100
	b.Run(name, func(b *testing.B) {
		values := Values(1<<16, vsize, 31)
		load := func(st peers.Store) {
			for i := range n {
				st.ValuePut(key(int32(i)), values[i&(1<<16-1)])
			}
		}
		var names []string
		for _, impl := range impls() {
			if slices.Contains(allowed, impl) {
				names = append(names, impl)
			}
		}
		cfg := peers.Config{Budget: ltmBudget, Disk: true, SegmentSize: 16 << 20}
		forImplsCfg(b, names, cfg, load, func(b *testing.B, l *lazyStore) {
			for _, dname := range dists {
				dist := slices.Index([]string{"uniform", "zipf0.99"}, dname)
				b.Run("dist="+dname, func(b *testing.B) {
					keys := ycsbKeys(n, dist)
					next := func(i int) int32 { return keys[i&(ycsbSamples-1)] }
					leaf(b, l, "mix=C", func(st peers.Store, i int) {
						v, _ := st.ValueGet(key(next(i)))
						sink += len(v)
					})
					leaf(b, l, "mix=A", func(st peers.Store, i int) {
						if (uint64(i)*0x9e3779b97f4a7c15)>>63 == 0 {
							v, _ := st.ValueGet(key(next(i)))
							sink += len(v)
							return
						}
						st.ValuePut(key(next(i)), values[i&(1<<16-1)])
					})
				})
			}
		})
	})
}

// Larger than memory with the rows of a windowed job: the same ltmKeys keys and 64 MiB budget,
// but 16 B keys (an 8-byte hash prefix and the 8-byte id, as a serialized composite or string
// key) in one 8 B namespace (a window), 100 B values (ltmKeys × 124 B = 756 MB ≈ 11× the
// budget), Zipf 0.99 only, Strata and Pebble only. Strata's composite key is 29 bytes here:
// this is the row that shows whether its row cache holds realistic rows (the "row cache hits"
// of the strata store's log line; issue 14).
func BenchmarkLargerThanMemoryWindowed(b *testing.B) {
	kr := NewKeyer(Shapes[1]) // key=16B+ns8B
	benchLTM(b, "keys="+SizeLabel(ltmKeys)+"/key=16B/ns=8B/value=100B/budget=64MiB", ltmWindowedImpls, []string{"zipf0.99"},
		func(id int32) peers.Key { return kr.Key(int64(id)) })
}
