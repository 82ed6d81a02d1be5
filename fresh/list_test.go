package fresh

import (
	"strings"
	"testing"

	"github.com/strata-db/strata/memory"
)

func lget(tb *Table, k string) (string, Status) {
	bs, st := tb.ListGet(hashOf([]byte(k)), []byte(k), nil)
	var out []string
	for _, b := range bs {
		out = append(out, string(b))
	}
	return strings.Join(out, ","), st
}

func TestList(t *testing.T) {
	tests := []struct {
		name     string
		ops      []string // "a:x" append, "r:x" replace, "d" delete, "s" seal
		want     string
		st       Status
		inPlace  bool // the last op did not grow the segment
		segments int
	}{
		{name: "absent", st: Absent},
		{name: "append", ops: []string{"a:1"}, want: "1", st: Found, segments: 1},
		{name: "append order", ops: []string{"a:1", "a:2", "a:3"}, want: "1,2,3", st: Found, segments: 1},
		{name: "empty append no-op", ops: []string{"a:"}, st: Absent},
		{name: "replace", ops: []string{"a:1", "a:2", "r:9"}, want: "9", st: Found, segments: 1},
		{name: "replace in place", ops: []string{"r:12345", "r:67"}, want: "67", st: Found, inPlace: true, segments: 1},
		{name: "replace larger appends", ops: []string{"r:1", "r:234"}, want: "234", st: Found, segments: 1},
		{name: "replace then append", ops: []string{"a:0", "r:1", "a:2"}, want: "1,2", st: Found, segments: 1},
		{name: "replace empty = tombstone", ops: []string{"a:1", "r:"}, st: Deleted, segments: 1},
		{name: "delete", ops: []string{"a:1", "a:2", "d"}, st: Deleted, segments: 1},
		{name: "append after delete is base", ops: []string{"a:1", "d", "a:2"}, want: "2", st: Found, segments: 1},
		{name: "across seal", ops: []string{"a:1", "s", "a:2", "s", "a:3"}, want: "1,2,3", st: Found, segments: 3},
		{name: "across seal, several per segment", ops: []string{"a:1", "a:2", "s", "a:3", "a:4"}, want: "1,2,3,4", st: Found, segments: 2},
		{name: "replace shadows sealed", ops: []string{"a:1", "s", "r:2", "a:3"}, want: "2,3", st: Found, segments: 2},
		{name: "sealed replace stops walk", ops: []string{"a:0", "s", "r:1", "a:2", "s", "a:3"}, want: "1,2,3", st: Found, segments: 3},
		{name: "tombstone in sealed stops walk", ops: []string{"a:1", "s", "d", "s", "a:3"}, want: "3", st: Found, segments: 3},
		{name: "tombstone shadows sealed", ops: []string{"a:1", "s", "d"}, st: Deleted, segments: 2},
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
			got, st := lget(tb, "list")
			if got != tc.want || st != tc.st {
				t.Fatalf("ListGet = %q %v, want %q %v", got, st, tc.want, tc.st)
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
		dst, _ = tb.ListGet(h, k, dst[:0])
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
	dst, _ = tb.ListGet(h, k, dst)
	if len(dst) != 11 || string(dst[0]) != "x" || string(dst[1]) != "a" {
		t.Fatalf("prefix not kept: %q", dst)
	}
}
