package suite

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"

	"github.com/strata-db/strata/bench/peers"
)

// SizeLabel formats a key count as benchmark names show it: 500K, 1M, 10M.
func SizeLabel(n int) string {
	switch {
	case n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n%1_000 == 0:
		return fmt.Sprintf("%dK", n/1_000)
	}
	return fmt.Sprint(n)
}

// Perm returns a permutation of [base, base+n) shuffled with seed, as
// Flink's StateBenchmarkConstants shuffle their key arrays.
func Perm(base, n int, seed uint64) []int32 {
	p := make([]int32, n)
	for i := range p {
		p[i] = int32(base + i)
	}
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	rng.Shuffle(n, func(i, j int) { p[i], p[j] = p[j], p[i] })
	return p
}

// Uniform returns count key ids drawn uniformly from [0, n).
func Uniform(n, count int, seed uint64) []int32 {
	rng := rand.New(rand.NewPCG(seed, 0x0417))
	s := make([]int32, count)
	for i := range s {
		s[i] = int32(rng.IntN(n))
	}
	return s
}

// Zipf returns count key ids in [0, n) whose ranks follow a Zipf
// distribution with exponent theta (P(rank r) ∝ 1/r^theta, r = 1..n; theta
// 1 for Gadget, 0.99 for YCSB). Ranks are drawn by inverting the exact CDF
// and then mapped through a fixed random permutation of the ids, as YCSB's
// ScrambledZipfianGenerator, so that hot keys are not neighbours in key
// order.
func Zipf(n int, theta float64, count int, seed uint64) []int32 {
	cdf := make([]float64, n)
	sum := 0.0
	for r := range n {
		sum += 1 / math.Pow(float64(r+1), theta)
		cdf[r] = sum
	}
	for r := range cdf {
		cdf[r] /= sum
	}
	scramble := Perm(0, n, seed^0x9e3779b97f4a7c15)
	rng := rand.New(rand.NewPCG(seed, 0x21bf))
	s := make([]int32, count)
	for i := range s {
		r := sort.SearchFloat64s(cdf, rng.Float64())
		if r >= n {
			r = n - 1
		}
		s[i] = scramble[r]
	}
	return s
}

// LongKey writes id as an 8-byte big-endian Long (Flink's LongSerializer)
// into dst and returns it.
func LongKey(dst *[8]byte, id int64) []byte {
	binary.BigEndian.PutUint64(dst[:], uint64(id))
	return dst[:]
}

// Shape is how the point-op rows serialize a key id, named in the benchmark path as
// key=<Name> so that gates and benchstat can address it.
type Shape struct {
	// Name is the path element's value: "8B" or "16B+ns8B".
	Name string
	// Wide selects the 16 B key in an 8 B namespace; false is the 8 B Long in the void
	// namespace.
	Wide bool
}

// Shapes are the key shapes every point-op row runs with (issue 14, "honest gates"):
//
//   - key=8B: an 8-byte big-endian Long (LongKey) in Flink's VoidNamespace, as Flink's state
//     micro-benchmarks and FASTER's YCSB run;
//   - key=16B+ns8B: a 16-byte key (an 8-byte hash prefix, then the 8-byte id: a serialized
//     composite or string key) in one 8-byte namespace (a window's end timestamp), the rows of
//     a windowed job. The composite key every byte-keyed peer writes grows from 10 B to 26 B,
//     Strata's from 13 B to 29 B.
var Shapes = []Shape{{Name: "8B"}, {Name: "16B+ns8B", Wide: true}}

// WindowNS is the namespace of the wide key shape: one window, ending at 1.7e12 ms
// (2023-11-14), as an 8-byte big-endian Long.
var WindowNS = binary.BigEndian.AppendUint64(nil, 1_700_000_000_000)

// Keyer serializes key ids in one Shape into a buffer it reuses: a returned Key is valid until
// the next call (peers.Store does not retain keys). Key allocates nothing.
type Keyer struct {
	wide bool
	buf  [16]byte
}

// NewKeyer returns a Keyer for shape s.
func NewKeyer(s Shape) *Keyer { return &Keyer{wide: s.Wide} }

// Key returns the key of id.
func (k *Keyer) Key(id int64) peers.Key {
	if !k.wide {
		return peers.Key{K: LongKey((*[8]byte)(k.buf[:8]), id)}
	}
	binary.BigEndian.PutUint64(k.buf[:8], uint64(id)*0x9e3779b97f4a7c15)
	binary.BigEndian.PutUint64(k.buf[8:], uint64(id))
	return peers.Key{K: k.buf[:], NS: WindowNS}
}

// Values returns count pseudo-random values of size bytes each, backed by
// one array (RANDOM_VALUES in Flink's benchmarks).
func Values(count, size int, seed uint64) [][]byte {
	rng := rand.New(rand.NewPCG(seed, 0x7a1e))
	buf := make([]byte, count*size)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	v := make([][]byte, count)
	for i := range v {
		v[i] = buf[i*size : (i+1)*size : (i+1)*size]
	}
	return v
}

// Events is a Gadget-style event stream: key ids and the tumbling window
// each event falls into, in event-time order.
type Events struct {
	Keys    []int32
	Windows []int32 // non-decreasing
}

// GadgetEvents generates count events: keys Zipf(theta) over n, event-time
// gaps exponential with rate lambda, tumbling windows of length window
// (Gadget's defaults: theta 1, n 1M, lambda 10, window 5: about 50 events
// per window).
func GadgetEvents(n int, theta, lambda, window float64, count int, seed uint64) Events {
	e := Events{Keys: Zipf(n, theta, count, seed), Windows: make([]int32, count)}
	rng := rand.New(rand.NewPCG(seed, 0x6ad6))
	t := 0.0
	for i := range e.Windows {
		t += rng.ExpFloat64() / lambda
		e.Windows[i] = int32(t / window)
	}
	return e
}

// Percentile returns the p-th percentile (0 < p < 1) of xs, sorting xs in
// place; 0 for no samples.
func Percentile(xs []int64, p float64) int64 {
	if len(xs) == 0 {
		return 0
	}
	sort.Slice(xs, func(i, j int) bool { return xs[i] < xs[j] })
	i := int(math.Ceil(p*float64(len(xs)))) - 1
	return xs[max(0, min(i, len(xs)-1))]
}
