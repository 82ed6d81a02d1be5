package strata

import (
	"fmt"
	"testing"
	"time"

	"github.com/strata-db/strata/internal/vfs"
)

// TestAllocsValueState pins 0 allocations per ValueState Get and Put (the hot path), with the
// Int64 and Bytes codecs and a reused Key, on a table that already holds the key.
func TestAllocsValueState(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own; allocations are pinned in normal builds")
	}
	s := openTest(t, Options{})
	vi := must(NewValueState(s, ValueDescriptor[int64]{Name: "i", Codec: Int64}))
	vb := must(NewValueState(s, ValueDescriptor[[]byte]{Name: "b", Codec: Bytes}))
	kb := []byte("0123456789abcdef")
	k := s.Key(kb)
	val := []byte("8 bytes!")
	must(0, vi.Put(k, 1))
	must(0, vb.Put(k, val))
	var n int64
	for name, f := range map[string]func(){
		"Int64/Put":  func() { n++; _ = vi.Put(k, n) },
		"Int64/Get":  func() { x, _, _ := vi.Get(k); n += x },
		"Bytes/Put":  func() { _ = vb.Put(k, val) },
		"Bytes/Get":  func() { x, _, _ := vb.Get(k); n += int64(len(x)) },
		"Key+Get":    func() { x, _, _ := vi.Get(s.Key(kb)); n += x },
		"Key.In+Put": func() { _ = vi.Put(s.Key(kb).In(val), n) },
		"Absent/Get": func() { _, _, _ = vi.Get(s.Key(val)) },
	} {
		if a := testing.AllocsPerRun(1000, f); a != 0 {
			t.Errorf("%s: %v allocs/op, want 0", name, a)
		}
	}
}

// TestAllocsOtherStates pins 0 allocations for list Add/Get iteration, map Get/Put and
// reducing Add once their scratch buffers have grown.
func TestAllocsOtherStates(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own; allocations are pinned in normal builds")
	}
	s := openTest(t, Options{})
	l := must(NewListState(s, ListDescriptor[int64]{Name: "l", Codec: Int64}))
	m := must(NewMapState(s, MapDescriptor[uint64, int64]{Name: "m", KeyCodec: Uint64, ValueCodec: Int64}))
	r := must(NewReducingState(s, ReducingDescriptor[int64]{Name: "r", Codec: Int64, Reduce: func(a, b int64) int64 { return a + b }}))
	k := s.Key([]byte("0123456789abcdef"))
	must(0, l.Add(k, 1))
	must(0, m.Put(k, 1, 1))
	var n int64
	for name, f := range map[string]func(){
		"List/Add": func() { _ = l.Add(k, 2) },
		"List/Get": func() {
			it := l.Get(k)
			for it.Next() {
				n += it.Value()
			}
		},
		"Map/Put":       func() { _ = m.Put(k, 1, n) },
		"Map/Get":       func() { x, _, _ := m.Get(k, 1); n += x },
		"Reducing/Add":  func() { _ = r.Add(k, 1) },
		"Reducing/Get":  func() { x, _, _ := r.Get(k); n += x },
		"Map/IsEmpty":   func() { _, _ = m.IsEmpty(k) },
		"Map/Contains":  func() { _, _ = m.Contains(k, 7) },
		"Value/Missing": func() { _, _ = m.Contains(s.Key([]byte("x")), 7) },
	} {
		f() // grow scratch buffers
		if a := testing.AllocsPerRun(200, f); a != 0 {
			t.Errorf("%s: %v allocs/op, want 0", name, a)
		}
	}
}

// TestAllocsTimers pins 0 allocations per timer registration, deletion and firing (the
// callback gets a Key over the service's buffer and the Int64 namespace decoded), once the
// key groups' regions and the buffers have grown.
func TestAllocsTimers(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own; allocations are pinned in normal builds")
	}
	s := openTest(t, Options{})
	ts := must(NewTimerService(s, TimerServiceDescriptor[int64]{Name: "t", NamespaceCodec: Int64}))
	keys := make([]Key, 64)
	for i := range keys {
		keys[i] = s.Key([]byte{byte(i), 'k', 'e', 'y', 0, 0, 0, 0})
	}
	var now, sum int64
	fire := func(x Timer[int64]) error { sum += x.Namespace + int64(len(x.Key.Bytes())); return nil }
	step := func() {
		now++
		k := keys[now%64]
		_ = ts.RegisterEventTimeTimer(k, now, now+100)
		_ = ts.RegisterProcessingTimeTimer(k, now, now+100)
		_ = ts.DeleteProcessingTimeTimer(k, now, now+100)
		_ = ts.AdvanceWatermark(now, fire)
	}
	for range 5000 {
		step()
	}
	if a := testing.AllocsPerRun(2000, step); a != 0 {
		t.Errorf("register, delete and fire: %v allocs/op, want 0", a)
	}
	if ts.NumEventTimeTimers() != 100 {
		t.Fatalf("%d pending timers", ts.NumEventTimeTimers())
	}
}

// TestAllocsTTL pins 0 allocations for the TTL hot paths (TTLOnCreateAndWrite and
// TTLOnReadAndWrite, values that have not expired, the default clock): value Get and Put, list
// Add and Get, map Get, Put and iteration, reducing and aggregating Add and Get.
func TestAllocsTTL(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own; allocations are pinned in normal builds")
	}
	s := openTest(t, Options{})
	for _, up := range []TTLUpdateType{TTLOnCreateAndWrite, TTLOnReadAndWrite} {
		cfg := &TTLConfig{TTL: time.Hour, UpdateType: up}
		p := fmt.Sprint(up)
		v := must(NewValueState(s, ValueDescriptor[[]byte]{Name: "v" + p, Codec: Bytes, TTL: cfg}))
		l := must(NewListState(s, ListDescriptor[int64]{Name: "l" + p, Codec: Int64, TTL: cfg}))
		m := must(NewMapState(s, MapDescriptor[uint64, int64]{Name: "m" + p, KeyCodec: Uint64, ValueCodec: Int64, TTL: cfg}))
		r := must(NewReducingState(s, ReducingDescriptor[int64]{Name: "r" + p, Codec: Int64, TTL: cfg, Reduce: func(a, b int64) int64 { return a + b }}))
		a := must(NewAggregatingState(s, AggregatingDescriptor[int64, avgAcc, float64]{Name: "a" + p, AccCodec: avgCodec{}, TTL: cfg,
			CreateAccumulator: func() avgAcc { return avgAcc{} },
			Add:               func(in int64, a avgAcc) avgAcc { return avgAcc{a.sum + in, a.n + 1} },
			GetResult:         func(a avgAcc) float64 { return float64(a.sum) },
			Merge:             func(a, b avgAcc) avgAcc { return avgAcc{a.sum + b.sum, a.n + b.n} }}))
		k := s.Key([]byte("0123456789abcdef"))
		val := []byte("8 bytes!")
		must(0, v.Put(k, val))
		must(0, l.Add(k, 1))
		must(0, m.Put(k, 1, 1))
		var n int64
		for name, f := range map[string]func(){
			"Value/Put": func() { _ = v.Put(k, val) },
			"Value/Get": func() { x, _, _ := v.Get(k); n += int64(len(x)) },
			"List/Add":  func() { _ = l.Add(k, 2) },
			"List/Get": func() {
				it := l.Get(k)
				for it.Next() {
					n += it.Value()
				}
			},
			"Map/Put":         func() { _ = m.Put(k, 1, n) },
			"Map/Get":         func() { x, _, _ := m.Get(k, 1); n += x },
			"Map/Contains":    func() { _, _ = m.Contains(k, 1) },
			"Map/IsEmpty":     func() { _, _ = m.IsEmpty(k) },
			"Reducing/Add":    func() { _ = r.Add(k, 1) },
			"Reducing/Get":    func() { x, _, _ := r.Get(k); n += x },
			"Aggregating/Add": func() { _ = a.Add(k, 1) },
			"Aggregating/Get": func() { x, _, _ := a.Get(k); n += int64(x) },
		} {
			if name == "List/Get" && up == TTLOnReadAndWrite {
				must(0, l.Clear(k)) // keep the list short: each Get rewrites it
				must(0, l.Add(k, 1))
			}
			f() // grow scratch buffers
			if a := testing.AllocsPerRun(200, f); a != 0 {
				t.Errorf("%v %s: %v allocs/op, want 0", up, name, a)
			}
		}
	}
}

// TestAllocsLowerTier pins 0 allocations per value Get that misses the memory tiers: served by
// the row cache (a 29 B composite key with a 100 B value, hit after the first read), and read
// from the LsmStore through the block cache (a row longer than the row cache takes), once the
// lower reader's arena has grown.
func TestAllocsLowerTier(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own; allocations are pinned in normal builds")
	}
	s := openRowCacheStore(t, vfs.NewMem(), 64<<10)
	defer s.Close()
	v := must(NewValueState(s, ValueDescriptor[[]byte]{Name: "v", Codec: Bytes}))
	ns := []byte("window01")
	hot := s.Key([]byte("0123456789abcdef")).In(ns)
	big := s.Key([]byte("fedcba9876543210")).In(ns)
	must(0, v.Put(hot, make([]byte, 100)))
	must(0, v.Put(big, make([]byte, 600)))
	pushDown(t, s)
	var n int
	before := s.Stats()
	for name, f := range map[string]func(){
		"RowCacheHit/Get": func() { x, _, _ := v.Get(hot); n += len(x) },
		"LsmStore/Get":    func() { x, _, _ := v.Get(big); n += len(x) },
	} {
		f() // the row cache takes hot; the arena grows
		if a := testing.AllocsPerRun(1000, f); a != 0 {
			t.Errorf("%s: %v allocs/op, want 0", name, a)
		}
	}
	if st := s.Stats(); st.Caches.RowHits-before.Caches.RowHits < 1000 || st.Caches.RowTooLarge-before.Caches.RowTooLarge < 1000 {
		t.Fatalf("row cache hits %d, too large %d: the reads did not take the paths pinned",
			st.Caches.RowHits-before.Caches.RowHits, st.Caches.RowTooLarge-before.Caches.RowTooLarge)
	}
}

// TestAllocsFromSlices pins 0 allocations per ValueState Get and Put when the key's data is
// in the SliceTable (sealed, transformed, installed), and for a Get of an absent key that
// falls through every tier.
func TestAllocsFromSlices(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own; allocations are pinned in normal builds")
	}
	s := openTest(t, Options{})
	vi := must(NewValueState(s, ValueDescriptor[int64]{Name: "i", Codec: Int64}))
	vb := must(NewValueState(s, ValueDescriptor[[]byte]{Name: "b", Codec: Bytes}))
	m := must(NewMapState(s, MapDescriptor[uint64, int64]{Name: "m", KeyCodec: Uint64, ValueCodec: Int64}))
	kb := []byte("0123456789abcdef")
	k, k2 := s.Key(kb), s.Key([]byte("only-in-slices"))
	must(0, vi.Put(k, 1))
	must(0, vb.Put(k2, []byte("8 bytes!")))
	must(0, m.Put(k2, 1, 1))
	must(0, s.seal())
	must(0, s.e.Drain())
	if st := s.Stats(); st.Slices.Count == 0 || st.Fresh.SealedSegments != 0 {
		t.Fatalf("data not in slices: %+v", st)
	}
	var n int64
	for name, f := range map[string]func(){
		"Int64/Get(slice)": func() { x, _, _ := vi.Get(s.Key(kb)); n += x },
		"Bytes/Get(slice)": func() { x, _, _ := vb.Get(k2); n += int64(len(x)) },
		"Map/Get(slice)":   func() { x, _, _ := m.Get(k2, 1); n += x },
		"Map/IsEmpty":      func() { _, _ = m.IsEmpty(k2) },
		"Absent/Get":       func() { _, _, _ = vi.Get(s.Key([]byte("nowhere"))) },
		"Int64/Put+Get":    func() { n++; _ = vi.Put(k, n); x, _, _ := vi.Get(k); n += x },
	} {
		f()
		if a := testing.AllocsPerRun(1000, f); a != 0 {
			t.Errorf("%s: %v allocs/op, want 0", name, a)
		}
	}
}
