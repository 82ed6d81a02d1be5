package suite

import (
	"os"
	"testing"
	"time"

	"github.com/strata-db/strata"
	"github.com/strata-db/strata/bench/peers"
)

// BenchmarkBatchedAccess: Strata's batched access (ValueState.GetBatch and PutBatch,
// strata.BatchChunk keys per call, as Flink 2.0's asynchronous state API batches state
// reads) against single calls (Get, Put) on the same store and the same keys, Strata only
// (the peers have no batched API here). impl=strata is the batched path, impl=strata-single
// the single calls; one op is one key, so ns/op compares per key:
//
//	BatchedAccess/keys=10M/key=16B+ns8B/value=8B/op=get/impl=strata-single
//	BatchedAccess/keys=10M/key=16B+ns8B/value=8B/op=get/impl=strata
//	BatchedAccess/keys=6100K/value=100B/budget=64MiB/dist=uniform/op=get/impl=strata
//
// keys=10M: 10M keys of the windowed shape (16 B in an 8 B namespace) with 8 B values in
// memory (a 3 GiB budget, no directory), keys uniform. budget=64MiB: the larger-than-memory
// row's store (6.1M 8 B keys × 100 B values on disk, 10× a 64 MiB budget), uniform and Zipf
// 0.99 keys. Each workload's store is loaded once and serves both paths, reads first. The
// target (issue 14 item 4): batched at least 2× single per key (report.Gates).
func BenchmarkBatchedAccess(b *testing.B) {
	const memKeys = 10_000_000
	b.Run("keys="+SizeLabel(memKeys)+"/key="+Shapes[1].Name+"/value=8B", func(b *testing.B) {
		kr := NewKeyer(Shapes[1])
		values := Values(1<<16, 8, 41)
		bs := &batchStore{open: func(b *testing.B) (*strata.Store, string) {
			s, err := strata.Open("", strata.Options{MaxParallelism: peers.MaxParallelism, MemoryBudget: 3 << 30, SegmentSize: 64 << 20})
			if err != nil {
				b.Fatal(err)
			}
			return s, ""
		}, n: memKeys, key: func(id int32) peers.Key { return kr.Key(int64(id)) }, values: values}
		defer bs.close()
		draws := ycsbKeys(memKeys, 0)
		for _, op := range []string{"get", "put"} {
			b.Run("op="+op, func(b *testing.B) {
				for _, impl := range []string{"strata-single", "strata"} {
					b.Run("impl="+impl, func(b *testing.B) { bs.run(b, op, impl == "strata", draws) })
				}
			})
		}
	})
	b.Run("keys="+SizeLabel(ltmKeys)+"/value=100B/budget=64MiB", func(b *testing.B) {
		var keyBuf [8]byte
		values := Values(1<<16, 100, 31)
		bs := &batchStore{open: func(b *testing.B) (*strata.Store, string) {
			dir, err := os.MkdirTemp("", "strata-bench-batch-")
			if err != nil {
				b.Fatal(err)
			}
			s, err := strata.Open(dir, strata.Options{MaxParallelism: peers.MaxParallelism, MemoryBudget: ltmBudget, SegmentSize: 16 << 20})
			if err != nil {
				b.Fatal(err)
			}
			return s, dir
		}, n: ltmKeys, key: func(id int32) peers.Key { return peers.Key{K: LongKey(&keyBuf, int64(id))} }, values: values}
		defer bs.close()
		for dist, dname := range []string{"uniform", "zipf0.99"} {
			draws := ycsbKeys(ltmKeys, dist)
			b.Run("dist="+dname+"/op=get", func(b *testing.B) {
				for _, impl := range []string{"strata-single", "strata"} {
					b.Run("impl="+impl, func(b *testing.B) { bs.run(b, "get", impl == "strata", draws) })
				}
			})
		}
	})
}

// batchStore is one workload's Strata store, loaded on first use with n keys (key(id)) and
// values, shared by the single and the batched leaves.
type batchStore struct {
	open   func(b *testing.B) (*strata.Store, string)
	n      int
	key    func(id int32) peers.Key
	values [][]byte
	s      *strata.Store
	dir    string
	v      *strata.ValueState[[]byte]
	pos    map[string]int // per-leaf position in the draws (invariant 2)
}

func (bs *batchStore) get(b *testing.B) {
	if bs.s != nil {
		return
	}
	b.StopTimer()
	start := time.Now()
	bs.s, bs.dir = bs.open(b)
	v, err := strata.NewValueState(bs.s, strata.ValueDescriptor[[]byte]{Name: "value", Codec: strata.Bytes})
	if err != nil {
		b.Fatal(err)
	}
	bs.v = v
	for i := range bs.n {
		if err := v.Put(bs.skey(bs.key(int32(i))), bs.values[i&(1<<16-1)]); err != nil {
			b.Fatal(err)
		}
	}
	if err := bs.s.WaitBackground(); err != nil {
		b.Fatal(err)
	}
	// Warm the caches (the LsmStore's index and filter blocks, the row cache) with single
	// reads of keys spread over the store, outside the timer, so that the first leaf
	// measured does not pay for the others.
	for i := range 1 << 18 {
		if _, _, err := v.Get(bs.skey(bs.key(int32((i * 7919) % bs.n)))); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("loaded and warmed %d keys in %v", bs.n, time.Since(start).Round(time.Millisecond))
	bs.pos = map[string]int{}
	b.StartTimer()
}

func (bs *batchStore) skey(k peers.Key) strata.Key {
	key := bs.s.Key(k.K)
	if len(k.NS) > 0 {
		key = key.In(k.NS)
	}
	return key
}

func (bs *batchStore) close() {
	if bs.s != nil {
		bs.s.Close()
		bs.s = nil
	}
	if bs.dir != "" {
		os.RemoveAll(bs.dir)
	}
}

// run times b.N keys of op ("get", "put") drawn from draws, through single calls or through
// batches of strata.BatchChunk keys (each key serialized into its own buffer, as a task
// deserializes the keys of the records it batches). Every get must find its key.
func (bs *batchStore) run(b *testing.B, op string, batched bool, draws []int32) {
	bs.get(b)
	name := b.Name()
	base := bs.pos[name]
	var bufs [strata.BatchChunk][16]byte
	keys := make([]strata.Key, strata.BatchChunk)
	vals := make([][]byte, strata.BatchChunk)
	ok := make([]bool, strata.BatchChunk)
	next := func(i int) int32 { return draws[(base+i)&(ycsbSamples-1)] }
	b.ReportAllocs()
	b.ResetTimer()
	if !batched {
		for i := range b.N {
			k := bs.skey(bs.key(next(i)))
			if op == "put" {
				if err := bs.v.Put(k, bs.values[i&(1<<16-1)]); err != nil {
					b.Fatal(err)
				}
				continue
			}
			v, found, err := bs.v.Get(k)
			if !found || err != nil {
				b.Fatalf("key %d: %v %v", next(i), found, err)
			}
			sink += len(v)
		}
	} else {
		for i := 0; i < b.N; i += strata.BatchChunk {
			m := min(strata.BatchChunk, b.N-i)
			for c := range m {
				pk := bs.key(next(i + c))
				kb := append(bufs[c][:0], pk.K...)
				keys[c] = bs.s.Key(kb)
				if len(pk.NS) > 0 {
					keys[c] = keys[c].In(pk.NS)
				}
				vals[c] = bs.values[(i+c)&(1<<16-1)]
			}
			if op == "put" {
				if err := bs.v.PutBatch(keys[:m], vals[:m]); err != nil {
					b.Fatal(err)
				}
				continue
			}
			if err := bs.v.GetBatch(keys[:m], vals[:m], ok[:m]); err != nil {
				b.Fatal(err)
			}
			for c := range m {
				if !ok[c] {
					b.Fatalf("key %d absent", next(i+c))
				}
				sink += len(vals[c])
			}
		}
	}
	b.StopTimer()
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(float64(b.N)/s, "ops/s")
	}
	bs.pos[name] = base + b.N
}
