package fresh

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/memory"
)

// sealedEntries copies every entry of s (with its offset, checked through
// EntryAt) so the copies outlive the segment.
func sealedEntries(tb testing.TB, s *SealedSegment) []base.Entry {
	var out []base.Entry
	it := s.Entries()
	for it.Next() {
		e := *it.Entry()
		again, err := s.EntryAt(it.Offset())
		if err != nil || string(again.Key) != string(e.Key) || again.Seq != e.Seq {
			tb.Errorf("EntryAt(%d) = %+v, %v; Next gave %+v", it.Offset(), again, err, e)
		}
		e.Key, e.UserKey, e.Value = append([]byte(nil), e.Key...), append([]byte(nil), e.UserKey...),
			append([]byte(nil), e.Value...)
		out = append(out, e)
	}
	if err := it.Err(); err != nil {
		tb.Errorf("entries: %v", err)
	}
	return out
}

func sameSealed(tb testing.TB, what string, got, want []base.Entry) {
	tb.Helper()
	if len(got) != len(want) {
		tb.Fatalf("%s: %d entries, want %d", what, len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Seq != w.Seq || g.Kind != w.Kind || string(g.Key) != string(w.Key) ||
			string(g.UserKey) != string(w.UserKey) || string(g.Value) != string(w.Value) {
			tb.Fatalf("%s: entry %d = %+v, want %+v", what, i, g, w)
		}
	}
}

// fillSealed writes values, list appends and map entries under prefix and
// seals the segment.
func fillSealed(t *testing.T, tb *Table, prefix string, n int) {
	t.Helper()
	for i := range n {
		k := fmt.Appendf(nil, "%s-k%d", prefix, i)
		must(t, tb.Put(hashOf(k), k, fmt.Appendf(nil, "v%d", i)))
		l := fmt.Appendf(nil, "%s-l%d", prefix, i%50)
		must(t, tb.ListAppend(hashOf(l), l, fmt.Appendf(nil, "e%d", i)))
		m := fmt.Appendf(nil, "%s-m%d", prefix, i%20)
		uk := fmt.Appendf(nil, "u%d", i)
		must(t, tb.MapPut(hashOf(m), m, hashOf(uk), uk, fmt.Appendf(nil, "w%d", i)))
	}
	must(t, tb.Seal())
}

// TestPinSealed: with the sealed segments pinned, DropSealed takes a
// segment off the read path but keeps its memory — counted by the Budget
// and Stats.PinnedBytes — so handles taken before read on from other
// goroutines (one already iterating, one starting after the drop) while
// the owner writes; the memory goes back only at the last UnpinSealed
// (run with -race).
func TestPinSealed(t *testing.T) {
	tb, p := newTestTable(t, 1<<30, memory.SegmentSize16M, 64<<10)
	bud := p.Budget()
	fillSealed(t, tb, "a", 300)
	fillSealed(t, tb, "b", 300)
	ss := tb.Sealed()
	if len(ss) < 2 {
		t.Fatalf("%d sealed segments", len(ss))
	}
	ss = ss[:2]
	want := [][]base.Entry{sealedEntries(t, ss[0]), sealedEntries(t, ss[1])}
	if len(want[0]) == 0 || len(want[1]) == 0 {
		t.Fatal("setup: empty segments")
	}

	tb.PinSealed()
	tb.PinSealed() // counted: two checkpoints
	used := bud.Used()
	data, index := bud.UsedBy(memory.PurposeFreshData), bud.UsedBy(memory.PurposeFreshIndex)
	dropBytes := tb.Stats().SealedBytes // both segments are data + index of ss[0..1] only
	for _, s := range tb.Sealed()[2:] {
		dropBytes -= int64(len(s.seg.region.Bytes()) + len(s.seg.iReg.Bytes()))
	}

	got := make([][][]base.Entry, 3)
	var wg sync.WaitGroup
	dropped := make(chan struct{})
	wg.Add(2)
	go func() { // iterates while the owner drops
		defer wg.Done()
		for i := range 2 {
			got[0] = append(got[0], sealedEntries(t, ss[i]))
		}
	}()
	go func() { // starts after the drops, from handles taken before
		defer wg.Done()
		<-dropped
		for i := range 2 {
			got[1] = append(got[1], sealedEntries(t, ss[i]))
		}
	}()
	must(t, tb.DropSealed(ss[0]))
	must(t, tb.DropSealed(ss[1]))
	close(dropped)
	for i := range 2000 { // the owner writes on: new segments, none reuses the pinned ones
		k := fmt.Appendf(nil, "c-k%d", i)
		must(t, tb.Put(hashOf(k), k, make([]byte, 100)))
	}
	wg.Wait()
	for r := range 2 {
		for i := range 2 {
			sameSealed(t, fmt.Sprintf("reader %d, segment %d", r, i), got[r][i], want[i])
		}
	}

	st := tb.Stats()
	if st.DroppedSegments != 2 || st.PinnedBytes != dropBytes {
		t.Fatalf("pinned %d bytes, want %d: %+v", st.PinnedBytes, dropBytes, st)
	}
	if _, s := tb.Get(hashOf([]byte("a-k1")), []byte("a-k1")); s != Absent {
		t.Fatalf("a dropped key reads %v", s)
	}
	if bud.UsedBy(memory.PurposeFreshIndex) < index || bud.Used() < used {
		t.Fatalf("budget fell while pinned: used %d -> %d, index %d -> %d",
			used, bud.Used(), index, bud.UsedBy(memory.PurposeFreshIndex))
	}
	grown := bud.UsedBy(memory.PurposeFreshData) - data // the owner's new segments
	idxGrown := bud.UsedBy(memory.PurposeFreshIndex) - index

	tb.UnpinSealed() // one checkpoint still pins
	if tb.Stats().PinnedBytes != dropBytes {
		t.Fatal("released with a pin left")
	}
	sameSealed(t, "after one unpin", sealedEntries(t, ss[0]), want[0])
	tb.UnpinSealed()
	if st := tb.Stats(); st.PinnedBytes != 0 {
		t.Fatalf("after the last unpin: %+v", st)
	}
	if d := data + grown - bud.UsedBy(memory.PurposeFreshData); d != 2*memory.SegmentSize16M {
		t.Fatalf("data bytes fell by %d at the unpin, want two segments", d)
	}
	if d := index + idxGrown - bud.UsedBy(memory.PurposeFreshIndex); d <= 0 || d >= dropBytes {
		t.Fatalf("index bytes fell by %d at the unpin", d)
	}
	for i := range 2 {
		if it := ss[i].Entries(); it.Next() || !errors.Is(it.Err(), ErrSegmentDropped) {
			t.Fatalf("segment %d after the unpin: %v", i, it.Err())
		}
	}
}

// TestPinSealedClose: Close releases segments dropped while pinned
// (newTestTable's cleanup checks the budget is empty); UnpinSealed after
// Close only counts; an unmatched UnpinSealed panics.
func TestPinSealedClose(t *testing.T) {
	tb, _ := newTestTable(t, 1<<30, memory.SegmentSize16M, 0)
	fillSealed(t, tb, "a", 10)
	s := tb.Sealed()[0]
	tb.PinSealed()
	must(t, tb.DropSealed(s))
	if tb.Stats().PinnedBytes == 0 {
		t.Fatal("nothing pinned")
	}
	must(t, tb.Close())
	if it := s.Entries(); it.Next() || !errors.Is(it.Err(), ErrSegmentDropped) {
		t.Fatalf("entries after Close: %v", it.Err())
	}
	tb.UnpinSealed()
	defer func() {
		if recover() == nil {
			t.Fatal("an unmatched UnpinSealed did not panic")
		}
	}()
	tb.UnpinSealed()
}
