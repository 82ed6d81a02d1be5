package strata

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkBatch compares batched access (ValueState.GetBatch, PutBatch: BatchChunk keys per
// call) with single calls (Get, Put) on the same random keys, one op = one key (ns/op is per
// key), issue 14's target being batch at least 2× single:
//
//   - keys=10M: 10M 16-byte keys with 8-byte values held in memory (sealed and transformed:
//     the SliceTable, the FreshTable empty at the start), keys drawn uniformly.
//   - budget=64MiB/state=10x: 1 KiB values, 10× a 64 MiB budget (BenchmarkPointGet's store:
//     persisted, reopened, read through the row and block caches and the OS page cache).
//
// The keys of an op are built into reused buffers (batch: one buffer per key of the chunk),
// as a task deserializes the keys of the records it processes.
//
//	go test -run '^$' -bench 'BenchmarkBatch' -benchtime 2000000x .
func BenchmarkBatch(b *testing.B) {
	const n = 10_000_000
	b.Run("store=memory", func(b *testing.B) {
		bk := getBenchKeys(n)
		var s *Store
		var v *ValueState[[]byte]
		load := func(b *testing.B) {
			if s != nil {
				return
			}
			s = must(Open("", Options{MemoryBudget: 8 << 30, SegmentSize: 64 << 20}))
			v = must(NewValueState(s, ValueDescriptor[[]byte]{Name: "v", Codec: Bytes}))
			for i := range int32(n) {
				if err := v.Put(s.Key(bk.key(i)), benchVal); err != nil {
					b.Fatal(err)
				}
			}
			must(0, s.seal())
			must(0, s.e.Drain())
		}
		for _, op := range []string{"get", "put"} {
			for _, mode := range []string{"single", "batch"} {
				b.Run(fmt.Sprintf("op=%s/keys=10M/mode=%s", op, mode), func(b *testing.B) {
					load(b)
					runBatchBench(b, s, v, n, op, mode, func(int32, []byte) {})
				})
			}
		}
		if s != nil {
			s.Close()
		}
	})
	b.Run("store=lsm", func(b *testing.B) {
		var l *lsmBenchStore
		for _, mode := range []string{"single", "batch"} {
			b.Run("op=get/budget=64MiB/state=10x/mode="+mode, func(b *testing.B) {
				if l == nil {
					l = openLSMBench(b, 10)
					// Warm the caches (index and filter blocks, the row cache) outside the
					// timer, so the first mode measured does not pay for the second.
					bk := getBenchKeys(l.keys)
					for j := range 1 << 18 {
						l.v.Get(l.s.Key(bk.key(bk.order[(j*7919)%l.keys])))
					}
				}
				runBatchBench(b, l.s, l.v, l.keys, "get", mode, func(i int32, x []byte) {
					if binary.LittleEndian.Uint32(x) != uint32(i) {
						b.Fatalf("key %d: wrong value", i)
					}
				})
			})
		}
		if l != nil {
			l.close()
		}
	})
}

// runBatchBench runs b.N operations (get or put) of keys drawn uniformly from [0, n) through
// single calls or batches of BatchChunk, checking every value read with check.
func runBatchBench(b *testing.B, s *Store, v *ValueState[[]byte], n int, op, mode string, check func(int32, []byte)) {
	bk := getBenchKeys(n)
	const draws = 1 << 22 // 4M draws: more keys than the caches hold lines for
	idx := make([]int32, draws)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range idx {
		idx[i] = bk.order[rng.IntN(n)]
	}
	var bufs [BatchChunk][16]byte
	keys := make([]Key, BatchChunk)
	vals := make([][]byte, BatchChunk)
	ok := make([]bool, BatchChunk)
	for i := range vals {
		vals[i] = benchVal
	}
	b.ReportAllocs()
	b.ResetTimer()
	if mode == "single" {
		for j := range b.N {
			i := idx[j&(draws-1)]
			k := s.Key(bk.key(i))
			if op == "put" {
				if err := v.Put(k, benchVal); err != nil {
					b.Fatal(err)
				}
				continue
			}
			x, found, err := v.Get(k)
			if !found || err != nil {
				b.Fatalf("key %d: %v %v", i, found, err)
			}
			check(i, x)
		}
		return
	}
	for j := 0; j < b.N; j += BatchChunk {
		m := min(BatchChunk, b.N-j)
		for c := range m {
			copy(bufs[c][:], bk.key(idx[(j+c)&(draws-1)]))
			keys[c] = s.Key(bufs[c][:])
		}
		if op == "put" {
			if err := v.PutBatch(keys[:m], vals[:m]); err != nil {
				b.Fatal(err)
			}
			continue
		}
		if err := v.GetBatch(keys[:m], vals[:m], ok[:m]); err != nil {
			b.Fatal(err)
		}
		for c := range m {
			if !ok[c] {
				b.Fatalf("key %d absent", idx[(j+c)&(draws-1)])
			}
			check(idx[(j+c)&(draws-1)], vals[c])
		}
	}
}
