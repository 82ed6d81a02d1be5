package engine

import (
	"cmp"
	"context"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/strata-db/strata/internal/base"
)

// TestRadixSortSegRecs checks the transform's radix sort against a stable comparison sort, on
// short and long inputs, with shared digits (skipped passes) and many equal orders.
func TestRadixSortSegRecs(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var tmp []segRec
	for _, n := range []int{0, 1, 2, 63, 64, 65, 1000, 100_000} {
		for _, mode := range []string{"random", "few", "highonly", "lowonly", "keygroup", "correlated"} {
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
				case "keygroup": // one key group's prefix: three passes, the top digit varies little
					o = 5<<57 | r.Uint64()>>7
				case "correlated": // the top two digits repeat one value: the insertion sort gives up
					x := uint64(r.IntN(512))
					o = x<<55 | x<<44 | r.Uint64()>>20
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

// TestSegmentEntriesOrder seals a segment of maps whose user keys take both tie-break paths
// (short keys ordered without decoding; long keys, prefixes with zero bytes, cleared maps with
// a base header, removed entries, values and lists beside them) and checks that segmentEntries
// yields every live record once, in base.Compare order.
func TestSegmentEntriesOrder(t *testing.T) {
	s := openTest(t, Options{})
	r := rand.New(rand.NewPCG(3, 4))
	uks := [][]byte{{}, {0}, {0, 0}, []byte("a"), []byte("a\x00"), []byte("ab"), []byte("abcdefgh"),
		[]byte("abcdefgh\x00"), []byte("abcdefghi"), []byte("abcdefghij"), []byte("zz"), []byte("\xff\xff\xff\xff\xff\xff\xff\xff\xff")}
	for k := range 2000 {
		kb := []byte{byte(k >> 8), byte(k), 7}
		mk, hm := testKey(1, kb)
		for range 1 + r.IntN(12) {
			uk := uks[r.IntN(len(uks))]
			if k%3 == 0 {
				uk = append([]byte(nil), uk[:min(len(uk), 8)]...) // short keys only: the fast path
			}
			switch x := r.IntN(20); {
			case x == 0:
				must(0, s.Apply(Op{Kind: OpMapClear, Hash: hm, Key: mk}))
			case x < 3:
				must(0, s.Apply(opMapRemove(mk, hm, uk)))
			default:
				must(0, s.Apply(opMapPut(mk, hm, uk, []byte{byte(x)})))
			}
		}
		if k%5 == 0 {
			vk, vh := testKey(2, kb)
			must(0, s.Apply(opPut(vk, vh, []byte("v"))))
			lk, lh := testKey(3, kb)
			must(0, s.Apply(Op{Kind: OpListAppend, Hash: lh, Key: lk, Value: frame([]byte("l"))}))
		}
	}
	if err := s.f.Seal(); err != nil {
		t.Fatal(err)
	}
	sealed := s.f.Sealed()
	seg := sealed[len(sealed)-1]
	want := 0
	for it := seg.Entries(); it.Next(); {
		want++
	}
	it, err := s.segmentEntries(context.Background(), seg)
	if err != nil {
		t.Fatal(err)
	}
	defer it.release()
	var prev base.Entry
	got := 0
	for it.Next() {
		e := *it.Entry()
		if got > 0 && base.Compare(&prev, &e) >= 0 {
			t.Fatalf("entry %d out of order: %v %q %q seq %d after %v %q %q seq %d", got,
				e.Kind, e.Key, e.UserKey, e.Seq, prev.Kind, prev.Key, prev.UserKey, prev.Seq)
		}
		prev = e
		got++
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	if got != want || got == 0 {
		t.Fatalf("segmentEntries yielded %d entries, the segment has %d", got, want)
	}
}
