package fresh

import (
	"encoding/binary"
	"testing"
)

// TestIndexHint: once a segment was sealed full, the next active segment maps its index at the
// size the full one ended with, so a steady workload fills it without doubling (doc.go, "Index
// size"); a segment sealed early does not shrink that start; before any seal, and when the
// budget refuses the larger map, the index starts at minIndexBytes and grows as before.
func TestIndexHint(t *testing.T) {
	tb, _ := newTestTable(t, 64<<20, 4<<20, 0)
	key := make([]byte, 8)
	val := make([]byte, 100)
	put := func(i uint64) {
		binary.BigEndian.PutUint64(key, i)
		if err := tb.Put(hashOf(key), key, val); err != nil {
			t.Fatal(err)
		}
	}
	i := uint64(0)
	if tb.Prepare() != nil || len(tb.active.idx) != minIndexBytes {
		t.Fatalf("first segment's index %d bytes, want %d", len(tb.active.idx), minIndexBytes)
	}
	first := tb.active
	for tb.active == first {
		put(i)
		i++
	}
	full := len(first.idx)
	if full <= minIndexBytes {
		t.Fatalf("a full segment's index is %d bytes: the test needs one that grew", full)
	}
	second := tb.active
	if len(second.idx) != full {
		t.Fatalf("next segment's index %d bytes, want the full one's %d", len(second.idx), full)
	}
	// The same records fill it without a doubling: the index stays where it started.
	for tb.active == second {
		if len(second.idx) != full {
			t.Fatalf("the hinted index doubled to %d bytes after %d records", len(second.idx), second.count)
		}
		put(i)
		i++
	}

	// A segment sealed early (a checkpoint's cut) keeps the hint: the next one starts full size.
	put(i)
	i++
	if err := tb.Seal(); err != nil {
		t.Fatal(err)
	}
	put(i)
	i++
	if len(tb.active.idx) != full {
		t.Fatalf("after an early seal the next index is %d bytes, want %d", len(tb.active.idx), full)
	}

	// A budget that cannot take the hinted size: the index starts small, as before the hint.
	small, _ := newTestTable(t, 4<<20+8192, 4<<20, 0)
	small.idxHint = 1 << 20
	if err := small.Prepare(); err != nil {
		t.Fatal(err)
	}
	if len(small.active.idx) != minIndexBytes {
		t.Fatalf("index %d bytes under a budget without room for the hint, want %d", len(small.active.idx), minIndexBytes)
	}
}
