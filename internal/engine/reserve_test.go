package engine

import (
	"bytes"
	"testing"

	"github.com/strata-db/strata/memory"
)

// TestReserveFollowsTransforms: the transform reserve starts at two segments, follows the
// measured output of the transforms (invariant 31) — one segment for small live output (many
// overwrites of few keys), two for values of 9 KiB that fill 16 KiB blocks poorly — goes back
// to two after a failure for memory, and returns to the budget at Close.
func TestReserveFollowsTransforms(t *testing.T) {
	const seg = 4 << 20
	b := memory.NewBudget(64 << 20)
	e := openTest(t, Options{Dir: t.TempDir(), Budget: b, SegmentSize: seg})
	if r := b.Reserve(); r != 2*seg {
		t.Fatalf("reserve at Open %d, want %d", r, 2*seg)
	}
	put := func(keys, n int, v []byte) {
		t.Helper()
		for i := 0; i < n; i++ {
			k, h := testKey(1, u64(uint64(i%keys)))
			if err := e.Apply(opPut(k, h, v)); err != nil {
				t.Fatalf("put %d: %v", i, err)
			}
		}
		if err := e.Seal(); err != nil {
			t.Fatal(err)
		}
		if err := e.Drain(); err != nil {
			t.Fatal(err)
		}
	}
	check := func(what string, want int64) {
		t.Helper()
		var most int64
		for _, o := range e.reserveOut[:min(e.reserveN, reserveWindow)] {
			most = max(most, o)
		}
		if e.reserveN == 0 {
			t.Fatalf("%s: no transform recorded", what)
		}
		if r := b.Reserve(); r != want || r != e.reserve {
			t.Fatalf("%s: reserve %d (engine says %d), want %d; largest output %d of %d transforms",
				what, r, e.reserve, want, most, e.reserveN)
		}
		if r := b.Reserve(); r < seg || r > 2*seg || r < most+most/8 {
			t.Fatalf("%s: reserve %d breaks invariant 31 (largest output %d)", what, r, most)
		}
	}
	// 200 keys of 100 B overwritten: each transform keeps 200 live records.
	put(200, 60000, bytes.Repeat([]byte{1}, 100))
	check("small output", seg)

	e.sizeReserve(-1)
	if r := b.Reserve(); r != 2*seg {
		t.Fatalf("after a failure for memory: reserve %d, want %d", r, 2*seg)
	}
	put(200, 2000, bytes.Repeat([]byte{2}, 100))
	check("small output again", seg)

	// 9 KiB values, each alone in a 16 KiB block: a segment's slices take more than a segment.
	put(1<<20, 1200, bytes.Repeat([]byte{3}, 9<<10))
	check("large output", 2*seg)

	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if r := b.Reserve(); r != 0 {
		t.Fatalf("reserve after Close %d", r)
	}
}
