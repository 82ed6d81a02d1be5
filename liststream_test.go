package strata

import (
	"encoding/binary"
	"errors"
	"testing"
)

// TestListStreamsFromLSM: a list longer than a read copies at once (256 KiB), all in the
// LsmStore after a reopen, reads back whole, element by element, and an iterator advanced after
// a write stops with ErrIteratorInvalidated instead of reading pieces a compaction may have
// replaced. Short lists read past a write keep today's behaviour (copied at once).
func TestListStreamsFromLSM(t *testing.T) {
	dir := t.TempDir()
	opts := Options{MemoryBudget: 64 << 20, SegmentSize: 16 << 20}
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	l := must(NewListState(s, ListDescriptor[[]byte]{Name: "l", Codec: Bytes}))
	k := s.Key([]byte("long"))
	const n = 3000 // 3000 × 500 bytes: 1.5 MiB, two pieces or more
	elem := make([]byte, 500)
	for i := range n {
		binary.BigEndian.PutUint64(elem, uint64(i))
		if err := l.Add(k, elem); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(dir, opts); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	l = must(NewListState(s, ListDescriptor[[]byte]{Name: "l", Codec: Bytes}))
	if l.low.Pieces() != 0 {
		t.Fatal("pieces before a read")
	}
	it := l.Get(k)
	if l.low.Pieces() == 0 {
		t.Fatal("a 1.5 MiB list in the LsmStore was copied at once, not streamed")
	}
	i := 0
	for it.Next() {
		if v := it.Value(); len(v) != 500 || binary.BigEndian.Uint64(v) != uint64(i) {
			t.Fatalf("element %d: %d bytes, number %d", i, len(v), binary.BigEndian.Uint64(v))
		}
		i++
	}
	if it.Err() != nil || i != n {
		t.Fatalf("read %d of %d: %v", i, n, it.Err())
	}

	it = l.Get(k)
	var first []byte
	for range 10 {
		if !it.Next() {
			t.Fatalf("short list: %v", it.Err())
		}
		first = it.Value()
	}
	if binary.BigEndian.Uint64(first) != 9 {
		t.Fatal("10th element")
	}
	v := must(NewValueState(s, ValueDescriptor[uint64]{Name: "v", Codec: Uint64}))
	if err := v.Put(s.Key([]byte("other")), 1); err != nil {
		t.Fatal(err)
	}
	if it.Next() || !errors.Is(it.Err(), ErrIteratorInvalidated) {
		t.Fatalf("a streamed list iterated past a write: %v, want ErrIteratorInvalidated", it.Err())
	}
}
