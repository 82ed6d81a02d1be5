package slice

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestOrderRangeMatchesReference checks the interpolated lower bound and the
// galloping range end against a plain search, on uniform, skewed, clumped
// and extreme fingerprint arrays.
func TestOrderRangeMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	gens := map[string]func(n int) []uint64{
		"uniform": func(n int) []uint64 {
			f := make([]uint64, n)
			for i := range f {
				f[i] = rng.Uint64()
			}
			return f
		},
		"skewed": func(n int) []uint64 { // most values tiny, a few huge
			f := make([]uint64, n)
			for i := range f {
				if rng.IntN(10) == 0 {
					f[i] = ^uint64(0) - rng.Uint64N(1000)
				} else {
					f[i] = rng.Uint64N(1 << 20)
				}
			}
			return f
		},
		"clumped": func(n int) []uint64 { // maps: runs of equal order hashes
			var f []uint64
			for len(f) < n {
				v, k := rng.Uint64(), 1+rng.IntN(40)
				for range k {
					f = append(f, v)
				}
			}
			return f[:n]
		},
		"extremes": func(n int) []uint64 {
			f := make([]uint64, n)
			for i := range f {
				switch rng.IntN(3) {
				case 0:
					f[i] = 0
				case 1:
					f[i] = ^uint64(0)
				default:
					f[i] = rng.Uint64()
				}
			}
			return f
		},
	}
	for name, gen := range gens {
		for _, n := range []int{1, 2, 63, 64, 65, 100, 250, 1000, 2000} {
			for range 20 {
				fps := gen(n)
				slices.Sort(fps)
				s := &Slice{fps: fps, count: n, minOrder: fps[0], maxOrder: fps[n-1]}
				s.setScale()
				probes := []uint64{0, 1, ^uint64(0), ^uint64(0) - 1, fps[0], fps[n-1], fps[n/2], fps[n/2] + 1, fps[n/2] - 1}
				for range 200 {
					probes = append(probes, rng.Uint64(), fps[rng.IntN(n)])
				}
				for _, o := range probes {
					want, _ := slices.BinarySearch(fps, o)
					if got := s.lowerBoundFP(o); got != want {
						t.Fatalf("%s n=%d: lowerBoundFP(%#x) = %d, want %d", name, n, o, got, want)
					}
					// Exact whatever the interpolation factor: none, too small, too large.
					for _, sc := range []float64{0, s.scale / 7, s.scale * 13} {
						if got := searchUniform(fps, o, fps[0], sc); got != want {
							t.Fatalf("%s n=%d scale %g: searchUniform(%#x) = %d, want %d", name, n, sc, o, got, want)
						}
					}
					wantHi := want
					for wantHi < n && fps[wantHi] == o {
						wantHi++
					}
					lo, hi := s.orderRange(o)
					if lo != want || hi != wantHi {
						t.Fatalf("%s n=%d: orderRange(%#x) = [%d, %d), want [%d, %d)", name, n, o, lo, hi, want, wantHi)
					}
				}
			}
		}
	}
}
