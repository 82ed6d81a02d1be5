package base

import "testing"

// TestLocalityHash: every state of one key and namespace gets the same LocalityHash (the
// FreshTable places them in one index group by it), and another key, another namespace or
// the same bytes split differently between key and namespace get another.
func TestLocalityHash(t *testing.T) {
	ck := func(kg, id uint16, key, ns string) []byte {
		return AppendCompositeKey(nil, kg, id, []byte(key), []byte(ns))
	}
	base := LocalityHash(ck(7, 1, "route-17", "day-3"))
	for id := uint16(2); id < 40; id++ {
		if got := LocalityHash(ck(7, id, "route-17", "day-3")); got != base {
			t.Fatalf("state %d: LocalityHash %#x, state 1 %#x", id, got, base)
		}
	}
	for _, c := range []struct{ key, ns string }{
		{"route-18", "day-3"}, {"route-17", "day-4"}, {"route-17", ""}, {"route-17d", "ay-3"},
	} {
		if LocalityHash(ck(7, 1, c.key, c.ns)) == base {
			t.Errorf("(%q, %q) has the LocalityHash of (route-17, day-3)", c.key, c.ns)
		}
	}
	// The composite hash still tells the states apart: their tags (the top 7 bits the
	// FreshTable matches first) differ for most pairs.
	same := 0
	for id := uint16(2); id < 130; id++ {
		k := ck(7, id, "route-17", "day-3")
		h1, _, _ := HashCompositeKey(ck(7, 1, "route-17", "day-3"))
		h2, _, _ := HashCompositeKey(k)
		if h1>>57 == h2>>57 {
			same++
		}
	}
	if same > 8 {
		t.Errorf("%d of 128 states share state 1's tag: the composite hash does not separate them", same)
	}
	if LocalityHash([]byte{1, 2}) == LocalityHash([]byte{1, 3}) {
		t.Error("short keys: LocalityHash ignores their bytes")
	}
}
