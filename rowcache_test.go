package strata

import (
	"bytes"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-db/strata/internal/engine"
	"github.com/strata-db/strata/internal/vfs"
	"github.com/strata-db/strata/memory"
)

// Targeted tests of the row cache (engine/rowcache.go) through the typed API: the
// write-through refresh and its limits through value and reducing state, MergeNamespaces and
// reopens, realistic windowed rows with TTL, and the memory accounting of the row cache
// (options, shared budgets, Open failures, page rounding). Values and list reads held across
// later reads, and WaitBackground's installs, are tested in internal/engine
// (rowcache_engine_test.go) with byte keys. The random model over the row cache is TestModel
// (store_model_test.go: its checkCache step, and the memfs, one-set, kg-range and pressure
// configurations).

// TestRowCacheStore: a value read twice from the LsmStore is served by the row cache the second
// time; a write drops it (the next read sees the new value from the FreshTable, then from the
// LsmStore again after an eviction); RowCacheSize < 0 turns it off; too small a size is
// refused with ErrInvalidOptions.
func TestRowCacheStore(t *testing.T) {
	if err := (Options{RowCacheSize: 100}).Validate(); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("RowCacheSize 100: %v, want ErrInvalidOptions", err)
	}
	for _, size := range []int64{0, -1} {
		t.Run(fmt.Sprint("size=", size), func(t *testing.T) {
			dir := t.TempDir()
			s, err := Open(dir, Options{MemoryBudget: 64 << 20, SegmentSize: 16 << 20, RowCacheSize: size})
			if err != nil {
				t.Fatal(err)
			}
			v := must(NewValueState(s, ValueDescriptor[string]{Name: "v", Codec: String}))
			k := s.Key([]byte("key"))
			if err := v.Put(k, "one"); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil { // persisted: the value is in the LsmStore now
				t.Fatal(err)
			}
			if s, err = Open(dir, Options{MemoryBudget: 64 << 20, SegmentSize: 16 << 20, RowCacheSize: size}); err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			v = must(NewValueState(s, ValueDescriptor[string]{Name: "v", Codec: String}))
			read := func(want string) {
				t.Helper()
				got, ok, err := v.Get(k)
				if err != nil || !ok || got != want {
					t.Fatalf("get = %q %v %v, want %q", got, ok, err, want)
				}
			}
			read("one")
			read("one")
			st := s.Stats()
			if size < 0 {
				if st.Caches.RowBytes != 0 || st.Caches.RowHits != 0 {
					t.Fatalf("row cache off: stats %d bytes, %d hits", st.Caches.RowBytes, st.Caches.RowHits)
				}
				return
			}
			if st.Caches.RowBytes != 64<<20/DefaultBlockCacheDivisor*DefaultRowCacheShare || st.Caches.RowHits != 1 || st.Caches.RowMisses != 1 {
				t.Fatalf("row cache: %d bytes, %d hits, %d misses; want %d, 1, 1", st.Caches.RowBytes, st.Caches.RowHits,
					st.Caches.RowMisses, 64<<20/DefaultBlockCacheDivisor*DefaultRowCacheShare)
			}
			if err := v.Put(k, "two"); err != nil {
				t.Fatal(err)
			}
			read("two")
			if err := v.Clear(k); err != nil {
				t.Fatal(err)
			}
			if _, ok, err := v.Get(k); ok || err != nil {
				t.Fatalf("after Clear: %v %v", ok, err)
			}
		})
	}
}

// openRowCacheStore opens a Store over a MemFS with evictions on demand only.
func openRowCacheStore(t *testing.T, mem *vfs.MemFS, rows int64) *Store {
	t.Helper()
	opts := Options{MaxParallelism: 128, MemoryBudget: 128 << 20, SegmentSize: 16 << 20, BackgroundWorkers: 2,
		BlockCacheSize: 1 << 20, RowCacheSize: rows, fs: mem}
	s, err := open("/db", opts, func(o *engine.Options) { o.EvictionBatch, o.EvictionWatermark = 64<<10, 0 })
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestRowCacheAttackWriteThrough: targeted sequences around the write-through refresh, each
// checked by value and by the cache's hit counter: a refresh serves the new value once it moved
// down; a refresh that no longer fits drops the entry; the exact slot limit is cached and one
// byte more is not; empty values; Clear then Get (before and after the tombstone moves down,
// and after a reopen); a refused Put keeps the old value; a reducing Add chain and
// MergeNamespaces over cached keys never resurrect a cleared source.
func TestRowCacheAttackWriteThrough(t *testing.T) {
	mem := vfs.NewMem()
	s := openRowCacheStore(t, mem, 4096)
	defer func() { s.Close() }()
	var val *ValueState[[]byte]
	var red *ReducingState[int64]
	attach := func() {
		val = must(NewValueState(s, ValueDescriptor[[]byte]{Name: "v", Codec: Bytes}))
		red = must(NewReducingState(s, ReducingDescriptor[int64]{Name: "r", Codec: Int64, Reduce: modelReduce}))
	}
	attach()
	down := func() {
		t.Helper()
		must(0, s.seal())
		must(0, s.WaitBackground())
		for i := 0; i < 100 && s.Stats().Slices.Count > 0; i++ {
			s.Evict()
			must(0, s.WaitBackground())
		}
		if st := s.Stats(); st.Slices.Count != 0 || st.Fresh.SealedSegments != 0 || st.Fresh.Records != 0 {
			t.Fatalf("not all in the LsmStore: %+v", st)
		}
	}
	hits := func() int64 { return s.Stats().Caches.RowHits }
	get := func(k Key, want []byte, wantOK bool, wantHit bool) {
		t.Helper()
		h := hits()
		got, ok, err := val.Get(k)
		if err != nil || ok != wantOK || !bytes.Equal(got, want) {
			t.Fatalf("get %q = %q %v %v, want %q %v", k.Bytes(), got, ok, err, want, wantOK)
		}
		if hit := hits() > h; hit != wantHit {
			t.Fatalf("get %q: hit %v, want %v", k.Bytes(), hit, wantHit)
		}
	}
	k := s.Key([]byte("k1"))           // composite key: 5 + 2 bytes
	room := engine.RowCacheMaxData - 7 // the longest value that is cached
	kLong := s.Key([]byte("k2"))       // refreshed beyond the limit
	kEmpty := s.Key([]byte("k3"))
	kClr := s.Key([]byte("k4"))
	must(0, val.Put(k, []byte("one")))
	must(0, val.Put(kLong, []byte("short")))
	must(0, val.Put(kEmpty, []byte{}))
	must(0, val.Put(kClr, []byte("doomed")))
	down()
	get(k, []byte("one"), true, false)
	get(k, []byte("one"), true, true)
	get(kLong, []byte("short"), true, false)
	get(kEmpty, nil, true, false)
	get(kEmpty, nil, true, true)
	get(kClr, []byte("doomed"), true, false)

	// Write-through: the FreshTable serves the new value, then the cache once it moved down.
	must(0, val.Put(k, []byte("two")))
	get(k, []byte("two"), true, false)
	down()
	get(k, []byte("two"), true, true)
	// Exactly the limit: refreshed and served from the cache.
	full := bytes.Repeat([]byte("f"), room)
	must(0, val.Put(k, full))
	down()
	get(k, full, true, true)
	// One byte over: dropped, read from the LsmStore, never cached.
	over := bytes.Repeat([]byte("o"), room+1)
	must(0, val.Put(kLong, over))
	down()
	get(kLong, over, true, false)
	get(kLong, over, true, false)
	// Back to short: a miss, then cached again.
	must(0, val.Put(kLong, []byte("s")))
	down()
	get(kLong, []byte("s"), true, false)
	get(kLong, []byte("s"), true, true)
	// An empty value refreshed to non-empty and back.
	must(0, val.Put(kEmpty, []byte("x")))
	down()
	get(kEmpty, []byte("x"), true, true)
	must(0, val.Put(kEmpty, nil))
	down()
	get(kEmpty, nil, true, true)
	// Clear then Get: absent from the FreshTable, from the LsmStore, after a reopen.
	must(0, val.Clear(kClr))
	get(kClr, nil, false, false)
	down()
	get(kClr, nil, false, false)
	get(kClr, nil, false, false)
	// Clear then Put again: not cached until read from the LsmStore again.
	must(0, val.Put(kClr, []byte("back")))
	down()
	get(kClr, []byte("back"), true, false)
	get(kClr, []byte("back"), true, true)
	// A refused Put (ErrValueTooLarge) keeps the old value, cached.
	if err := val.Put(kClr, make([]byte, (16<<20)/4+1)); !errors.Is(err, ErrValueTooLarge) {
		t.Fatalf("huge put: %v", err)
	}
	get(kClr, []byte("back"), true, true)
	down()
	get(kClr, []byte("back"), true, true)

	// Reducing: Add over a cached value, pushed down between every step.
	rk := s.Key([]byte("r"))
	want := int64(0)
	for i := range 12 {
		must(0, red.Add(rk, int64(i)))
		if i == 0 {
			want = 0
		} else {
			want = modelReduce(want, int64(i))
		}
		if i%3 == 0 {
			down()
		}
		got, ok, err := red.Get(rk)
		if err != nil || !ok || got != want {
			t.Fatalf("reducing after add %d = %d %v %v, want %d", i, got, ok, err, want)
		}
	}
	// MergeNamespaces over cached sources and target.
	ns := func(s string) []byte { return []byte(s) }
	must(0, red.Add(rk.In(ns("a")), 5))
	must(0, red.Add(rk.In(ns("b")), 7))
	must(0, red.Add(rk.In(ns("t")), 11))
	down()
	for _, n := range []string{"a", "b", "t", "a", "b", "t"} { // misses, then hits: all cached
		if _, ok, err := red.Get(rk.In(ns(n))); !ok || err != nil {
			t.Fatalf("reducing %q before merge: %v %v", n, ok, err)
		}
	}
	must(0, red.MergeNamespaces(rk, ns("t"), ns("a"), ns("b"), ns("a"), ns("t")))
	wantT := modelReduce(11, modelReduce(5, 7))
	check := func(when string) {
		t.Helper()
		for _, n := range []string{"a", "b"} {
			if v, ok, err := red.Get(rk.In(ns(n))); ok || err != nil {
				t.Fatalf("%s: merged source %q = %d %v %v, want absent", when, n, v, ok, err)
			}
		}
		if v, ok, err := red.Get(rk.In(ns("t"))); !ok || err != nil || v != wantT {
			t.Fatalf("%s: merge target = %d %v %v, want %d", when, v, ok, err, wantT)
		}
	}
	check("after merge")
	down()
	check("after the merge moved down")
	check("again (cache)")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openRowCacheStore(t, mem, 4096)
	attach()
	check("after reopen")
	get(kClr, []byte("back"), true, false)
	get(kClr, []byte("back"), true, true)
	get(k, full, true, false)
	get(kLong, []byte("s"), true, false)
}

// TestRowCacheAttackBudget: the row cache's memory is what the budget accounts for it (page
// rounding included) and is given back at Close; stores sharing a budget account each their
// own; a row cache larger than the budget fails Open with ErrMemoryBudget and leaves nothing
// behind (budget, reserve, directory lock); a Store in memory only has none. A Store whose
// LsmStore is empty maps no cache (they yield to state until there is something to cache).
func TestRowCacheAttackBudget(t *testing.T) {
	shared := NewBudget(256 << 20)
	var stores []*Store
	for i, rows := range []int64{0, 2000, 1024, -1} {
		opts := Options{SharedBudget: shared, SegmentSize: 16 << 20, RowCacheSize: rows, fs: vfs.NewMem()}
		dir := fmt.Sprintf("/db%d", i)
		s, err := open(dir, opts, nil)
		if err != nil {
			t.Fatalf("open %d (rows %d): %v", i, rows, err)
		}
		if st := s.Stats(); st.Caches.RowBytes != 0 || st.Caches.BlockBytes != 0 {
			t.Errorf("store %d (rows %d), LsmStore empty: caches of %d + %d bytes mapped, want none",
				i, rows, st.Caches.RowBytes, st.Caches.BlockBytes)
		}
		v := must(NewValueState(s, ValueDescriptor[string]{Name: "v", Codec: String}))
		if err := v.Put(s.Key([]byte("k")), "x"); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil { // persisted: the LsmStore holds data, the caches are mapped at Open
			t.Fatal(err)
		}
		if s, err = open(dir, opts, nil); err != nil {
			t.Fatalf("reopen %d (rows %d): %v", i, rows, err)
		}
		stores = append(stores, s)
		st := s.Stats()
		want := int64(0)
		switch {
		case rows == 0:
			want = 256 << 20 / DefaultBlockCacheDivisor * DefaultRowCacheShare
		case rows > 0:
			want = int64(memoryPage()) // one set, a page mapped
		}
		if st.Caches.RowBytes != want {
			t.Errorf("store %d (rows %d): RowCacheBytes %d, want %d", i, rows, st.Caches.RowBytes, want)
		}
		if rows > 0 && st.Caches.RowSets != 1 {
			t.Errorf("store %d (rows %d): %d sets, want 1", i, rows, st.Caches.RowSets)
		}
	}
	var sum int64
	for _, s := range stores {
		st := s.Stats()
		sum += st.Caches.BlockBytes + st.Caches.RowBytes
	}
	if got := shared.UsedBy(memory.PurposeBlockCache); got != sum {
		t.Errorf("budget accounts %d bytes of caches, stores report %d", got, sum)
	}
	for _, s := range stores {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if u, r := shared.Used(), shared.Reserve(); u != 0 || r != 0 {
		t.Errorf("after Close of every store: budget used %d, reserve %d; want 0, 0", u, r)
	}

	// A row cache larger than the budget: Open fails and leaves nothing.
	mem := vfs.NewMem()
	_, err := open("/big", Options{SharedBudget: shared, SegmentSize: 16 << 20, RowCacheSize: 1 << 40, fs: mem}, nil)
	if !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("open with a 1 TiB row cache: %v, want ErrInvalidOptions", err)
	}
	if u, r := shared.Used(), shared.Reserve(); u != 0 || r != 0 {
		t.Errorf("after a refused Open: budget used %d, reserve %d; want 0, 0", u, r)
	}
	// A shared budget others filled: Open fails for memory (it maps its first segment) and
	// leaves nothing.
	held, err := shared.Map(int(shared.Limit()-8<<20), memory.PurposeFreshData)
	if err != nil {
		t.Fatal(err)
	}
	_, err = open("/big", Options{SharedBudget: shared, SegmentSize: 16 << 20, fs: mem}, nil)
	if !errors.Is(err, ErrMemoryBudget) {
		t.Fatalf("open on a full shared budget: %v, want ErrMemoryBudget", err)
	}
	if u, r := shared.Used(), shared.Reserve(); u != shared.Limit()-8<<20 || r != 0 {
		t.Errorf("after a failed Open: budget used %d, reserve %d; want %d, 0", u, r, shared.Limit()-8<<20)
	}
	if err := held.Release(); err != nil {
		t.Fatal(err)
	}
	s, err := open("/big", Options{SharedBudget: shared, SegmentSize: 16 << 20, fs: mem}, nil)
	if err != nil {
		t.Fatalf("open after a failed Open of the same directory: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if u := shared.Used(); u != 0 {
		t.Errorf("budget used %d after Close", u)
	}
	// In memory only: no row cache whatever the option says.
	ms := openTest(t, Options{RowCacheSize: 1 << 20})
	if st := ms.Stats(); st.Caches.RowBytes != 0 || st.Caches.RowSets != 0 {
		t.Errorf("in-memory store has a row cache of %d bytes", st.Caches.RowBytes)
	}
}

func memoryPage() int {
	b := memory.NewBudget(1 << 30)
	r, err := b.Map(1, memory.PurposeOther)
	if err != nil {
		panic(err)
	}
	n := len(r.Bytes())
	r.Release()
	return n
}

// pushDown moves everything of s into the LsmStore (seal, transform, evict every slice).
func pushDown(t *testing.T, s *Store) {
	t.Helper()
	must(0, s.seal())
	must(0, s.WaitBackground())
	for i := 0; i < 100 && s.Stats().Slices.Count > 0; i++ {
		s.Evict()
		must(0, s.WaitBackground())
	}
	if st := s.Stats(); st.Slices.Count != 0 || st.Fresh.SealedSegments != 0 || st.Fresh.Records != 0 {
		t.Fatalf("not all in the LsmStore: %+v", st)
	}
}

// TestRowCacheRealisticRows: rows as a windowed job keeps them — a 16 B key in an 8 B namespace
// (a 29 B composite key) with a 100 B value, with and without a TTL (8 B more) — read from the
// LsmStore are hits from the second read on; a Put refreshes the cached copy (same size, and a
// size that takes other units), a Clear drops it; values handed out stay intact while later
// reads churn a small cache; a row longer than engine.RowCacheMaxData is never cached and is
// counted; an expired TTL row is not returned and leaves the cache (invariant 4).
func TestRowCacheRealisticRows(t *testing.T) {
	var now atomic.Int64
	now.Store(1000)
	mem := vfs.NewMem()
	open := func() *Store {
		opts := Options{MaxParallelism: 128, MemoryBudget: 128 << 20, SegmentSize: 16 << 20, BackgroundWorkers: 2,
			BlockCacheSize: 1 << 20, RowCacheSize: 8 * engine.MinRowCacheSize, Clock: now.Load, fs: mem}
		return must(open("/db", opts, func(o *engine.Options) { o.EvictionBatch, o.EvictionWatermark = 64<<10, 0 }))
	}
	s := open()
	defer func() { s.Close() }()
	ttl := &TTLConfig{TTL: time.Second}
	val := must(NewValueState(s, ValueDescriptor[[]byte]{Name: "v", Codec: Bytes}))
	tv := must(NewValueState(s, ValueDescriptor[[]byte]{Name: "t", Codec: Bytes, TTL: ttl}))
	ns := []byte("window01")
	key := func(i int) Key { return s.Key(fmt.Appendf(nil, "user-%011d", i)).In(ns) }
	if ck, _ := s.compose(key(0), val.id); len(ck) != 29 {
		t.Fatalf("composite key of %d bytes, want 29", len(ck))
	}
	value := func(i, gen, n int) []byte { return bytes.Repeat([]byte{byte(i), byte(gen)}, n)[:n] }
	const n = 400 // 8 sets of 6 rows: most of them churn
	for i := range n {
		must(0, val.Put(key(i), value(i, 0, 100)))
		must(0, tv.Put(key(i), value(i, 0, 100)))
	}
	must(0, val.Put(s.Key([]byte("big")), value(0, 0, 600)))
	pushDown(t, s)

	hits := func() int64 { return s.Stats().Caches.RowHits }
	get := func(st *ValueState[[]byte], k Key, want []byte, wantOK, wantHit bool) []byte {
		t.Helper()
		h := hits()
		got, ok, err := st.Get(k)
		if err != nil || ok != wantOK || !bytes.Equal(got, want) {
			t.Fatalf("get %q = %s %v %v, want %s %v", k.Bytes(), shortBytes(got), ok, err, shortBytes(want), wantOK)
		}
		if hit := hits() > h; hit != wantHit {
			t.Fatalf("get %q: hit %v, want %v", k.Bytes(), hit, wantHit)
		}
		return got
	}
	type held struct{ got, want []byte }
	var hs []held
	for i := range n {
		for _, st := range []*ValueState[[]byte]{val, tv} {
			get(st, key(i), value(i, 0, 100), true, false)
			hs = append(hs, held{get(st, key(i), value(i, 0, 100), true, true), value(i, 0, 100)})
		}
	}
	for _, h := range hs { // held across 2n later reads that replaced most entries
		if !bytes.Equal(h.got, h.want) {
			t.Fatalf("a value handed out changed: %s, want %s", shortBytes(h.got), shortBytes(h.want))
		}
	}
	// Too long: never cached, counted.
	before := s.Stats().Caches.RowTooLarge
	get(val, s.Key([]byte("big")), value(0, 0, 600), true, false)
	get(val, s.Key([]byte("big")), value(0, 0, 600), true, false)
	if got := s.Stats().Caches.RowTooLarge - before; got != 2 {
		t.Fatalf("RowCacheTooLarge counted %d, want 2", got)
	}

	k := key(n - 1) // the last one read: cached
	get(val, k, value(n-1, 0, 100), true, true)
	// Write-through, same size: the FreshTable serves it, then the cache.
	must(0, val.Put(k, value(n-1, 1, 100)))
	get(val, k, value(n-1, 1, 100), true, false)
	pushDown(t, s)
	get(val, k, value(n-1, 1, 100), true, true)
	// Write-through to a size of other units (100 → 300 → 8 bytes).
	for gen, size := range []int{300, 8} {
		must(0, val.Put(k, value(n-1, 2+gen, size)))
		pushDown(t, s)
		get(val, k, value(n-1, 2+gen, size), true, true)
	}
	// Clear drops it: absent before and after the tombstone moves down, never a hit.
	must(0, val.Clear(k))
	get(val, k, nil, false, false)
	pushDown(t, s)
	get(val, k, nil, false, false)
	get(val, k, nil, false, false)
	if err := s.e.CheckRowCache(func(ck, _ []byte) error {
		if want, _ := s.compose(k, val.id); bytes.Equal(ck, want) {
			return errors.New("a cleared key is cached")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// TTL (invariant 4): cached with its timestamp, a hit while live; expired, not returned and
	// dropped from the cache.
	kt := key(n - 2)
	get(tv, kt, value(n-2, 0, 100), true, true)
	cached := s.Stats().Caches.RowEntries
	now.Add(int64(time.Second / time.Millisecond))
	get(tv, kt, nil, false, false)
	if got := s.Stats().Caches.RowEntries; got != cached-1 {
		t.Fatalf("expired row: cache holds %d entries, want %d", got, cached-1)
	}
	get(tv, kt, nil, false, false)
	must(0, s.Check())
}
