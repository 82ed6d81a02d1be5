package slice

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"

	"github.com/strata-db/strata/internal/base"
)

// TestFilter checks the miss filter alone: no false negatives, and a false
// positive rate near the split-block bloom filter's at 10 bits per key
// (about 1 %), for order hashes that share their top bits as a bucket's do.
func TestFilter(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	var fp, queries int
	for _, n := range []int{1, 2, 7, 51, 52, 150, 400, 1365} {
		fps := make([]uint64, n)
		top := rng.Uint64() &^ (1<<54 - 1) // one bucket of 1024
		for i := range fps {
			fps[i] = top | rng.Uint64()>>10
		}
		slices.Sort(fps)
		f := make([]uint64, filterLines(n)*filterLineWords)
		buildFilter(f, fps)
		s := &Slice{filter: f}
		for _, o := range fps {
			if !s.mayHold(o) {
				t.Fatalf("n=%d: false negative for %#x", n, o)
			}
		}
		for i := 0; i < 20000; i++ {
			o := top | rng.Uint64()>>10
			if _, ok := slices.BinarySearch(fps, o); ok {
				continue
			}
			queries++
			if s.mayHold(o) {
				fp++
			}
		}
	}
	rate := float64(fp) / float64(queries)
	t.Logf("false positives: %d of %d (%.2f %%)", fp, queries, 100*rate)
	if rate > 0.03 {
		t.Fatalf("false positive rate %.2f %% above 3 %%", 100*rate)
	}
	if (&Slice{}).mayHold(1) != true {
		t.Fatal("a slice without a filter must answer maybe")
	}
}

// TestFilterSlices checks that built slices carry a filter that holds all
// their order hashes, that a lookup of an absent key misses through it, and
// that a relocation moves the filter with the slice.
func TestFilterSlices(t *testing.T) {
	e := newEnvSeg(t, MinSliceSize, 4, Options{BucketBits: 2, CompactionThreshold: 100})
	rng := rand.New(rand.NewSource(2))
	have := map[uint64]bool{}
	var es []base.Entry
	for i := 0; i < 3000; i++ {
		o := rng.Uint64()
		have[o] = true
		es = append(es, kv(o, fmt.Sprintf("k%d", i), uint64(i+1), "value-value"))
	}
	e.install(t, es...)
	check := func(when string) {
		t.Helper()
		n := 0
		for b := range e.t.buckets {
			for _, r := range e.t.buckets[b].runs {
				for _, s := range r.slices {
					n++
					if !s.filtered || len(s.filter) != filterLines(s.count)*filterLineWords {
						t.Fatalf("%s: a slice of %d entries without its filter", when, s.count)
					}
					want := make([]uint64, len(s.filter))
					buildFilter(want, s.fps)
					if !slices.Equal(want, s.filter) {
						t.Fatalf("%s: a slice's filter is not that of its order hashes", when)
					}
				}
			}
		}
		if n < 10 {
			t.Fatalf("%s: only %d slices", when, n)
		}
		for i, x := range es {
			if v, st := e.t.Get(x.Order, x.Key); st != Found || string(v) != "value-value" {
				t.Fatalf("%s: entry %d: %q, %v", when, i, v, st)
			}
		}
		for i := 0; i < 3000; i++ {
			o := rng.Uint64()
			if have[o] {
				continue
			}
			if _, st := e.t.Get(o, []byte("absent")); st != Absent {
				t.Fatalf("%s: absent key: %v", when, st)
			}
		}
	}
	check("built")

	// A relocation moves the filter with the slice's bytes.
	f := fragmentedEnv(t)
	if n := relocateAll(t, f.t); n == 0 {
		t.Fatal("no relocation")
	}
	moved := 0
	for b := range f.t.buckets {
		for _, r := range f.t.buckets[b].runs {
			for _, s := range r.slices {
				want := make([]uint64, filterLines(s.count)*filterLineWords)
				buildFilter(want, s.fps)
				if !s.filtered || !slices.Equal(want, s.filter) {
					t.Fatal("a relocated slice lost its filter")
				}
				moved++
			}
		}
	}
	if moved == 0 {
		t.Fatal("no slice left after the relocations")
	}
}
