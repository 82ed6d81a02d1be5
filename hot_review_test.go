package strata

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"time"
	"unsafe"

	"sync/atomic"
	"testing"

	"github.com/strata-db/strata/internal/checkpointfs"
	"github.com/strata-db/strata/internal/vfs"
	"github.com/strata-db/strata/memory"
)

// swappedRestore checkpoints two parts of a job (key groups 0–63 and 64–127) that registered
// states x and y in opposite orders — x then y in the first, y then x in the second, so one
// state id names x in one part and y in the other — and restores both into one Store with the
// hot tier on (4 MiB). The caller closes it.
func swappedRestore(t *testing.T, x, y func(*Store)) *Store {
	t.Helper()
	ctx := context.Background()
	fsys := vfs.NewMem()
	st := must(checkpointfs.NewDirStorage(fsys, "/ck"))
	e := &idsEnv{t: t, fs: fsys, st: st, now: new(atomic.Int64)}
	e.now.Store(1_000_000)
	sa := must(Open(e.dir(), e.opts(KeyGroupRange{Start: 0, End: 63}, "a")))
	x(sa)
	y(sa)
	sb := must(Open(e.dir(), e.opts(KeyGroupRange{Start: 64, End: 127}, "b")))
	y(sb)
	x(sb)
	ha := must(sa.Checkpoint(ctx, 1, nil))
	hb := must(sb.Checkpoint(ctx, 1, nil))
	must(0, sa.Close())
	must(0, sb.Close())
	o := e.opts(KeyGroupRange{Start: 0, End: 127}, "c")
	o.HotTierSize = 4 << 20
	return must(Restore(e.dir(), o, st, ha, hb))
}

// TestHotTierAliasByID: after a scale-in restore one state id names different states in
// different key groups (registry invariant 2), so hot.byID keeps every table an id may name:
// an engine write through Store.apply (PutBatch) drops the clean entry of the state that owns
// the key, whichever part registered its states first. (Found by review: byID held one table
// per id, and the later registration's hid the other's stale entry.)
func TestHotTierAliasByID(t *testing.T) {
	p0 := func(s *Store) { must(NewValueState(s, ValueDescriptor[string]{Name: "p", Codec: String})) }
	q0 := func(s *Store) { must(NewValueState(s, ValueDescriptor[string]{Name: "q", Codec: String})) }
	s := swappedRestore(t, p0, q0) // p=1, q=2 in part A; q=1, p=2 in part B
	defer s.Close()
	p := must(NewValueState(s, ValueDescriptor[string]{Name: "p", Codec: String}))
	_ = must(NewValueState(s, ValueDescriptor[string]{Name: "q", Codec: String}))
	// a key of part A (p stored under id 1 there; id 1 is q in part B)
	var k Key
	for i := 0; ; i++ {
		k = s.Key([]byte{byte(i)})
		if k.kg <= 63 {
			break
		}
	}
	must(0, p.Put(k, "old"))
	must(0, s.syncHot()) // the entry is clean now and equals the engine
	if x, _, _ := p.Get(k); x != "old" {
		t.Fatalf("got %q", x)
	}
	// PutBatch writes through Store.apply, which should drop p's entry for k.
	must(0, p.PutBatch([]Key{k}, []string{"new"}))
	if x, _, err := p.Get(k); err != nil || x != "new" {
		t.Fatalf("p.Get after PutBatch: %q, %v; want \"new\" (id %d, byID[%d] is p's table: %v)",
			x, err, p.idAt(k), p.idAt(k), slices.Contains(s.hot.byID[p.idAt(k)], p.hot))
	}
}

// exhaust charges everything the budget has left (reserve included); it returns a refund.
func exhaust(b *Budget) func() {
	var got [][2]int64
	for _, p := range []memory.Purpose{memory.PurposeOther, memory.PurposeOperatorState} {
		for n := b.Limit(); n > 0; n /= 2 {
			for b.Charge(n, p) == nil {
				got = append(got, [2]int64{n, int64(p)})
			}
		}
	}
	return func() {
		for _, g := range got {
			b.Refund(g[0], memory.Purpose(g[1]))
		}
	}
}

// exhaustFilling takes the budget's free room (exhaust), then puts 1000-byte values to fill
// (a state that bypasses the tier) until the engine refuses a write with ErrMemoryBudget. It
// returns exhaust's refund.
func exhaustFilling(t *testing.T, s *Store, fill *ValueState[[]byte]) func() {
	t.Helper()
	refund := exhaust(s.Budget())
	val := make([]byte, 1000)
	var ferr error
	for i := 0; i < 1_000_000 && ferr == nil; i++ {
		ferr = fill.Put(s.Key(fmt.Appendf(nil, "f%d", i)), val)
	}
	if !errors.Is(ferr, ErrMemoryBudget) {
		t.Fatalf("filling: %v", ferr)
	}
	return refund
}

// failingWriteBack opens an in-memory Store with the hot tier, writes key "a" of value state
// "v" into the tier (dirty), then leaves the engine refusing writes for memory: the next
// write-back fails with ErrMemoryBudget.
func failingWriteBack(t *testing.T) (*Store, *ValueState[string], Key, func()) {
	t.Helper()
	s, err := Open("", Options{MaxParallelism: 16, MemoryBudget: 64 << 20, SegmentSize: 2 << 20,
		BackpressureTimeout: time.Millisecond, HotTierSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Discard() })
	v := must(NewValueState(s, ValueDescriptor[string]{Name: "v", Codec: String}))
	// The filler bypasses the tier (H6: a TTL returning expired values has no table), so its
	// writes fill the engine's budget, not the tier.
	fill := must(NewValueState(s, ValueDescriptor[[]byte]{Name: "fill", Codec: Bytes,
		TTL: &TTLConfig{TTL: time.Hour, Visibility: TTLReturnExpiredIfNotCleanedUp}}))
	k := s.Key([]byte("a"))
	must(0, v.Put(k, "x"))
	if s.hot.dirty != 1 {
		t.Fatalf("dirty %d", s.hot.dirty)
	}
	refund := exhaustFilling(t, s, fill)
	if err := s.syncHot(); !errors.Is(err, ErrMemoryBudget) {
		t.Fatalf("write-back on a full budget: %v, want ErrMemoryBudget", err)
	}
	if s.hot.dirty != 1 {
		t.Fatalf("dirty %d after a failed write-back", s.hot.dirty)
	}
	return s, v, k, refund
}

// TestHotTierScanFailedWriteBack: a scan (Keys, KeysAndNamespaces, NumEntries,
// ApplyToAllKeys) whose write-back at enter fails reports that failure rather than reading
// the engine without the tier's dirty key (options.go: "a call that reads across keys fails
// while a write-back fails"; scanStep asks hotErrCheck).
func TestHotTierScanFailedWriteBack(t *testing.T) {
	s, v, _, _ := failingWriteBack(t)
	seq, errf := s.Keys(v, nil)
	var got []string
	for k := range seq {
		got = append(got, string(k.Bytes()))
	}
	n, nerr := s.NumEntries(v)
	if err := errf(); err == nil || nerr == nil {
		t.Fatalf("Keys(v) while the write-back fails: keys %q, err %v; NumEntries %d, err %v — want an error (or key \"a\")",
			got, err, n, nerr)
	}
}

// TestHotTierHeapBound: entries made and dropped between drops of the tier (hotDelete: an
// engine write through Store.apply, a list above hotListMax, a failed read) do not pin Go
// heap the budget never sees: the heap grows by at most 4× what the tier charges. (Entries
// came from 256-entry slabs whose freed slots were never reused: 82 MB for 512 KiB charged.)
func TestHotTierHeapBound(t *testing.T) {
	s, err := Open("", Options{MaxParallelism: 16, MemoryBudget: 64 << 20, HotTierSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Discard()
	v := must(NewValueState(s, ValueDescriptor[int64]{Name: "v", Codec: Int64}))
	churn := s.Key([]byte("churn"))
	must(0, v.Put(churn, 1))
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	const live = 2000
	for i := range live {
		must(0, v.Put(s.Key(fmt.Appendf(nil, "live-%d", i)), int64(i))) // one live entry
		for range 255 {
			must2(v.Get(churn))                                  // a clean entry for churn
			must(0, v.PutBatch([]Key{churn}, []int64{int64(i)})) // Store.apply drops it
		}
	}
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	st := s.Stats().HotTier
	heap := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("sizeof(hotEntry) %d; tier: %d entries, %d bytes estimated, %d charged, %d drops; Go heap grew %d bytes",
		unsafe.Sizeof(hotEntry{}), st.Entries, st.Bytes, st.Charged, st.Drops, heap)
	if heap > 4*st.Charged {
		t.Fatalf("the tier holds %d bytes of Go heap for %d charged (%d live entries)", heap, st.Charged, st.Entries)
	}
}

// hotTable alone against a Go map: adds, deletes, finds, with colliding hashes and tags.
func TestHotTierTableRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	tb := &hotTable{}
	model := map[string]uint64{} // key -> table hash; entries move, so the model keeps no pointer
	for op := range 200_000 {
		k := fmt.Sprint(rng.IntN(3000))
		hx := uint64(rng.IntN(1 << 20)) // many collisions; tags small
		if len(k)%2 == 0 {
			hx = uint64(len(k)) // all in a few chains, one tag
		}
		if h, ok := model[k]; ok {
			got := tb.find([]byte(k), len(k), h)
			if got == nil || got.key() != k || got.h != h || got.tab != tb {
				t.Fatalf("op %d: find %q: %+v", op, k, got)
			}
			if rng.IntN(2) == 0 {
				tb.del(got)
				delete(model, k)
			}
			continue
		}
		if got := tb.find([]byte(k), len(k), hx); got != nil {
			t.Fatalf("op %d: absent %q found", op, k)
		}
		e := tb.add(hx)
		e.h, e.klen = hx, uint16(len(k))
		e.setKey([]byte(k))
		model[k] = hx
		if tb.n != len(model) || tb.used*8 > len(tb.tags)*7 {
			t.Fatalf("op %d: n %d model %d used %d slots %d", op, tb.n, len(model), tb.used, len(tb.tags))
		}
	}
}

// TestHotTierAliasClearMerge: as TestHotTierAliasByID with the common calls: after a
// scale-in restore whose parts registered "m" (map) and "l" (list) in different orders,
// MapState.Clear and ListState.MergeNamespaces (engine writes through Store.apply) leave no
// stale clean entry.
func TestHotTierAliasClearMerge(t *testing.T) {
	m0 := func(s *Store) {
		must(NewMapState(s, MapDescriptor[string, string]{Name: "m", KeyCodec: String, ValueCodec: String}))
	}
	l0 := func(s *Store) { must(NewListState(s, ListDescriptor[string]{Name: "l", Codec: String})) }
	s := swappedRestore(t, m0, l0)
	defer s.Close()
	m := must(NewMapState(s, MapDescriptor[string, string]{Name: "m", KeyCodec: String, ValueCodec: String}))
	l := must(NewListState(s, ListDescriptor[string]{Name: "l", Codec: String}))
	var ka, kb Key // a key of each part
	for i := 0; ka.b == nil || kb.b == nil; i++ {
		k := s.Key([]byte{byte(i)})
		if k.kg <= 63 && ka.b == nil {
			ka = k
		} else if k.kg > 63 && kb.b == nil {
			kb = k
		}
	}
	var errs []string
	for _, k := range []Key{ka, kb} {
		must(0, m.Put(k, "u", "x"))
		must(0, l.Add(k.In([]byte("src")), "s"))
		must(0, l.Add(k.In([]byte("dst")), "d"))
		must(0, s.syncHot())
		must2(m.Get(k, "u"))                  // clean entry
		_ = listOf(t, l, k.In([]byte("src"))) // clean known lists
		_ = listOf(t, l, k.In([]byte("dst")))
		must(0, m.Clear(k))
		must(0, l.MergeNamespaces(k, []byte("dst"), []byte("src")))
		if x, ok, _ := m.Get(k, "u"); ok {
			errs = append(errs, fmt.Sprintf("key group %d: map entry %q after Clear", k.kg, x))
		}
		if got := listOf(t, l, k.In([]byte("dst"))); len(got) != 2 {
			errs = append(errs, fmt.Sprintf("key group %d: merge target %q, want [d s]", k.kg, got))
		}
		if got := listOf(t, l, k.In([]byte("src"))); len(got) != 0 {
			errs = append(errs, fmt.Sprintf("key group %d: merged source %q, want []", k.kg, got))
		}
	}
	if err := s.checkHot(); err != nil {
		errs = append(errs, "checkHot: "+err.Error())
	}
	if len(errs) > 0 {
		t.Fatal(strings.Join(errs, "\n"))
	}
}

// TestHotTierPointOpsDuringFailure (H4: "a point operation never fails for a
// write-back"): while write-backs fail, MapState.PutAll (a point write: opHot) and
// ListState.Get of a list with appended elements in the tier (the engine's list, then the
// entry's elements, with nothing written) go on.
func TestHotTierPointOpsDuringFailure(t *testing.T) {
	s, _, k, _ := failingWriteBack(t)
	m := must(NewMapState(s, MapDescriptor[string, string]{Name: "m", KeyCodec: String, ValueCodec: String}))
	l := must(NewListState(s, ListDescriptor[string]{Name: "l", Codec: String}))
	// Register first, then make the list entry dirty (no write-back needed for either).
	must(0, l.Add(k, "e1")) // appended in the tier: a dirty, unknown list
	var errs []string
	if err := m.PutAll(k, func(yield func(string, string) bool) { yield("u", "v") }); err != nil {
		errs = append(errs, "MapState.PutAll: "+err.Error())
	}
	if err := m.Put(k, "u2", "v"); err != nil {
		errs = append(errs, "MapState.Put: "+err.Error())
	}
	it := l.Get(k)
	var got []string
	for it.Next() {
		got = append(got, it.Value())
	}
	if err := it.Err(); err != nil {
		errs = append(errs, "ListState.Get: "+err.Error())
	}
	if len(errs) > 0 {
		t.Fatal(strings.Join(errs, "\n"))
	}
}

// The tests below came from a second reviewer's attack on H6 (TTL tables), H8 and the trim
// (2026-12-05); each failed before its mend.

// hotTTLStore opens a Store in memory on clock now with the hot tier at hot bytes (0: off).
func hotTTLStore(t *testing.T, hot int64, now *atomic.Int64) *Store {
	t.Helper()
	s, err := Open("", Options{MaxParallelism: 16, MemoryBudget: 64 << 20, HotTierSize: hot, Clock: now.Load})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Discard() })
	return s
}

func okT(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestHotTierTTLMergeCleanedUp: MergeNamespaces of a TTL state whose source, or target, cleanup
// removed below while its clean entry still held it answers as without the tier (the removed
// namespace is absent: the other keeps its own timestamp and expires).
func TestHotTierTTLMergeCleanedUp(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name          string
		first, second string // namespaces written at 1_000_000 and 1_000_500: CompactAll removes first
	}{{"source", "s", "t"}, {"target", "t", "s"}} {
		t.Run(tc.name, func(t *testing.T) {
			run := func(hot int64) (int64, bool) {
				var now atomic.Int64
				now.Store(1_000_000)
				s := hotTTLStore(t, hot, &now)
				r, err := NewReducingState(s, ReducingDescriptor[int64]{Name: "r", Codec: Int64,
					Reduce: func(a, b int64) int64 { return a + b }, TTL: &TTLConfig{TTL: time.Second}})
				okT(t, err)
				k := s.Key([]byte("k"))
				okT(t, r.Add(k.In([]byte(tc.first)), 5)) // expires 1_001_000
				okT(t, s.WaitBackground())               // a clean entry
				if _, _, err := r.Get(k.In([]byte(tc.first))); err != nil {
					t.Fatal(err)
				}
				now.Store(1_000_500)
				okT(t, r.Add(k.In([]byte(tc.second)), 7)) // expires 1_001_500
				now.Store(1_001_000)
				okT(t, s.CompactAll(ctx)) // removes first below; its clean entry stays
				okT(t, r.MergeNamespaces(k, []byte("t"), []byte("s")))
				now.Store(1_001_600) // past second's own expiry
				x, found, err := r.Get(k.In([]byte("t")))
				okT(t, err)
				return x, found
			}
			x0, f0 := run(0)
			x1, f1 := run(4 << 20)
			if x0 != x1 || f0 != f1 {
				t.Fatalf("Get of the target after MergeNamespaces: tier off (%d, %v), tier on (%d, %v)", x0, f0, x1, f1)
			}
		})
	}
}

// TestHotTierTrimHeld: after entries leave the tier (H8) the trim keeps charged what the tier
// still holds on the heap (free entries, its tables' arrays).
func TestHotTierTrimHeld(t *testing.T) {
	s, err := Open("", Options{MaxParallelism: 16, MemoryBudget: 64 << 20, HotTierSize: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Discard()
	v, err := NewValueState(s, ValueDescriptor[int64]{Name: "v", Codec: Int64})
	okT(t, err)
	pad := make([]byte, 200)
	key := func(i int) Key { return s.Key(append(append([]byte{}, pad...), byte(i), byte(i>>8), byte(i>>16))) }
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	const n = 8000
	for i := range n {
		okT(t, v.Put(key(i), int64(i)))
	}
	okT(t, s.WaitBackground())
	for i := range n {
		okT(t, v.Clear(key(i)))
	}
	okT(t, s.WaitBackground()) // deletes written back: entries leave (H8), trimmed
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	st := s.Stats().HotTier
	heap := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("tier: %d entries, %d bytes estimated, %d charged (budget PurposeHotTier %d); Go heap grew %d bytes",
		st.Entries, st.Bytes, st.Charged, s.budget.UsedBy(memory.PurposeHotTier), heap)
	if heap > 4*st.Charged {
		t.Fatalf("the tier holds %d bytes of Go heap for %d charged", heap, st.Charged)
	}
}

// TestHotTierTTLStaleGetNoWrite: a Get of a value cleanup removed below reads absent without
// writing, as without the tier, so it works while the engine refuses writes.
func TestHotTierTTLStaleGetNoWrite(t *testing.T) {
	ctx := context.Background()
	run := func(hot int64) error {
		var now atomic.Int64
		now.Store(1_000_000)
		s, err := Open("", Options{MaxParallelism: 16, MemoryBudget: 64 << 20, SegmentSize: 2 << 20,
			BackpressureTimeout: time.Millisecond, HotTierSize: hot, Clock: now.Load})
		okT(t, err)
		defer s.Discard()
		r, err := NewReducingState(s, ReducingDescriptor[int64]{Name: "r", Codec: Int64,
			Reduce: func(a, b int64) int64 { return a + b }, TTL: &TTLConfig{TTL: time.Second}})
		okT(t, err)
		fill, err := NewValueState(s, ValueDescriptor[[]byte]{Name: "fill", Codec: Bytes,
			TTL: &TTLConfig{TTL: time.Hour, Visibility: TTLReturnExpiredIfNotCleanedUp}})
		okT(t, err)
		k := s.Key([]byte("k"))
		okT(t, r.Add(k, 1))
		okT(t, s.WaitBackground())
		now.Add(2000)
		okT(t, s.CompactAll(ctx))
		defer exhaustFilling(t, s, fill)()
		_, found, err := r.Get(k)
		if found {
			t.Fatalf("found")
		}
		return err
	}
	e0, e1 := run(0), run(1<<20)
	if (e0 == nil) != (e1 == nil) {
		t.Fatalf("Get of a value CompactAll removed, engine refusing writes: tier off %v, tier on %v", e0, e1)
	}
}
