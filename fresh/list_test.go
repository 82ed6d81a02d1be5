package fresh

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/strata-db/strata/memory"
)

// lget returns the list of k with its batches joined by "," (appends in
// place join batches, so "12" is one batch), its Status and completeness.
func lget(tb *Table, k string) (string, Status, bool) {
	bs, st, complete := tb.ListGet(hashOf([]byte(k)), []byte(k), nil)
	var out []string
	for _, b := range bs {
		out = append(out, string(b))
	}
	return strings.Join(out, ","), st, complete
}

func TestList(t *testing.T) {
	tests := []struct {
		name     string
		ops      []string // "a:x" append, "r:x" replace, "d" delete, "s" seal
		want     string   // batches joined by ","
		st       Status
		complete bool // a base chunk or tombstone was reached
		inPlace  bool // the last op did not grow the segment
		segments int
	}{
		{name: "absent", st: Absent},
		{name: "append", ops: []string{"a:1"}, want: "1", st: Found, segments: 1},
		{name: "append order, in place", ops: []string{"a:1", "a:2", "a:3"}, want: "1,23", st: Found, inPlace: true, segments: 1},
		{name: "appends grow geometrically", ops: []string{"a:1", "a:2", "a:3", "a:4", "a:5", "a:6", "a:7", "a:8", "a:9"}, want: "1,23,4567,89", st: Found, inPlace: true, segments: 1},
		{name: "empty append no-op", ops: []string{"a:"}, st: Absent},
		{name: "replace", ops: []string{"a:1", "a:2", "r:9"}, want: "9", st: Found, complete: true, inPlace: true, segments: 1},
		{name: "replace in place", ops: []string{"r:12345", "r:67"}, want: "67", st: Found, complete: true, inPlace: true, segments: 1},
		{name: "replace into slack", ops: []string{"r:1", "r:23", "r:45"}, want: "45", st: Found, complete: true, inPlace: true, segments: 1},
		{name: "replace larger appends", ops: []string{"r:1", "r:234"}, want: "234", st: Found, complete: true, segments: 1},
		{name: "replace into newest of a chain", ops: []string{"a:1", "a:2", "a:3", "a:4", "r:56"}, want: "56", st: Found, complete: true, inPlace: true, segments: 1},
		{name: "replace then append", ops: []string{"a:0", "r:1", "a:2", "a:3"}, want: "1,23", st: Found, complete: true, inPlace: true, segments: 1},
		{name: "replace then appends past slack", ops: []string{"r:1", "a:2", "a:3", "a:4"}, want: "1,23,4", st: Found, complete: true, segments: 1},
		{name: "replace empty = tombstone", ops: []string{"a:1", "r:"}, st: Deleted, complete: true, segments: 1},
		{name: "delete", ops: []string{"a:1", "a:2", "d"}, st: Deleted, complete: true, segments: 1},
		{name: "append after delete is base", ops: []string{"a:1", "d", "a:2"}, want: "2", st: Found, complete: true, segments: 1},
		{name: "across seal", ops: []string{"a:1", "s", "a:2", "s", "a:3"}, want: "1,2,3", st: Found, segments: 3},
		{name: "across seal, several per segment", ops: []string{"a:1", "a:2", "s", "a:3", "a:4"}, want: "1,2,3,4", st: Found, segments: 2},
		{name: "replace shadows sealed", ops: []string{"a:1", "s", "r:2", "a:3"}, want: "2,3", st: Found, complete: true, segments: 2},
		{name: "sealed replace stops walk", ops: []string{"a:0", "s", "r:1", "a:2", "s", "a:3"}, want: "1,2,3", st: Found, complete: true, segments: 3},
		{name: "tombstone in sealed stops walk", ops: []string{"a:1", "s", "d", "s", "a:3"}, want: "3", st: Found, complete: true, segments: 3},
		{name: "tombstone shadows sealed", ops: []string{"a:1", "s", "d"}, st: Deleted, complete: true, segments: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tb, _ := newTestTable(t, 1<<30, memory.SegmentSize16M, 0)
			k := []byte("list")
			h := hashOf(k)
			var used uint32
			for _, o := range tc.ops {
				if tb.active != nil {
					used = tb.active.used
				}
				switch {
				case o == "s":
					must(t, tb.Seal())
				case o == "d":
					must(t, tb.ListDelete(h, k))
				case o[0] == 'a':
					must(t, tb.ListAppend(h, k, []byte(o[2:])))
				case o[0] == 'r':
					must(t, tb.ListReplace(h, k, []byte(o[2:])))
				}
			}
			got, st, complete := lget(tb, "list")
			if got != tc.want || st != tc.st || complete != tc.complete {
				t.Fatalf("ListGet = %q %v complete=%v, want %q %v complete=%v", got, st, complete, tc.want, tc.st, tc.complete)
			}
			if tc.inPlace && tb.active.used != used {
				t.Fatalf("last op appended (used %d -> %d)", used, tb.active.used)
			}
			if s := tb.Stats(); s.Segments != tc.segments {
				t.Fatalf("segments %d, want %d", s.Segments, tc.segments)
			}
			must(t, tb.Verify())
		})
	}
}

func TestListGetNoAlloc(t *testing.T) {
	tb, _ := newTestTable(t, 1<<30, memory.SegmentSize16M, 0)
	k := []byte("l")
	h := hashOf(k)
	for i := 0; i < 10; i++ {
		must(t, tb.ListAppend(h, k, []byte{byte('a' + i)}))
		if i%3 == 0 {
			must(t, tb.Seal())
		}
	}
	dst := make([][]byte, 0, 16)
	n := testing.AllocsPerRun(100, func() {
		dst, _, _ = tb.ListGet(h, k, dst[:0])
	})
	if n != 0 {
		t.Fatalf("ListGet allocates %v", n)
	}
	var s string
	for _, b := range dst {
		s += string(b)
	}
	if s != "abcdefghij" {
		t.Fatal(s)
	}
	// dst prefix is kept.
	dst = append(dst[:0], []byte("x"))
	dst, _, _ = tb.ListGet(h, k, dst)
	if string(bytes.Join(dst, nil)) != "xabcdefghij" || string(dst[0]) != "x" || string(dst[1][0]) != "a" {
		t.Fatalf("prefix not kept: %q", dst)
	}
}

// TestListReplaceInPlaceKillsChain: a replace written into the newest chunk
// of a chain marks the older chunks of the key in the segment dead, with
// their bytes counted as garbage.
func TestListReplaceInPlaceKillsChain(t *testing.T) {
	tb, _ := newTestTable(t, 1<<30, memory.SegmentSize16M, 0)
	k := []byte("list")
	h := hashOf(k)
	for _, b := range []string{"1", "2", "3", "4", "5"} { // chunks "1", "23", "45" (capacity 4)
		must(t, tb.ListAppend(h, k, []byte(b)))
	}
	if st := tb.Stats(); st.Records != 3 || st.GarbageRecords != 0 {
		t.Fatalf("before replace: %+v", st)
	}
	must(t, tb.ListReplace(h, k, []byte("ab")))
	st := tb.Stats()
	if st.Records != 3 || st.GarbageRecords != 2 || st.GarbageBytes != int64(chunkSize(k, 1)+chunkSize(k, 2)) {
		t.Fatalf("after replace: %+v", st)
	}
	if got, s, complete := lget(tb, "list"); got != "ab" || s != Found || !complete {
		t.Fatalf("ListGet = %q %v %v", got, s, complete)
	}
	must(t, tb.Verify())
}

// TestListSlackNeverRollsEarly: when the bare batch fits the rest of the
// active segment but the chunk with its slack would not, the slack shrinks
// to the room left instead of sealing the segment.
func TestListSlackNeverRollsEarly(t *testing.T) {
	const limit = 4096
	tb, _ := newTestTable(t, 1<<30, memory.SegmentSize16M, limit)
	k := []byte("list")
	batch := []byte("0123456789")
	// A first chunk (a key's first chunk in a segment has no slack), then
	// fill the segment with values (3-byte keys) up to room for the bare
	// chunk plus 3 bytes.
	must(t, tb.ListAppend(hashOf(k), k, []byte("x")))
	for i := 0; ; i++ {
		v := fmt.Appendf(nil, "v%02d", i)
		rest := limit - segHeaderSize - int(chunkSize(k, len(batch))) - 3
		if tb.active != nil {
			rest = limit - int(tb.active.used) - int(chunkSize(k, len(batch))) - 3
		}
		n := 500
		if rest <= 1000 {
			n = rest - keyHdrSize - len(v)
		}
		must(t, tb.Put(hashOf(v), v, make([]byte, n)))
		if n != 500 {
			break
		}
	}
	must(t, tb.ListAppend(hashOf(k), k, batch))
	if st := tb.Stats(); st.Segments != 1 || tb.active.used != limit {
		t.Fatalf("segments %d, used %d of %d", st.Segments, tb.active.used, limit)
	}
	must(t, tb.ListAppend(hashOf(k), k, []byte("abc"))) // into the 3 bytes of slack
	if st := tb.Stats(); st.Segments != 1 {
		t.Fatalf("segments %d", st.Segments)
	}
	if got, _, _ := lget(tb, "list"); got != "x,0123456789abc" {
		t.Fatalf("list %q", got)
	}
	must(t, tb.Verify())
}
