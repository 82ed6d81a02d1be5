package fresh

import (
	"fmt"
	"testing"

	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/memory"
)

// TestScanSegments: the view of the active segment reads what was written so far; after more
// writes a refreshed view shows values rewritten in place at the same offsets, reports records
// superseded since as dead (LiveEntryAt), and EntriesFrom the old length yields only the
// records appended since; after a roll the sealed segment's handle is the Same as the view.
func TestScanSegments(t *testing.T) {
	tb, _ := newTestTable(t, 256<<20, memory.SegmentSize16M, 64<<10)
	if got := tb.ScanSegments(nil); len(got) != 0 {
		t.Fatalf("an empty table lists %d segments", len(got))
	}
	key := func(i int) []byte { return fmt.Appendf(nil, "key-%03d", i) }
	for i := range 20 {
		must(t, tb.Put(hashOf(key(i)), key(i), []byte("aaaa")))
	}
	must(t, tb.MapPut(hashOf([]byte("map")), []byte("map"), hashOf([]byte("u1")), []byte("u1"), []byte("x")))
	segs := tb.ScanSegments(nil)
	if len(segs) != 1 {
		t.Fatalf("%d segments, want the active one", len(segs))
	}
	v := segs[0]
	offs := map[string]uint32{}
	it := v.Entries()
	for it.Next() {
		e := it.Entry()
		offs[string(e.Key)+"/"+string(e.UserKey)] = it.Offset()
	}
	if err := it.Err(); err != nil || len(offs) != 21 {
		t.Fatalf("view entries: %d, %v", len(offs), err)
	}
	end := uint32(v.DataBytes())

	must(t, tb.Put(hashOf(key(0)), key(0), []byte("bbbb")))         // in place
	must(t, tb.Put(hashOf(key(1)), key(1), []byte("longer value"))) // appended: the old one dies
	must(t, tb.Delete(hashOf(key(2)), key(2)))                      // in place: value → tombstone
	must(t, tb.MapRemove(hashOf([]byte("map")), []byte("map"), hashOf([]byte("u1")), []byte("u1")))
	v2 := tb.ScanSegments(nil)[0]
	if !v2.Same(v) {
		t.Fatal("a refreshed view is not the Same as the earlier one")
	}
	check := func(k string, live bool, kind base.Kind, val string) {
		t.Helper()
		e, ok, err := v2.LiveEntryAt(offs[k])
		if err != nil || ok != live || (live && (e.Kind != kind || string(e.Value) != val)) {
			t.Fatalf("%s: %v %v %q %v; want live %v %v %q", k, ok, e.Kind, e.Value, err, live, kind, val)
		}
	}
	check("key-000/", true, base.KindValue, "bbbb")
	check("key-001/", false, 0, "")
	check("key-002/", true, base.KindTombstone, "")
	check("key-003/", true, base.KindValue, "aaaa")
	check("map/u1", true, base.KindMapEntryTombstone, "") // removed in place: still an entry
	var tail []string
	for it := v2.EntriesFrom(end); it.Next(); {
		e := it.Entry()
		tail = append(tail, fmt.Sprintf("%s/%v", e.Key, e.Kind))
	}
	if fmt.Sprint(tail) != "[key-001/value]" {
		t.Fatalf("EntriesFrom the old end: %v", tail)
	}

	must(t, tb.Seal())
	must(t, tb.Put(hashOf(key(5)), key(5), []byte("c")))
	segs = tb.ScanSegments(nil)
	if len(segs) != 2 || !segs[0].Same(v) || segs[0] == v || segs[1].Same(v) {
		t.Fatalf("after a seal: %d segments; the sealed one's handle Same as the view: %v", len(segs), segs[0].Same(v))
	}
	if h := tb.Sealed(); len(h) != 1 || h[0] != segs[0] {
		t.Fatal("ScanSegments' sealed handle is not Sealed's")
	}
}
