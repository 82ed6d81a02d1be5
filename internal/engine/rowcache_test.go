package engine

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/strata-db/strata/memory"
)

// checkRowCache checks the structure of c (rowcache.go, invariant 5) and that every entry's
// tag and set are those of its order in orders (the tests' keys name their order).
func checkRowCache(t *testing.T, c *rowCache, orders map[string]uint64) {
	t.Helper()
	err := c.check(func(s []byte, tag uint32, key, value []byte) error {
		o, ok := orders[string(key)]
		if !ok {
			return fmt.Errorf("unknown key %q cached", key)
		}
		if tag != rowTag(o) {
			return fmt.Errorf("key %q: tag %#x, want %#x", key, tag, rowTag(o))
		}
		if set := c.set(o); &set[0] != &s[0] {
			return fmt.Errorf("key %q cached in another set", key)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestRowCache: hits return what was put; overwrites and refreshes to the same, more or fewer
// units replace the value; a refresh never adds a key and one beyond rowMaxData drops it;
// rows longer than rowMaxData are not cached and are counted; a zero order hash works; the
// memory is mapped through the budget and given back.
func TestRowCache(t *testing.T) {
	b := memory.NewBudget(1 << 20)
	c, err := newRowCache(b, 2*rowSet)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.UsedBy(memory.PurposeBlockCache); got < 2*rowSet {
		t.Fatalf("budget: %d bytes of cache accounted, want >= %d", got, 2*rowSet)
	}
	x := func(n int) []byte { return bytes.Repeat([]byte("x"), n) }
	orders := map[string]uint64{}
	for o := range uint64(10) {
		orders[fmt.Sprint("k", o)] = o
	}
	cases := []struct {
		name     string
		do       func()
		want     map[uint64]string // order -> expected get of key "k<order>"
		tooLarge int64
	}{
		{"empty", func() {}, map[uint64]string{1: "<miss>"}, 0},
		{"put", func() { c.put(1, []byte("k1"), []byte("v1")) }, map[uint64]string{1: "v1"}, 0},
		{"overwrite, same units", func() { c.put(1, []byte("k1"), []byte("v1b")) }, map[uint64]string{1: "v1b"}, 0},
		{"overwrite, more units", func() { c.put(1, []byte("k1"), x(100)) }, map[uint64]string{1: string(x(100))}, 0},
		{"overwrite, fewer units", func() { c.put(1, []byte("k1"), []byte("v1c")) }, map[uint64]string{1: "v1c"}, 0},
		{"zero order", func() { c.put(0, []byte("k0"), []byte("v0")) }, map[uint64]string{0: "v0", 1: "v1c"}, 0},
		{"empty value", func() { c.put(2, []byte("k2"), nil) }, map[uint64]string{2: ""}, 0},
		{"refresh", func() { c.refresh(1, []byte("k1"), []byte("v1d")) }, map[uint64]string{1: "v1d"}, 0},
		{"refresh, more units", func() { c.refresh(1, []byte("k1"), x(300)) }, map[uint64]string{1: string(x(300)), 0: "v0"}, 0},
		{"refresh, fewer units", func() { c.refresh(1, []byte("k1"), x(40)) }, map[uint64]string{1: string(x(40)), 0: "v0"}, 0},
		{"refresh absent adds nothing", func() { c.refresh(5, []byte("k5"), []byte("v5")) }, map[uint64]string{5: "<miss>"}, 0},
		{"refresh too long drops", func() { c.refresh(2, []byte("k2"), x(rowMaxData)) }, map[uint64]string{2: "<miss>"}, 0},
		{"drop", func() { c.drop(1, []byte("k1")) }, map[uint64]string{1: "<miss>", 0: "v0"}, 0},
		{"drop absent", func() { c.drop(9, []byte("k9")) }, map[uint64]string{0: "v0"}, 0},
		{"too long", func() { c.put(3, []byte("k3"), x(rowMaxData-1)) }, map[uint64]string{3: "<miss>"}, 1},
		{"longest", func() { c.put(4, []byte("k4"), x(rowMaxData-2)) }, map[uint64]string{4: string(x(rowMaxData - 2))}, 1},
		{"29 B key, 100 B value", func() { c.put(6, []byte("k6"+strings.Repeat("-", 27)), x(100)) }, map[uint64]string{4: string(x(rowMaxData - 2))}, 1},
	}
	orders["k6"+strings.Repeat("-", 27)] = 6
	for _, tc := range cases {
		tc.do()
		for o, want := range tc.want {
			got := "<miss>"
			if v, ok := c.get(o, []byte(fmt.Sprint("k", o))); ok {
				got = string(v)
			}
			if got != want {
				t.Fatalf("%s: get(k%d) = %.20q (%d bytes), want %.20q (%d bytes)", tc.name, o, got, len(got), want, len(want))
			}
		}
		if c.tooLarge != tc.tooLarge {
			t.Fatalf("%s: %d rows too large, want %d", tc.name, c.tooLarge, tc.tooLarge)
		}
		checkRowCache(t, c, orders)
	}
	if v, ok := c.get(6, []byte("k6"+strings.Repeat("-", 27))); !ok || !bytes.Equal(v, x(100)) {
		t.Fatalf("29 B key + 100 B value: %v", ok)
	}
	// Same order hash, different keys (a collision): both cached, neither confused.
	c3, err := newRowCache(b, 4*rowSet)
	if err != nil {
		t.Fatal(err)
	}
	c3.put(7, []byte("a"), []byte("va"))
	c3.put(7, []byte("b"), []byte("vb"))
	c3.put(7+1<<16, []byte("c"), []byte("vc")) // same tag too (low 16 bits)
	for k, want := range map[string]string{"a": "va", "b": "vb", "c": "", "d": ""} {
		if v, ok := c3.get(7, []byte(k)); string(v) != want || ok != (want != "") {
			t.Fatalf("collision: get(%s) = %q %v, want %q", k, v, ok, want)
		}
	}
	used := b.Used()
	if err := errors.Join(c.close(), c3.close()); err != nil {
		t.Fatal(err)
	}
	if b.Used() >= used {
		t.Fatalf("close gave nothing back to the budget: %d -> %d", used, b.Used())
	}
}

// TestRowCacheEviction: in one set, entries of several units are replaced oldest first unless
// referenced (CLOCK); a set never holds more entries than words nor more units than it has;
// scattered free units are compacted into the run a larger entry needs, and every entry that
// stays keeps its value.
func TestRowCacheEviction(t *testing.T) {
	b := memory.NewBudget(1 << 20)
	c, err := newRowCache(b, rowSet) // one set
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	orders := map[string]uint64{}
	val := func(i, n int) []byte { return bytes.Repeat([]byte{byte('a' + i%26)}, n) }
	key := func(i int) []byte {
		k := fmt.Appendf(nil, "key-%03d", i)
		orders[string(k)] = uint64(i)
		return k
	}
	// 29 B keys and 100 B values: 5 units each, 6 per set.
	long := func(i int) []byte {
		k := fmt.Appendf(nil, "%-29d", i)
		orders[string(k)] = uint64(i)
		return k
	}
	for i := range 6 {
		c.put(uint64(i), long(i), val(i, 100))
	}
	checkRowCache(t, c, orders)
	if c.n != 6 {
		t.Fatalf("%d entries of 5 units in a set of %d units, want 6", c.n, rowUnits)
	}
	if _, ok := c.get(0, long(0)); !ok { // referenced: survives the next insertion
		t.Fatal("entry 0 missing")
	}
	c.put(6, long(6), val(6, 100))
	checkRowCache(t, c, orders)
	for i, want := range []bool{true, false, true, true, true, true, true} {
		if v, ok := c.get(uint64(i), long(i)); ok != want || ok && !bytes.Equal(v, val(i, 100)) {
			t.Fatalf("after one replacement: entry %d cached %v, want %v", i, ok, want)
		}
	}
	// Every entry is referenced now: a full round of second chances, then the oldest goes.
	c.put(7, long(7), val(7, 100))
	checkRowCache(t, c, orders)
	if _, ok := c.get(2, long(2)); ok {
		t.Fatal("entry 2 (oldest after entry 0's second chance) still cached")
	}
	if _, ok := c.get(7, long(7)); !ok {
		t.Fatal("entry 7 not cached")
	}

	// Small entries: the words bound a set.
	for i := 100; i < 100+3*rowWays; i++ {
		c.put(uint64(i), key(i), val(i, 4))
	}
	checkRowCache(t, c, orders)
	if c.n != rowWays {
		t.Fatalf("%d entries of one unit, want %d (one per word)", c.n, rowWays)
	}
	// Fragmentation: drop every other one-unit entry, fill with 2-unit entries so that the
	// free units are scattered, then insert the longest entry: a compaction makes its run.
	c2, err := newRowCache(b, rowSet)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.close()
	want := map[int][]byte{}
	for i := 200; i < 200+rowWays; i++ { // 16 entries: 1 unit each
		c2.put(uint64(i), key(i), val(i, 10))
		want[i] = val(i, 10)
	}
	for i := 200; i < 200+rowWays; i += 2 {
		c2.drop(uint64(i), key(i))
		delete(want, i)
	}
	checkRowCache(t, c2, orders)
	// 8 entries in units 1, 3, …, 15; units 0, 2, …, 14 and 16…29 free: 22 free units, the
	// longest run 14 < 16.
	_, used, mask := rowScan(c2.set(0))
	if used != 8 || rowFreeRun(mask, rowMaxUnits) >= 0 {
		t.Fatalf("set not fragmented as planned: %d units used, mask %#x", used, mask)
	}
	c2.put(300, key(300), val(300, rowMaxData-len(key(300))))
	want[300] = val(300, rowMaxData-len(key(300)))
	checkRowCache(t, c2, orders)
	for i, w := range want {
		if v, ok := c2.get(uint64(i), key(i)); !ok || !bytes.Equal(v, w) {
			t.Fatalf("after compaction: entry %d = %q %v, want %q", i, v, ok, w)
		}
	}
	if c2.n != len(want) {
		t.Fatalf("after compaction %d entries, want %d", c2.n, len(want))
	}
}

// TestRowCacheRandom drives a small cache with random puts, refreshes, drops and gets of keys
// and values of random sizes against a map of what each key's value is: a hit always returns
// the key's value, a refresh of a cached key leaves it cached or dropped with the new value,
// and the structure holds after every step. (That a value handed out stays valid, invariant 3,
// is the lower reader's copy: TestRowCacheHeldValues, and the root package's
// TestRowCacheRealisticRows.)
func TestRowCacheRandom(t *testing.T) {
	b := memory.NewBudget(1 << 20)
	c, err := newRowCache(b, 3*rowSet)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	rng := rand.New(rand.NewPCG(1, 2))
	const keys = 60
	orders := map[string]uint64{}
	key := func(i int) []byte {
		k := fmt.Appendf(nil, "%0*d", 2+i%40, i)
		orders[string(k)] = uint64(i) * 0x1357 // some share a set, a few a tag
		return k
	}
	model := map[int][]byte{}
	hits, inserts := 0, 0
	value := func(i int) []byte {
		n := rng.IntN(rowMaxData + 20)
		if rng.IntN(3) == 0 {
			n = rng.IntN(130)
		}
		v := make([]byte, n)
		for j := range v {
			v[j] = byte(rng.Uint32())
		}
		return v
	}
	for step := range 20000 {
		i := rng.IntN(keys)
		k, o := key(i), orders[string(key(i))]
		switch op := rng.IntN(10); {
		case op < 4: // a read of the lower tier: get, then put on a miss
			v, ok := c.get(o, k)
			if ok {
				hits++
				if !bytes.Equal(v, model[i]) {
					t.Fatalf("step %d: get %d = %x, want %x", step, i, v, model[i])
				}
				break
			}
			if _, ok := model[i]; !ok {
				model[i] = value(i)
			}
			c.put(o, k, model[i])
			inserts++
		case op < 7: // a write: refresh
			_, was := c.get(o, k)
			model[i] = value(i)
			c.refresh(o, k, model[i])
			v, ok := c.get(o, k)
			if ok && (!was || !bytes.Equal(v, model[i])) {
				t.Fatalf("step %d: after refresh %d cached %v (was %v) = %x, want %x", step, i, ok, was, v, model[i])
			}
			if was && !ok && len(k)+len(model[i]) <= rowMaxData {
				t.Fatalf("step %d: refresh of cached %d to %d bytes dropped it", step, i, len(model[i]))
			}
		case op < 8: // a clear
			c.drop(o, k)
			delete(model, i)
			if _, ok := c.get(o, k); ok {
				t.Fatalf("step %d: %d cached after drop", step, i)
			}
		default:
			if v, ok := c.get(o, k); ok && !bytes.Equal(v, model[i]) {
				t.Fatalf("step %d: get %d = %x, want %x", step, i, v, model[i])
			}
		}
		checkRowCache(t, c, orders)
	}
	if hits < 1000 || c.tooLarge == 0 || inserts < 1000 {
		t.Fatalf("weak run: %d hits, %d inserts, %d too large", hits, inserts, c.tooLarge)
	}
}
