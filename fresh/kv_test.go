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
