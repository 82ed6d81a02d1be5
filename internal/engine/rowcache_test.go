package engine

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/strata-db/strata/memory"
)

// TestRowCache: hits return what was put, a refresh, drop or newer put replaces, entries longer than a
// slot are not cached, a full set replaces an unreferenced slot (CLOCK), a zero order hash
// works, and the memory is mapped through the budget and given back.
func TestRowCache(t *testing.T) {
	b := memory.NewBudget(1 << 20)
	c, err := newRowCache(b, 1024) // two sets of four slots
	if err != nil {
		t.Fatal(err)
	}
	if got := b.UsedBy(memory.PurposeBlockCache); got < 1024 {
		t.Fatalf("budget: %d bytes of cache accounted, want >= 1024", got)
	}
	get := func(order uint64, key string) string {
		v, ok := c.get(order, []byte(key))
		if !ok {
			return "<miss>"
		}
		return string(v)
	}
	cases := []struct {
		name string
		do   func()
		want map[uint64]string // order -> expected get of key "k<order>"
	}{
		{"empty", func() {}, map[uint64]string{1: "<miss>"}},
		{"put", func() { c.put(1, []byte("k1"), []byte("v1")) }, map[uint64]string{1: "v1"}},
		{"overwrite", func() { c.put(1, []byte("k1"), []byte("v1b")) }, map[uint64]string{1: "v1b"}},
		{"zero order", func() { c.put(0, []byte("k0"), []byte("v0")) }, map[uint64]string{0: "v0", 1: "v1b"}},
		{"empty value", func() { c.put(2, []byte("k2"), nil) }, map[uint64]string{2: ""}},
		{"refresh", func() { c.refresh(1, []byte("k1"), []byte("v1c")) }, map[uint64]string{1: "v1c"}},
		{"refresh absent adds nothing", func() { c.refresh(5, []byte("k5"), []byte("v5")) }, map[uint64]string{5: "<miss>"}},
		{"refresh too long drops", func() { c.refresh(2, []byte("k2"), make([]byte, rowMaxData)) }, map[uint64]string{2: "<miss>"}},
		{"drop", func() { c.drop(1, []byte("k1")) }, map[uint64]string{1: "<miss>", 0: "v0"}},
		{"drop absent", func() { c.drop(9, []byte("k9")) }, map[uint64]string{0: "v0"}},
		{"too long", func() { c.put(3, []byte("k3"), make([]byte, rowMaxData)) }, map[uint64]string{3: "<miss>"}},
		{"longest", func() { c.put(4, []byte("k4"), []byte(strings.Repeat("x", rowMaxData-2))) },
			map[uint64]string{4: strings.Repeat("x", rowMaxData-2)}},
	}
	for _, tc := range cases {
		tc.do()
		for o, want := range tc.want {
			if got := get(o, fmt.Sprintf("k%d", o)); got != want {
				t.Fatalf("%s: get(k%d) = %q, want %q", tc.name, o, got, want)
			}
		}
	}
	// Same order hash, different keys (a collision): both cached, neither confused.
	c3, err := newRowCache(b, 4096)
	if err != nil {
		t.Fatal(err)
	}
	c3.put(7, []byte("a"), []byte("va"))
	c3.put(7, []byte("b"), []byte("vb"))
	for k, want := range map[string]string{"a": "va", "b": "vb", "c": ""} {
		if v, ok := c3.get(7, []byte(k)); string(v) != want || ok != (want != "") {
			t.Fatalf("collision: get(%s) = %q %v, want %q", k, v, ok, want)
		}
	}
	// Fill one set far past its ways: the cache never holds more than its slots, and the
	// entry referenced by a hit between insertions survives one more round than the others.
	c2, err := newRowCache(b, 512) // one set
	if err != nil {
		t.Fatal(err)
	}
	c2.put(100, []byte("hot"), []byte("h"))
	for i := range 3 {
		c2.put(uint64(200+i), []byte(fmt.Sprint(i)), []byte("cold"))
	}
	if _, ok := c2.get(100, []byte("hot")); !ok {
		t.Fatal("hot entry missing before replacement")
	}
	c2.put(300, []byte("new"), []byte("n")) // evicts a cold, unreferenced slot
	if _, ok := c2.get(100, []byte("hot")); !ok {
		t.Fatal("CLOCK replaced the referenced entry first")
	}
	if c2.n != rowWays {
		t.Fatalf("one set holds %d entries, want %d", c2.n, rowWays)
	}
	used := b.Used()
	if err := errors.Join(c.close(), c2.close(), c3.close()); err != nil {
		t.Fatal(err)
	}
	if b.Used() >= used {
		t.Fatalf("close gave nothing back to the budget: %d -> %d", used, b.Used())
	}
}
