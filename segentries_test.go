package strata

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestRadixSortSegRecs checks the transform's radix sort against a stable comparison sort, on
// short and long inputs, with shared digits (skipped passes) and many equal orders.
func TestRadixSortSegRecs(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var tmp []segRec
	for _, n := range []int{0, 1, 2, 63, 64, 65, 1000, 100_000} {
		for _, mode := range []string{"random", "few", "highonly", "lowonly"} {
			recs := make([]segRec, n)
			for i := range recs {
				var o uint64
				switch mode {
				case "random":
					o = r.Uint64()
				case "few":
					o = uint64(r.IntN(7)) << 40
				case "highonly":
					o = r.Uint64() &^ (1<<56 - 1)
				case "lowonly":
					o = uint64(r.IntN(300))
				}
				recs[i] = segRec{order: o, hash: uint64(i), off: uint32(i)}
			}
			want := slices.Clone(recs)
			slices.SortStableFunc(want, func(a, b segRec) int { return cmp.Compare(a.order, b.order) })
			tmp = radixSortSegRecs(recs, tmp)
			if !slices.Equal(recs, want) {
				t.Fatalf("n %d %s: radix sort differs from a stable sort", n, mode)
			}
		}
	}
}
