package strata

import (
	"bytes"
	"fmt"
	"testing"
	"unsafe"

	"github.com/strata-db/strata/memory"
)

// TestHotInlineBreakAliasAcrossReads: values read (Bytes codec) stay valid across later point
// reads of other keys, which insert entries into the same table and make it rehash (H7).
func TestHotInlineBreakAliasAcrossReads(t *testing.T) {
	s := hotStore(t, 4<<20, false)
	v, err := NewValueState(s, ValueDescriptor[[]byte]{Name: "v", Codec: Bytes})
	okT(t, err)
	m, err := NewMapState(s, MapDescriptor[string, []byte]{Name: "m", KeyCodec: String, ValueCodec: Bytes})
	okT(t, err)
	const n = 50
	want := func(i int) []byte { return []byte(fmt.Sprintf("value-%03d", i)) }
	for i := range n {
		okT(t, v.Put(s.Key([]byte(fmt.Sprint("k", i))), want(i)))
		okT(t, m.Put(s.Key([]byte("mk")), fmt.Sprint("u", i), want(i)))
	}
	okT(t, s.WaitBackground())
	var held, mheld [][]byte
	for i := range n {
		x, ok, err := v.Get(s.Key([]byte(fmt.Sprint("k", i))))
		if !ok || err != nil {
			t.Fatal(ok, err)
		}
		held = append(held, x)
		y, ok, err := m.Get(s.Key([]byte("mk")), fmt.Sprint("u", i))
		if !ok || err != nil {
			t.Fatal(ok, err)
		}
		mheld = append(mheld, y)
		for j := range 40 { // absent keys: entries made by reads, the tables grow
			v.Get(s.Key([]byte(fmt.Sprint("absent", i, "-", j))))
			m.Get(s.Key([]byte("mk")), fmt.Sprint("absent", i, "-", j))
		}
		for j := range held {
			if !bytes.Equal(held[j], want(j)) || !bytes.Equal(mheld[j], want(j)) {
				t.Fatalf("after reads of %d: value %d read earlier is now %q / %q", i, j, held[j], mheld[j])
			}
		}
	}
	okT(t, s.checkHot())
}

// hotArrays is the bytes of the tier's tables' arrays (entries, tags, dirty lists).
func hotArrays(s *Store) int64 {
	var n int64
	for _, t := range s.hot.tabs {
		n += int64(len(t.tags))*int64(unsafe.Sizeof(hotEntry{})+1) + int64(cap(t.dirty))*8
	}
	return n
}

// TestHotInlineBreakArraysCharged: the tier's arrays are on the Go heap (H5): what the budget
// holds for the tier covers them, also after the tier dropped every entry (hotDropAll), and
// they stay within about the tier's bound.
func TestHotInlineBreakArraysCharged(t *testing.T) {
	const limit = 4 << 20
	s := hotStore(t, limit, false)
	v, err := NewValueState(s, ValueDescriptor[int64]{Name: "v", Codec: Int64})
	okT(t, err)
	for i := 0; s.hot.stats.Drops == 0; i++ {
		okT(t, v.Put(s.Key([]byte(fmt.Sprint("k", i))), int64(i)))
	}
	st := s.Stats().HotTier
	charged, arrays := s.budget.UsedBy(memory.PurposeHotTier), hotArrays(s)
	t.Logf("after a drop: %d entries, %d bytes, %d charged (budget %d); arrays %d", st.Entries, st.Bytes, st.Charged, charged, arrays)
	if arrays > charged {
		t.Errorf("the tier's arrays hold %d bytes of Go heap, the budget %d for the tier", arrays, charged)
	}
}

// TestHotInlineBreakArraysWithinBound: with keys coming and going (puts of new keys, clears of
// old ones, cuts: the deleted slots count toward the ⅞ bound), rehash sizes a table by its
// live entries at twice one more, so a 4 MiB tier holding about 18,000 keys grows a
// 65,536-slot array of 128-byte entries: 8.5 MB of Go heap, twice the tier's bound, while the
// budget holds at most the bound (hotGrow never charges the arrays; hotTrim only refunds).
func TestHotInlineBreakArraysWithinBound(t *testing.T) {
	const limit = 4 << 20
	s := hotStore(t, limit, false)
	v, err := NewValueState(s, ValueDescriptor[int64]{Name: "v", Codec: Int64})
	okT(t, err)
	for i := range 40000 {
		okT(t, v.Put(s.Key([]byte(fmt.Sprint("k", i))), int64(i)))
		if i >= 18000 {
			okT(t, v.Clear(s.Key([]byte(fmt.Sprint("k", i-18000)))))
		}
		if i%5000 == 0 {
			okT(t, s.WaitBackground())
		}
		if a := hotArrays(s); a > limit {
			t.Fatalf("put %d: the tier's arrays hold %d bytes (%d slots, %d entries), its bound %d, charged %d",
				i, a, len(s.hot.tabs[0].tags), s.hot.tabs[0].n, int64(limit), s.budget.UsedBy(memory.PurposeHotTier))
		}
	}
}
