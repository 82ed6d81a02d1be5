package engine

import (
	"encoding/binary"
	"errors"
	"testing"
)

// TestListStreamsFromLSM: a list longer than a read copies at once (lowListEager), all in the
// LsmStore after a reopen, is left in the LowerList as pieces (LowerList.Pieces) and reads back
// whole, element by element, oldest first; a LowerList advanced after a write stops with
// ErrIteratorInvalidated instead of reading pieces a compaction may have replaced. (Moved from
// the root package, issue 26: the root's ListIterator is this walk.)
func TestListStreamsFromLSM(t *testing.T) {
	const l = 1
	h := newHarness(t, Options{Dir: t.TempDir(), EvictionRoom: 20 << 20})
	key := []byte("long")
	const n = 3000 // 3000 × 500 bytes: 1.5 MiB, two pieces or more
	elem := make([]byte, 500)
	for i := range n {
		binary.BigEndian.PutUint64(elem, uint64(i))
		h.listAdd(l, key, elem)
	}
	h.reopen()
	var ll LowerList
	batches, ok := h.listGet(l, key, &ll)
	if !ok {
		t.Fatal("list absent after reopen")
	}
	if ll.Pieces() == 0 || !ll.Pending() {
		t.Fatalf("a 1.5 MiB list in the LsmStore was copied at once (%d batches), not streamed", len(batches))
	}
	i := 0
	check := func(b []byte) {
		t.Helper()
		for _, v := range unframe(t, b) {
			if len(v) != 500 || binary.BigEndian.Uint64(v) != uint64(i) {
				t.Fatalf("element %d: %d bytes, number %d", i, len(v), binary.BigEndian.Uint64(v))
			}
			i++
		}
	}
	for ll.Pending() { // the lower tier's pieces first, then the batches above them
		b, err := ll.Next()
		if err != nil {
			t.Fatalf("piece after %d elements: %v", i, err)
		}
		check(b)
	}
	for _, b := range batches {
		check(b)
	}
	if i != n {
		t.Fatalf("read %d of %d elements", i, n)
	}

	if _, ok = h.listGet(l, key, &ll); !ok || ll.Pieces() < 2 {
		t.Fatalf("second read: %v, %d pieces", ok, ll.Pieces())
	}
	if _, err := ll.Next(); err != nil {
		t.Fatal(err)
	}
	h.put(2, []byte("other"), u64(1))
	if !ll.Pending() {
		t.Fatal("nothing left to read after the first piece")
	}
	if _, err := ll.Next(); !errors.Is(err, ErrIteratorInvalidated) {
		t.Fatalf("a streamed list read past a write: %v, want ErrIteratorInvalidated", err)
	}
}
