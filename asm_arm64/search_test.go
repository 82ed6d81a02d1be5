package asm_arm64

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
)

type windowKernel struct {
	name      string
	asm, twin func([]uint64, uint64) int
}

// TestKernelInUse asserts that LowerBound dispatches to the implementation
// of Impl (not merely that Impl reports the right family).
func TestKernelInUse(t *testing.T) {
	want := map[Implementation]string{
		ImplGeneric: "lowerBoundGo", ImplNEON: "lowerBoundNEON", ImplSVE: "lowerBoundSVE",
	}[Impl()]
	name := runtime.FuncForPC(reflect.ValueOf(lowerBound).Pointer()).Name()
	name = name[strings.LastIndexByte(name, '.')+1:]
	t.Logf("impl=%s LowerBound -> %s", Impl(), name)
	if name != want {
		t.Fatalf("LowerBound dispatches to %s, want %s for impl %s", name, want, Impl())
	}
}

// sizes are the edge sizes for one vector of vl 64-bit lanes, plus the
// window edges and a full 32 KiB slice.
func sizes(vl int) []int {
	s := []int{0, 1, 2, 3, 4, 5, 7, 8, 9, Window - 1, Window, Window + 1, 2*Window + 3, 511, 512, 4096}
	for _, v := range []int{vl, 2 * vl, 3 * vl} {
		s = append(s, v-1, v, v+1)
	}
	slices.Sort(s)
	return slices.Compact(s)
}

// lanes is the vector length in 64-bit elements (2 for NEON/generic).
func lanes() int {
	if v := CPU().VectorBits; v > 0 {
		return v / 64
	}
	return 2
}

// sortedFPs returns n ascending fingerprints: spread over the whole range
// (and its extremes), or with long duplicate runs from a small alphabet.
func sortedFPs(r *rand.Rand, n int, dups bool) []uint64 {
	s := make([]uint64, n)
	for i := range s {
		switch {
		case dups:
			s[i] = uint64(r.IntN(8)) * (math.MaxUint64 / 7) // 0 .. MaxUint64, 8 values
		default:
			s[i] = r.Uint64()
		}
	}
	slices.Sort(s)
	return s
}

// probes returns the interesting search keys for s: below and above
// everything, every element and its neighbours, the extremes, random.
func probes(r *rand.Rand, s []uint64) []uint64 {
	p := []uint64{0, 1, math.MaxUint64, math.MaxUint64 - 1, 1 << 63, 1<<63 - 1}
	step := max(1, len(s)/64)
	for i := 0; i < len(s); i += step {
		p = append(p, s[i], s[i]-1, s[i]+1)
	}
	if len(s) > 0 {
		p = append(p, s[len(s)-1], s[len(s)-1]+1, s[0]-1)
	}
	for range 16 {
		p = append(p, r.Uint64())
	}
	return p
}

func refLowerBound(s []uint64, x uint64) int {
	i, _ := slices.BinarySearch(s, x)
	return i
}

func refEqualRange(s []uint64, x uint64) (int, int) {
	lo := refLowerBound(s, x)
	hi := lo
	for hi < len(s) && s[hi] == x {
		hi++
	}
	return lo, hi
}

// TestLowerBound checks every LowerBound implementation and the dispatched
// LowerBound/EqualRange against slices.BinarySearch.
func TestLowerBound(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	impls := lowerBounds()
	impls["LowerBound"] = LowerBound
	for _, n := range sizes(lanes()) {
		for _, dups := range []bool{false, true} {
			s := sortedFPs(r, n, dups)
			for _, x := range probes(r, s) {
				want := refLowerBound(s, x)
				for name, f := range impls {
					if got := f(s, x); got != want {
						t.Fatalf("%s(n=%d dups=%v, x=%#x) = %d, want %d", name, n, dups, x, got, want)
					}
				}
				wlo, whi := refEqualRange(s, x)
				if lo, hi := EqualRange(s, x); lo != wlo || hi != whi {
					t.Fatalf("EqualRange(n=%d dups=%v, x=%#x) = %d,%d, want %d,%d", n, dups, x, lo, hi, wlo, whi)
				}
			}
		}
	}
}

// TestLowerBoundAllEqual covers the duplicate-run edge: everything equal,
// including the all-ones fingerprint that has no successor.
func TestLowerBoundAllEqual(t *testing.T) {
	for _, v := range []uint64{0, 42, math.MaxUint64} {
		for _, n := range sizes(lanes()) {
			s := slices.Repeat([]uint64{v}, n)
			for _, x := range []uint64{v - 1, v, v + 1} {
				wlo, whi := refEqualRange(s, x)
				if lo, hi := EqualRange(s, x); lo != wlo || hi != whi {
					t.Fatalf("EqualRange(%d x %#x, %#x) = %d,%d, want %d,%d", n, v, x, lo, hi, wlo, whi)
				}
			}
		}
	}
}

// TestWindowKernels checks each assembly scan kernel against its Go twin on
// sorted, unsorted and duplicate-heavy inputs of every edge size, and on
// sub-slices that start at every alignment.
func TestWindowKernels(t *testing.T) {
	ks := windowKernels()
	if len(ks) == 0 {
		t.Skipf("no assembly kernels in this build (impl=%s)", Impl())
	}
	r := rand.New(rand.NewPCG(3, 4))
	for _, k := range ks {
		for _, n := range sizes(lanes()) {
			for _, kind := range []string{"sorted", "dups", "random"} {
				s := sortedFPs(r, n+3, kind == "dups")
				if kind == "random" {
					r.Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] })
				}
				for off := range 3 {
					w := s[off : off+n]
					for _, x := range probes(r, w) {
						if got, want := k.asm(w, x), k.twin(w, x); got != want {
							t.Fatalf("%s(%s n=%d off=%d, x=%#x) = %d, want %d", k.name, kind, n, off, x, got, want)
						}
					}
				}
			}
		}
		t.Logf("%s: ok at %d lanes", k.name, lanes())
	}
}

// TestMatchTag8 checks MatchTag8 against a byte loop, and each assembly
// tag-match kernel against MatchTag8.
func TestMatchTag8(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	ref := func(ctrl uint64, tag byte) uint64 {
		var m uint64
		for i := range 8 {
			if byte(ctrl>>(8*i)) == tag {
				m |= 0x80 << (8 * i)
			}
		}
		return m
	}
	alphabet := []byte{0, 1, 0x7f, 0x80, 0x81, 0xfe, 0xff}
	check := func(ctrl uint64, tag byte) {
		want := ref(ctrl, tag)
		if got := MatchTag8(ctrl, tag); got != want {
			t.Fatalf("MatchTag8(%#016x, %#x) = %#016x, want %#016x", ctrl, tag, got, want)
		}
		for name, f := range matchKernels() {
			if got := f(ctrl, tag); got != want {
				t.Fatalf("%s(%#016x, %#x) = %#016x, want %#016x", name, ctrl, tag, got, want)
			}
		}
	}
	for range 20000 {
		var ctrl uint64
		for i := range 8 { // bytes from a small alphabet so matches and near-misses are common
			ctrl |= uint64(alphabet[r.IntN(len(alphabet))]) << (8 * i)
		}
		for _, tag := range alphabet {
			check(ctrl, tag)
		}
		check(r.Uint64(), byte(r.Uint32()))
	}
}

var sink int

// BenchmarkLowerBound compares the dispatched LowerBound (the Go twin on
// amd64), the twin itself and slices.BinarySearch on ascending random
// fingerprint arrays. Probes alternate present and absent keys. probes=64Ki
// is the realistic case; with probes=1Ki the probe list repeats often enough
// for the branch predictor to learn the branchy search's path, which
// flatters slices.BinarySearch.
func BenchmarkLowerBound(b *testing.B) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, n := range []int{64, 512, 4096} {
		s := sortedFPs(r, n, false)
		xs := make([]uint64, 1<<16)
		for i := range xs {
			if i%2 == 0 {
				xs[i] = s[r.IntN(n)]
			} else {
				xs[i] = r.Uint64()
			}
		}
		impls := []struct {
			name string
			f    func([]uint64, uint64) int
		}{
			{"LowerBound/" + string(Impl()), LowerBound},
			{"go", lowerBoundGo},
			{"slices.BinarySearch", refLowerBound},
		}
		for _, probes := range []int{1 << 10, 1 << 16} {
			for _, im := range impls {
				b.Run(fmt.Sprintf("impl=%s/keys=%d/probes=%dKi", im.name, n, probes>>10), func(b *testing.B) {
					b.ReportAllocs()
					acc := 0
					for i := 0; b.Loop(); i++ {
						acc += im.f(s, xs[i&(probes-1)])
					}
					sink = acc
				})
			}
		}
	}
}

var sink64 uint64

// BenchmarkMatchTag8 measures the inlined SWAR match against each assembly
// kernel called through a function value (the ABI0 call a dispatched kernel
// would cost).
func BenchmarkMatchTag8(b *testing.B) {
	ctrl := uint64(0x80a1b2c3d4e5f601)
	b.Run("impl=swar-inline", func(b *testing.B) {
		b.ReportAllocs()
		var acc uint64
		for i := 0; b.Loop(); i++ {
			acc += MatchTag8(ctrl+uint64(i), byte(i))
		}
		sink64 = acc
	})
	fns := matchKernels()
	if fns == nil {
		fns = map[string]func(uint64, byte) uint64{}
	}
	fns["swar-funcvalue"] = MatchTag8
	for name, f := range fns {
		b.Run("impl="+name, func(b *testing.B) {
			b.ReportAllocs()
			var acc uint64
			for i := 0; b.Loop(); i++ {
				acc += f(ctrl+uint64(i), byte(i))
			}
			sink64 = acc
		})
	}
}
