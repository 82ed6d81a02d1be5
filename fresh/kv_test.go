package fresh

import (
	"bytes"
	"errors"
	"testing"

	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/memory"
)

func kget(t *Table, k string) (string, Status) {
	v, st := t.Get(hashOf([]byte(k)), []byte(k))
	return string(v), st
}

func TestKV(t *testing.T) {
	type op struct {
		do   string // put, del, seal
		k, v string
	}
	tests := []struct {
		name      string
		ops       []op
		k         string
		want      string
		st        Status
		garbage   int64 // GarbageRecords after ops
		segments  int
		wantInPlc bool
	}{
		{name: "absent", k: "a", st: Absent},
		{name: "put/get", ops: []op{{"put", "a", "1"}}, k: "a", want: "1", st: Found, segments: 1},
		{name: "other key absent", ops: []op{{"put", "a", "1"}}, k: "b", st: Absent, segments: 1},
		{name: "overwrite smaller in place", ops: []op{{"put", "a", "hello"}, {"put", "a", "hi"}}, k: "a", want: "hi", st: Found, segments: 1},
		{name: "shrink then grow back in place", ops: []op{{"put", "a", "hello"}, {"put", "a", "h"}, {"put", "a", "world"}}, k: "a", want: "world", st: Found, segments: 1},
		{name: "overwrite larger appends", ops: []op{{"put", "a", "hi"}, {"put", "a", "hello"}}, k: "a", want: "hello", st: Found, garbage: 1, segments: 1},
		{name: "delete", ops: []op{{"put", "a", "1"}, {"del", "a", ""}}, k: "a", st: Deleted, segments: 1},
		{name: "delete absent key", ops: []op{{"del", "a", ""}}, k: "a", st: Deleted, segments: 1},
		{name: "put after delete in place", ops: []op{{"put", "a", "123"}, {"del", "a", ""}, {"put", "a", "9"}}, k: "a", want: "9", st: Found, segments: 1},
		{name: "empty value", ops: []op{{"put", "a", ""}}, k: "a", want: "", st: Found, segments: 1},
		{name: "across seal", ops: []op{{"put", "a", "1"}, {"seal", "", ""}}, k: "a", want: "1", st: Found, segments: 1},
		{name: "newer segment wins", ops: []op{{"put", "a", "1"}, {"seal", "", ""}, {"put", "a", "2"}}, k: "a", want: "2", st: Found, segments: 2},
		{name: "tombstone shadows sealed", ops: []op{{"put", "a", "1"}, {"seal", "", ""}, {"del", "a", ""}}, k: "a", st: Deleted, segments: 2},
		{name: "put over sealed tombstone", ops: []op{{"del", "a", ""}, {"seal", "", ""}, {"put", "a", "3"}}, k: "a", want: "3", st: Found, segments: 2},
		{name: "sealed, other key", ops: []op{{"put", "a", "1"}, {"seal", "", ""}, {"put", "b", "2"}}, k: "a", want: "1", st: Found, segments: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tb, _ := newTestTable(t, 1<<30, memory.SegmentSize16M, 0)
			for _, o := range tc.ops {
				switch o.do {
				case "put":
					must(t, tb.Put(hashOf([]byte(o.k)), []byte(o.k), []byte(o.v)))
				case "del":
					must(t, tb.Delete(hashOf([]byte(o.k)), []byte(o.k)))
				case "seal":
					must(t, tb.Seal())
				}
			}
			v, st := kget(tb, tc.k)
			if st != tc.st || v != tc.want {
				t.Fatalf("Get(%q) = %q, %v; want %q, %v", tc.k, v, st, tc.want, tc.st)
			}
			s := tb.Stats()
			if s.GarbageRecords != tc.garbage || s.Segments != tc.segments {
				t.Fatalf("stats %+v: want garbage %d, segments %d", s, tc.garbage, tc.segments)
			}
			writes := uint64(0)
			for _, o := range tc.ops {
				if o.do != "seal" {
					writes++
				}
			}
			if tb.Seq() != writes {
				t.Fatalf("Seq = %d after %d writes", tb.Seq(), writes)
			}
			must(t, tb.Verify())
		})
	}
}

func TestKVInPlaceKeepsOffset(t *testing.T) {
	tb, _ := newTestTable(t, 1<<30, memory.SegmentSize16M, 0)
	k := []byte("key")
	must(t, tb.Put(hashOf(k), k, []byte("abcdef")))
	used := tb.active.used
	must(t, tb.Put(hashOf(k), k, []byte("xy")))
	must(t, tb.Delete(hashOf(k), k))
	must(t, tb.Put(hashOf(k), k, []byte("123456")))
	if tb.active.used != used {
		t.Fatalf("in-place writes appended: used %d -> %d", used, tb.active.used)
	}
	if v, st := tb.Get(hashOf(k), k); st != Found || string(v) != "123456" {
		t.Fatalf("got %q %v", v, st)
	}
	if cap(func() []byte { v, _ := tb.Get(hashOf(k), k); return v }()) != 6 {
		t.Fatal("returned value must have cap == len (no append into the segment)")
	}
}

func TestKVLimits(t *testing.T) {
	tb, _ := newTestTable(t, 1<<30, memory.SegmentSize16M, 0)
	big := make([]byte, MaxKeySize+1)
	if err := tb.Put(1, big, nil); !errors.Is(err, ErrKeyTooLarge) {
		t.Fatalf("key too large: %v", err)
	}
	if err := tb.Put(1, []byte("k"), make([]byte, memory.SegmentSize16M/4+1)); !errors.Is(err, ErrValueTooLarge) {
		t.Fatalf("value too large: %v", err)
	}
	if err := tb.Put(1, []byte("k"), make([]byte, memory.SegmentSize16M/4)); err != nil {
		t.Fatalf("value of segment/4: %v", err)
	}
	if err := tb.Put(1, big[:MaxKeySize], []byte("v")); err != nil {
		t.Fatalf("key of MaxKeySize: %v", err)
	}
	if tb.Seq() != 2 {
		t.Fatalf("Seq = %d, want 2 (failed writes must not count)", tb.Seq())
	}
}

func TestKVManyKeysGrowAndSeal(t *testing.T) {
	tb, _ := newTestTable(t, 1<<30, memory.SegmentSize16M, 256<<10)
	const n = 20000
	key := func(i int) []byte { return []byte{byte(i), byte(i >> 8), byte(i >> 16), 'k'} }
	for i := 0; i < n; i++ {
		must(t, tb.Put(hashOf(key(i)), key(i), bytes.Repeat([]byte{byte(i)}, i%40)))
	}
	for i := 0; i < n; i += 3 {
		must(t, tb.Delete(hashOf(key(i)), key(i)))
	}
	st := tb.Stats()
	if st.Segments < 3 {
		t.Fatalf("expected several segments, got %+v", st)
	}
	for i := 0; i < n; i++ {
		v, s := tb.Get(hashOf(key(i)), key(i))
		if i%3 == 0 {
			if s != Deleted {
				t.Fatalf("key %d: %v", i, s)
			}
			continue
		}
		if s != Found || !bytes.Equal(v, bytes.Repeat([]byte{byte(i)}, i%40)) {
			t.Fatalf("key %d: %q %v", i, v, s)
		}
	}
	must(t, tb.Verify())
}

func TestClose(t *testing.T) {
	tb, _ := newTestTable(t, 1<<30, memory.SegmentSize16M, 0)
	must(t, tb.Put(1, []byte("a"), []byte("b")))
	must(t, tb.Close())
	if err := tb.Close(); !errors.Is(err, base.ErrClosed) {
		t.Fatal(err)
	}
	if err := tb.Put(1, []byte("a"), []byte("b")); !errors.Is(err, base.ErrClosed) {
		t.Fatal(err)
	}
	if _, st := tb.Get(1, []byte("a")); st != Absent {
		t.Fatal(st)
	}
}

func TestKVNoAlloc(t *testing.T) {
	tb, _ := newTestTable(t, 1<<30, memory.SegmentSize16M, 0)
	k := []byte("0123456789abcdef")
	h := hashOf(k)
	v := []byte("12345678")
	must(t, tb.Put(h, k, v))
	n := testing.AllocsPerRun(1000, func() {
		if err := tb.Put(h, k, v); err != nil {
			panic(err)
		}
		if _, st := tb.Get(h, k); st != Found {
			panic(st)
		}
		if err := tb.Delete(h, k); err != nil {
			panic(err)
		}
	})
	if n != 0 {
		t.Fatalf("Get/Put/Delete allocate %v per run", n)
	}
}

// TestIndexTail: a segment's index doubles at 7/8 load unless the slots its remaining data
// room can bring (at the slots per byte so far) fit below 15/16 (segment.tailFits); a tail of
// smaller records than judged doubles it at 15/16. The index of the first segment is checked
// once the writes roll to a second one; every key stays readable.
func TestIndexTail(t *testing.T) {
	for _, tc := range []struct {
		name           string
		segSize, limit int
		n1, size1      int // n1 records of size1 bytes, then records of size2 until the roll
		size2          int
		wantIdx, wantN int // index bytes and slots of the first segment
	}{
		// 64 groups (512 slots, 7/8 = 448, 15/16 = 480): at 448 slots 1200 bytes are left,
		// 12 more records of 100 B: no doubling, 460 slots.
		{"tail fits", memory.SegmentSize16M, 16 + 460*100, 448, 100, 100, 4096, 460},
		// The same, but the tail's records are 20 B: 60 more; doubling at 480.
		{"misjudged tail doubles at 15/16", memory.SegmentSize16M, 16 + 460*100, 448, 100, 20, 8192, 508},
		// Far from the end: the index doubles at 7/8 (448, then 896).
		{"early doubles at 7/8", memory.SegmentSize16M, 16 + 1000*100, 1000, 100, 100, 16384, 1000},
		// The value state of BenchmarkMemoryEfficiency: 145-byte records (16 B header, 29 B
		// composite key, 100 B value) in a 4 MiB segment: 28,926 slots in a 256 KiB index,
		// not 512 KiB.
		{"4 MiB of 145 B records", memory.SegmentSize4M, 0, 28000, 145, 145, 256 << 10, (4<<20 - 16) / 145},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tb, _ := newTestTable(t, 1<<30, tc.segSize, tc.limit)
			key := func(i int, _ int) []byte { return []byte{byte(i), byte(i >> 8), byte(i >> 16), byte(i >> 24)} }
			val := func(i int, size int) []byte { return bytes.Repeat([]byte{byte(i)}, size-keyHdrSize-4) }
			size := func(i int) int {
				if i < tc.n1 {
					return tc.size1
				}
				return tc.size2
			}
			n := 0
			for ; tb.rolls < 2; n++ {
				k := key(n, size(n))
				must(t, tb.Put(hashOf(k), k, val(n, size(n))))
			}
			s := tb.segs[0]
			if len(s.idx) != tc.wantIdx || int(s.count) != tc.wantN {
				t.Fatalf("first segment: index %d bytes with %d slots, want %d bytes with %d", len(s.idx), s.count, tc.wantIdx, tc.wantN)
			}
			if s.count > s.fullAt {
				t.Fatalf("first segment: %d slots > 15/16 of the index (%d)", s.count, s.fullAt)
			}
			for i := range n {
				k := key(i, size(i))
				if v, st := tb.Get(hashOf(k), k); st != Found || !bytes.Equal(v, val(i, size(i))) {
					t.Fatalf("key %d: %q %v", i, v, st)
				}
			}
			must(t, tb.Verify())
		})
	}
}
