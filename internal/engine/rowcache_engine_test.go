package engine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/strata-db/strata/internal/vfs"
	"github.com/strata-db/strata/memory"
)

// Tests of the row cache (rowcache.go) and the lower reader's arena (lower.go) through the
// Engine, with byte keys (harness_test.go): values and list batches handed out stay intact over
// many later reads until the next write, and WaitBackground installs everything queued. They
// moved here from the root package (issue 26), which keeps the typed API's side of the row
// cache (its options, its budget accounting, the write-through refresh through every state
// kind) and the random model over it (store_model_test.go).

// rowCacheOptions are the options of an engine on mem with a row cache of rows bytes, a
// 1 MiB block cache and evictions on demand only (Evict), as the root's Options with
// MemoryBudget 128 MiB, SegmentSize 16 MiB, BackgroundWorkers 2 would give it.
func rowCacheOptions(mem *vfs.MemFS, rows int64) Options {
	return Options{Dir: "/db", FS: mem, Budget: memory.NewBudget(128 << 20), SegmentSize: 16 << 20, Workers: 2,
		BlockCacheSize: 1 << 20, RowCacheSize: rows, EvictionBatch: 64 << 10, EvictionRoom: 20 << 20}
}

// TestRowCacheHeldValues: values read from the LsmStore (misses copied by the lower reader,
// hits copied out of the row cache) stay intact while thousands of later reads churn a one-set
// row cache and fill the arena past a chunk (lowArenaMax), and a list read held across those
// reads still holds its list; reading a cacheable key twice in a row hits the second time and
// an uncacheable one never does; the one set never holds more than rowWays entries; after a
// write, reads are still right.
func TestRowCacheHeldValues(t *testing.T) {
	const n = 12000 // two reads each: several MiB through the arena, past lowArenaMax
	const val, lstA, lstB = 1, 2, 3
	mem := vfs.NewMem()
	o := rowCacheOptions(mem, MinRowCacheSize)
	h := newHarness(t, o)
	keyOf := func(i int) []byte { return []byte(fmt.Sprintf("key-%06d", i)) }
	valOf := func(i int) []byte {
		// 0..130 bytes; every fourth 300..799 bytes, which straddles the row limit
		// (composite key: 5 + 10 bytes, RowCacheMaxData) and fills the arena.
		n := i % 131
		if i%4 == 3 {
			n = 300 + i%500
		}
		return bytes.Repeat([]byte{byte(i), byte(i >> 8)}, n)[:n]
	}
	if ck := composite(val, keyOf(0)); len(ck) != 15 {
		t.Fatalf("composite key of %d bytes, want 15", len(ck))
	}
	cacheable := func(i int) bool { return len(composite(val, keyOf(i)))+len(valOf(i)) <= RowCacheMaxData }
	elems := func(l string, i int) [][]byte {
		return [][]byte{fmt.Appendf(nil, "%s%d-0", l, i), fmt.Appendf(nil, "%s%d-1", l, i), fmt.Appendf(nil, "%s%d-2", l, i)}
	}
	for i := range n {
		h.put(val, keyOf(i), valOf(i))
		if i%50 == 0 {
			for j, e := range elems("a", i) {
				h.listAdd(lstA, keyOf(i), e)
				h.listAdd(lstB, keyOf(i), elems("b", i)[j])
			}
		}
	}
	h.reopen() // everything into the LsmStore

	type held struct {
		i   int
		got []byte
	}
	var hs []held
	read := func(i int) {
		t.Helper()
		got, ok := h.get(val, keyOf(i))
		if !ok || !bytes.Equal(got, valOf(i)) {
			t.Fatalf("get %d = %x %v, want %x", i, got, ok, valOf(i))
		}
		hs = append(hs, held{i, got})
	}
	heldA, ok := h.listGet(lstA, keyOf(0), nil)
	if !ok {
		t.Fatal("list a of key 0 absent")
	}
	before := h.rowHits()
	wantHits := int64(0)
	for i := range n {
		read(i)
		read(i) // a hit when cacheable: it was just inserted, the newest entry of its set
		if cacheable(i) {
			wantHits++
		}
		if i%50 == 0 {
			if got, want := h.list(lstB, keyOf(i)), elems("b", i); !slices.EqualFunc(got, want, bytes.Equal) {
				t.Fatalf("list b %d = %q, want %q", i, got, want)
			}
		}
	}
	// Key 0 again, long after its slot was replaced many times over (one set).
	read(0)
	if hits := h.rowHits() - before; hits != wantHits {
		t.Errorf("row cache hits %d, want %d (one per cacheable key read twice in a row)", hits, wantHits)
	}
	if h.e.rc == nil || h.e.rc.sets != 1 || h.e.rc.n > RowCacheWays {
		t.Fatalf("row cache %+v: want one set of at most %d entries", h.e.rc, RowCacheWays)
	}
	for _, x := range hs {
		if !bytes.Equal(x.got, valOf(x.i)) {
			t.Fatalf("value of key %d read before %d later reads changed: %x, want %x", x.i, len(hs), x.got, valOf(x.i))
		}
	}
	var gotA [][]byte
	for _, b := range heldA {
		gotA = append(gotA, unframe(t, b)...)
	}
	if want := elems("a", 0); !slices.EqualFunc(gotA, want, bytes.Equal) {
		t.Fatalf("list a held across %d reads = %q, want %q", len(hs), gotA, want)
	}
	// A write, then every value again (and its cache copy) is right.
	h.put(val, keyOf(1), []byte("new"))
	for i := 0; i < n; i += 97 {
		want := valOf(i)
		if i == 1 {
			want = []byte("new")
		}
		if got, ok := h.get(val, keyOf(i)); !ok || !bytes.Equal(got, want) {
			t.Fatalf("after a write: get %d = %x %v, want %x", i, got, ok, want)
		}
	}
	if err := h.e.CheckRowCache(func(_, _ []byte) error { return nil }); err != nil {
		t.Fatal(err)
	}
}

// TestWaitBackgroundInstalls: after a load over several segments, WaitBackground leaves no
// sealed segment and no job in flight (Busy), reads are right, an open map iteration whose
// tiers moved ends with ErrIteratorInvalidated, and an idle WaitBackground returns at once.
func TestWaitBackgroundInstalls(t *testing.T) {
	n := 120
	if testing.Short() || raceEnabled {
		n = 60
	}
	const val, mp = 1, 2
	h := newHarness(t, rowCacheOptions(vfs.NewMem(), 8192))
	mk, hm := testKey(mp, []byte("map"))
	for _, uk := range []string{"x", "y", "z"} {
		h.apply(opMapPut(mk, hm, []byte(uk), u64(1)))
	}
	big := bytes.Repeat([]byte("b"), 512<<10)
	for i := range n { // n × 512 KiB: several 16 MiB segments sealed
		h.put(val, fmt.Append(nil, i), append(big[:len(big):len(big)], byte(i)))
	}
	it := h.e.MapIter(hm, mk)
	it.Hold() // as the root's MapIterator: an iteration that spans writes
	defer it.Close()
	if !it.Next() {
		t.Fatalf("map iteration: %v", it.Err())
	}
	if err := h.e.Seal(); err != nil { // queues a transform that only WaitBackground installs (no write follows)
		t.Fatal(err)
	}
	if err := h.e.WaitBackground(); err != nil {
		t.Fatal(err)
	}
	st := h.e.Stats()
	if st.SealedSegments != 0 || st.Transforms == 0 || h.e.Busy() {
		t.Fatalf("after WaitBackground: %d sealed segments, %d transforms, busy %v", st.SealedSegments, st.Transforms, h.e.Busy())
	}
	for it.Next() {
	}
	if !errors.Is(it.Err(), ErrIteratorInvalidated) {
		t.Errorf("map iteration across WaitBackground's installs: %v, want ErrIteratorInvalidated", it.Err())
	}
	for i := range n {
		got, ok := h.get(val, fmt.Append(nil, i))
		if !ok || len(got) != len(big)+1 || got[len(big)] != byte(i) {
			t.Fatalf("get %d: %d bytes %v", i, len(got), ok)
		}
	}
	if err := h.e.WaitBackground(); err != nil { // idle: returns at once
		t.Fatal(err)
	}
	h.close() // ErrClosed after Close is the root's (TestWaitBackground, store_test.go)
}

// TestCheckRowCacheReads: the check behind the root's Store.Check passes on a cache filled by
// reads and refreshed by writes (the stats count its sets and entries), and fails — with the
// key, as a broken invariant — on a cached value that differs from the tiers' (which the
// structure walk alone, CheckRowCache, does not see) and on an entry word whose units overlap
// another's (which it does).
func TestCheckRowCacheReads(t *testing.T) {
	const val, n = 1, 200
	mem := vfs.NewMem()
	h := newHarness(t, rowCacheOptions(mem, 64<<10))
	keyOf := func(i int) []byte { return fmt.Appendf(nil, "key-%04d", i) }
	for i := range n {
		h.put(val, keyOf(i), fmt.Appendf(nil, "value-%d", i))
	}
	h.reopen() // everything into the LsmStore
	for i := range n {
		h.get(val, keyOf(i))
	}
	st := h.e.Stats()
	if st.RowCacheSets != 64 || st.RowCacheEntries == 0 || st.RowCacheEntries > n {
		t.Fatalf("row cache of %d sets, %d entries: want 64 sets, 1..%d entries", st.RowCacheSets, st.RowCacheEntries, n)
	}
	h.put(val, keyOf(7), []byte("new")) // write-through refresh of a cached key
	if err := h.e.CheckRowCacheReads(); err != nil {
		t.Fatal(err)
	}
	// The first entry of the first set in use, its value and its word.
	c := h.e.rc
	var s []byte
	for si := range c.sets {
		if s = c.setAt(si); rowWord(s, 0) != 0 {
			break
		}
	}
	e := rowEntry(s, rowWord(s, 0))
	kl, vl := int(e[0])|int(e[1])<<8, int(e[2])|int(e[3])<<8
	if vl == 0 || rowWord(s, 1) == 0 {
		t.Fatalf("first set in use: value of %d bytes, second word %#x: want a value and two entries", vl, rowWord(s, 1))
	}
	v := e[rowEntryHdr+kl : rowEntryHdr+kl+vl]
	v[0] ^= 0xff
	if err := h.e.CheckRowCache(nil); err != nil {
		t.Fatalf("structure walk over a changed value: %v, want nil (the structure is intact)", err)
	}
	err := h.e.CheckRowCacheReads()
	if err == nil || !strings.HasPrefix(err.Error(), "strata: invariant: row cache: key ") {
		t.Fatalf("a cached value unlike the tiers': %v, want a broken invariant", err)
	}
	v[0] ^= 0xff
	w0, w1 := rowWord(s, 0), rowWord(s, 1)
	binary.LittleEndian.PutUint32(s[4:], w1&^(0x1f<<16)|w0&(0x1f<<16)) // entry 1 starts at entry 0's unit
	if err := h.e.CheckRowCacheReads(); err == nil || !strings.Contains(err.Error(), "overlap") {
		t.Fatalf("overlapping entries: %v, want the structure walk's error", err)
	}
	binary.LittleEndian.PutUint32(s[4:], w1)
	if err := h.e.CheckRowCacheReads(); err != nil {
		t.Fatalf("restored: %v", err)
	}
}
