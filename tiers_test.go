package strata

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestManySegments: state written through many 16 MiB segments on a budget of eight of them
// reads back correctly through transforms and compactions; the budget is never exceeded (and
// the writers' part stays below the reserve), writers that outrun the transforms wait instead
// of failing, and after Close no goroutine of the Store is left.
func TestManySegments(t *testing.T) {
	base := runtime.NumGoroutine()
	const seg = 16 << 20
	s, err := Open("", Options{MemoryBudget: 8 * seg, SegmentSize: seg, BackgroundWorkers: 2})
	if err != nil {
		t.Fatal(err)
	}
	val := must(NewValueState(s, ValueDescriptor[[]byte]{Name: "v", Codec: Bytes}))
	lst := must(NewListState(s, ListDescriptor[int64]{Name: "l", Codec: Int64}))
	mp := must(NewMapState(s, MapDescriptor[int64, int64]{Name: "m", KeyCodec: Int64, ValueCodec: Int64}))
	// ~100 MB written through ~10 MB of live state: the SliceTable's allocator keeps whole
	// 16 MiB segments while any of their blocks lives, and after compactions they are about a
	// third full, so the live slices need about three times their size (see the report).
	keys, rounds := 15000, 12
	if testing.Short() {
		keys, rounds = 15000, 8
	}
	payload := make([]byte, 500)
	value := func(i, r int) []byte {
		clear(payload)
		b := fmt.Appendf(payload[:0], "%d/%d/", i, r)
		return b[:cap(b)][:300+15*r+i%20] // longer each round: never rewritten in place
	}
	key := func(i int) Key { return s.Key(fmt.Appendf(nil, "key-%08d", i)) }
	b := s.Budget()
	var peak int64
	sample := func() {
		st := b.Stats()
		if st.Used > st.Limit {
			t.Fatalf("budget exceeded: %d > %d", st.Used, st.Limit)
		}
		peak = max(peak, st.Used)
	}
	for r := range rounds {
		for i := range keys {
			k := key(i)
			if err := val.Put(k, value(i, r)); err != nil {
				t.Fatalf("round %d key %d: value put: %v (stats %+v, budget %+v)", r, i, err, s.Stats(), s.Budget().Stats())
			}
			if err := lst.Add(k, int64(r)); err != nil {
				t.Fatalf("round %d key %d: list add: %v", r, i, err)
			}
			if err := mp.Put(k, int64(r%3), int64(i+r)); err != nil {
				t.Fatalf("round %d key %d: map put: %v", r, i, err)
			}
			if i%1000 == 0 {
				sample()
			}
		}
	}
	check := func(when string) {
		for i := range keys {
			k := key(i)
			v, ok, err := val.Get(k)
			if want := value(i, rounds-1); !ok || err != nil || string(v) != string(want) {
				t.Fatalf("%s: value %d = %.20q %v %v, want %.20q", when, i, v, ok, err, want)
			}
			it := lst.Get(k)
			n := 0
			for it.Next() {
				if it.Value() != int64(n) {
					t.Fatalf("%s: list %d element %d = %d", when, i, n, it.Value())
				}
				n++
			}
			if it.Err() != nil || n != rounds {
				t.Fatalf("%s: list %d has %d elements (%v), want %d", when, i, n, it.Err(), rounds)
			}
			got := map[int64]int64{}
			seq, errf := mp.Entries(k)
			for uk, uv := range seq {
				got[uk] = uv
			}
			if err := errf(); err != nil {
				t.Fatal(err)
			}
			for uk := range int64(min(rounds, 3)) {
				last := int64(-1)
				for r := range rounds {
					if int64(r%3) == uk {
						last = int64(r)
					}
				}
				if got[uk] != int64(i)+last {
					t.Fatalf("%s: map %d = %v, want [%d]=%d", when, i, got, uk, int64(i)+last)
				}
				if v, ok, _ := mp.Get(k, uk); !ok || v != int64(i)+last {
					t.Fatalf("%s: map %d Get(%d) = %d %v", when, i, uk, v, ok)
				}
			}
			if len(got) != min(rounds, 3) {
				t.Fatalf("%s: map %d = %v", when, i, got)
			}
		}
	}
	check("after writes")
	if err := s.e.Drain(); err != nil {
		t.Fatal(err)
	}
	sample()
	check("after drain")
	st := s.Stats()
	t.Logf("stats %+v, peak budget use %d MiB of %d MiB", st, peak>>20, st.Budget.Limit>>20)
	if st.Slices.Transforms < 3 || st.Slices.Compactions == 0 || st.Fresh.SealedSegments != 0 || st.Slices.Count == 0 {
		t.Errorf("transforms %d, compactions %d, sealed %d, slices %d: the tiers did not move the data",
			st.Slices.Transforms, st.Slices.Compactions, st.Fresh.SealedSegments, st.Slices.Count)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if u := b.Used(); u != 0 {
		t.Errorf("budget used after Close: %d", u)
	}
	if r := b.Reserve(); r != 0 {
		t.Errorf("reserve left after Close: %d", r)
	}
	checkGoroutines(t, base)
}

// checkGoroutines fails when more goroutines run than base, after letting exiting ones finish,
// and prints the stacks of the extra ones.
func checkGoroutines(t *testing.T, base int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > base && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > base {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		var ours []string
		for _, g := range strings.Split(string(buf), "\n\n") {
			if strings.Contains(g, "strata-db/strata") {
				ours = append(ours, g)
			}
		}
		t.Fatalf("%d goroutines after Close, %d before:\n%s", n, base, strings.Join(ours, "\n\n"))
	}
}

// TestBackpressure: on a budget of six segments, writers that outrun the transforms and
// compactions wait for them (counted) instead of failing, and everything reads back. Each
// round rewrites every key with a longer value, so nothing is rewritten in place and six
// segments' worth of versions pass through a state of 5 MB.
func TestBackpressure(t *testing.T) {
	const seg = 16 << 20
	s := openTest(t, Options{MemoryBudget: 6 * seg, SegmentSize: seg, BackgroundWorkers: 1})
	val := must(NewValueState(s, ValueDescriptor[[]byte]{Name: "v", Codec: Bytes}))
	const keys = 2000
	// 28 rounds push about 101 MB of versions (six segments) through: fewer would not
	// force the transforms the test asserts, so -short keeps them (56K puts, cheap even
	// under qemu).
	const rounds = 28
	buf := make([]byte, 4000)
	size := func(r int) int { return 1000 + 60*r }
	for r := range rounds {
		for i := range keys {
			v := buf[:size(r)]
			v[0], v[1], v[2] = byte(i), byte(i>>8), byte(r)
			if err := val.Put(s.Key(fmt.Appendf(nil, "k%d", i)), v); err != nil {
				t.Fatalf("round %d put %d: %v (stats %+v)", r, i, err, s.Stats())
			}
		}
	}
	for i := range keys {
		v, ok, err := val.Get(s.Key(fmt.Appendf(nil, "k%d", i)))
		if !ok || err != nil || len(v) != size(rounds-1) || v[0] != byte(i) || v[1] != byte(i>>8) || v[2] != byte(rounds-1) {
			t.Fatalf("key %d: %d bytes %v %v", i, len(v), ok, err)
		}
	}
	st := s.Stats()
	t.Logf("stats %+v", st)
	if st.Slices.Transforms < 3 {
		t.Errorf("%d transforms, want several: %+v", st.Slices.Transforms, st)
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
