package strata

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"testing"
)

// Benchmarks of a Store whose state is larger than its memory budget (issue 4): point gets at
// 1×, 4× and 10× a 64 MiB budget with uniform and Zipf(0.99) keys, and sustained puts with
// the LsmStore's compactions running, reporting the bytes written to disk per byte of state.
// They use a real temporary directory (the OS page cache serves what the block cache misses).
//
//	go test -run '^$' -bench 'BenchmarkPointGet|BenchmarkPutSustained' -benchtime 200000x .

const lsmBenchBudget = 64 << 20

// lsmBenchValue is the value size of the LSM benchmarks: 1 KiB, so 10× the budget is 640K keys.
const lsmBenchValue = 1 << 10

type lsmBenchStore struct {
	s    *Store
	v    *ValueState[[]byte]
	keys int
	dir  string
}

// openLSMBench loads a Store with mult× the budget of 1 KiB values (keys 0..n-1 in random
// order), then Closes and reopens it, so reads start from the LsmStore with the memory tiers
// empty, as after a restart. The directory is removed by close.
func openLSMBench(b *testing.B, mult int) *lsmBenchStore {
	dir, err := os.MkdirTemp("", "strata-bench-")
	if err != nil {
		b.Fatal(err)
	}
	opts := Options{MemoryBudget: lsmBenchBudget, SegmentSize: 16 << 20}
	s := must(Open(dir, opts))
	v := must(NewValueState(s, ValueDescriptor[[]byte]{Name: "v", Codec: Bytes}))
	n := mult * lsmBenchBudget / lsmBenchValue
	bk := getBenchKeys(n)
	val := make([]byte, lsmBenchValue)
	for _, i := range bk.order {
		binary.LittleEndian.PutUint32(val, uint32(i))
		if err := v.Put(s.Key(bk.key(i)), val); err != nil {
			b.Fatal(err)
		}
	}
	must(0, s.Close())
	s = must(Open(dir, opts))
	v = must(NewValueState(s, ValueDescriptor[[]byte]{Name: "v", Codec: Bytes}))
	return &lsmBenchStore{s: s, v: v, keys: n, dir: dir}
}

func (l *lsmBenchStore) close() {
	l.s.Close()
	os.RemoveAll(l.dir)
}

// zipf draws from [0, n) with P(i) ∝ 1/(i+1)^theta, theta < 1 (YCSB's ZipfianGenerator, which
// math/rand's Zipf cannot do: it needs s > 1). Rank i is then scrambled to a key so that the
// hot keys spread over the key space.
type zipf struct {
	n                        int
	theta, alpha, zetan, eta float64
	rng                      *rand.Rand
}

func newZipf(n int, theta float64, seed uint64) *zipf {
	z := &zipf{n: n, theta: theta, rng: rand.New(rand.NewPCG(seed, seed+1))}
	zeta := func(m int) float64 {
		s := 0.0
		for i := 1; i <= m; i++ {
			s += 1 / math.Pow(float64(i), theta)
		}
		return s
	}
	z.zetan = zeta(n)
	z.alpha = 1 / (1 - theta)
	z.eta = (1 - math.Pow(2/float64(n), 1-theta)) / (1 - zeta(2)/z.zetan)
	return z
}

func (z *zipf) next() int {
	u := z.rng.Float64()
	uz := u * z.zetan
	if uz < 1 {
		return 0
	}
	if uz < 1+math.Pow(0.5, z.theta) {
		return 1
	}
	return int(float64(z.n) * math.Pow(z.eta*u-z.eta+1, z.alpha))
}

// BenchmarkPointGet: ValueState.Get of 1 KiB values in a Store holding 1×, 4× or 10× its
// 64 MiB budget, keys drawn uniformly or Zipf(0.99) (rank scrambled over the keys). Reports
// the block cache's hit ratio. Every read is checked.
func BenchmarkPointGet(b *testing.B) {
	for _, mult := range []int{1, 4, 10} {
		var l *lsmBenchStore
		for _, dist := range []string{"uniform", "zipf0.99"} {
			b.Run(fmt.Sprintf("budget=64MiB/state=%dx/dist=%s", mult, dist), func(b *testing.B) {
				if l == nil {
					l = openLSMBench(b, mult)
				}
				bk := getBenchKeys(l.keys)
				draw := func() int32 { return bk.order[rand.IntN(l.keys)] }
				if dist != "uniform" {
					z := newZipf(l.keys, 0.99, 7)
					draw = func() int32 { return bk.order[z.next()] }
				}
				const batch = 1 << 14
				idx := make([]int32, batch)
				for i := range idx {
					idx[i] = draw()
				}
				st0 := l.s.Stats()
				b.ReportAllocs()
				b.SetBytes(lsmBenchValue)
				b.ResetTimer()
				for n := range b.N {
					i := idx[n&(batch-1)]
					x, ok, err := l.v.Get(l.s.Key(bk.key(i)))
					if !ok || err != nil || binary.LittleEndian.Uint32(x) != uint32(i) {
						b.Fatalf("key %d: %v %v", i, ok, err)
					}
				}
				b.StopTimer()
				st := l.s.Stats()
				if h, m := st.Caches.BlockHits-st0.Caches.BlockHits, st.Caches.BlockMisses-st0.Caches.BlockMisses; h+m > 0 {
					b.ReportMetric(float64(h)/float64(h+m), "cache-hit-ratio")
				}
			})
		}
		if l != nil {
			l.close()
		}
	}
}

// BenchmarkPutSustained: ValueState.Put of 1 KiB values over a key space of 4× the 64 MiB
// budget, uniformly, so the FreshTable keeps sealing, segments keep flowing to the LsmStore and
// its compactions run throughout. Reports MB/s of values put, the table bytes written per byte
// put (disk-bytes/put-byte, including compactions) and the LSM's own write amplification
// (bytes written per byte evicted into it), and the writes that waited for memory or L0.
func BenchmarkPutSustained(b *testing.B) {
	b.Run("budget=64MiB/keys=4x/value=1KiB", func(b *testing.B) {
		dir := b.TempDir()
		s := must(Open(dir, Options{MemoryBudget: lsmBenchBudget, SegmentSize: 16 << 20}))
		defer s.Close()
		v := must(NewValueState(s, ValueDescriptor[[]byte]{Name: "v", Codec: Bytes}))
		n := 4 * lsmBenchBudget / lsmBenchValue
		bk := getBenchKeys(n)
		val := make([]byte, lsmBenchValue)
		rng := rand.New(rand.NewPCG(3, 4))
		st0 := s.Stats()
		b.ReportAllocs()
		b.SetBytes(lsmBenchValue)
		b.ResetTimer()
		for range b.N {
			i := bk.order[rng.IntN(n)]
			binary.LittleEndian.PutUint32(val, uint32(i))
			if err := v.Put(s.Key(bk.key(i)), val); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		st := s.Stats()
		put := float64(b.N) * lsmBenchValue
		b.ReportMetric(float64(st.LSM.WrittenBytes-st0.LSM.WrittenBytes)/put, "disk-bytes/put-byte")
		b.ReportMetric(st.LSM.WriteAmplification, "lsm-write-amp")
		b.ReportMetric(float64(st.Stalls.BackpressureWaits-st0.Stalls.BackpressureWaits)/float64(b.N), "mem-waits/op")
		b.ReportMetric(float64(st.Stalls.L0-st0.Stalls.L0)/float64(b.N), "l0-stalls/op")
	})
}
