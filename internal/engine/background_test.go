package engine

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/memory"
)

// Tests of the background work through the tiers (background.go: transforms, compactions,
// backpressure) with byte keys (harness_test.go), moved from the root package (issue 26).

// TestManySegments: state written through many 16 MiB segments on a budget of eight of them
// reads back correctly through transforms and compactions — value state, list state (one
// 8-byte element per round) and map state (three user keys) —; the budget is never exceeded,
// writers that outrun the transforms wait instead of failing, and after Close the budget and
// its reserve are empty and no goroutine of the Engine is left.
func TestManySegments(t *testing.T) {
	before := runtime.NumGoroutine()
	const seg = 16 << 20
	const val, lst, mp = 1, 2, 3
	b := memory.NewBudget(8 * seg)
	h := newHarness(t, Options{Budget: b, SegmentSize: seg, Workers: 2})
	// ~100 MB written through ~10 MB of live state: the SliceTable's allocator keeps whole
	// 16 MiB segments while any of their blocks lives, and after compactions they are about a
	// third full, so the live slices need about three times their size.
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
	key := func(i int) []byte { return fmt.Appendf(nil, "key-%08d", i) }
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
			h.put(val, k, value(i, r))
			h.listAdd(lst, k, u64(uint64(r)))
			mk, hm := testKey(mp, k)
			h.apply(opMapPut(mk, hm, u64(uint64(r%3)), u64(uint64(i+r))))
			if i%1000 == 0 {
				sample()
			}
		}
	}
	check := func(when string) {
		for i := range keys {
			k := key(i)
			if v, ok := h.get(val, k); !ok || string(v) != string(value(i, rounds-1)) {
				t.Fatalf("%s: value %d = %.20q %v, want %.20q", when, i, v, ok, value(i, rounds-1))
			}
			elems := h.list(lst, k)
			for n, e := range elems {
				if binary.BigEndian.Uint64(e) != uint64(n) {
					t.Fatalf("%s: list %d element %d = %d", when, i, n, binary.BigEndian.Uint64(e))
				}
			}
			if len(elems) != rounds {
				t.Fatalf("%s: list %d has %d elements, want %d", when, i, len(elems), rounds)
			}
			mk, hm := testKey(mp, k)
			got := map[uint64]uint64{}
			it := h.e.MapIter(hm, mk)
			for it.Next() {
				got[binary.BigEndian.Uint64(it.UserKey())] = binary.BigEndian.Uint64(it.Value())
			}
			if err := it.Err(); err != nil {
				t.Fatal(err)
			}
			it.Close()
			for uk := range uint64(min(rounds, 3)) {
				last := -1
				for r := range rounds {
					if uint64(r%3) == uk {
						last = r
					}
				}
				want := uint64(i + last)
				if got[uk] != want {
					t.Fatalf("%s: map %d = %v, want [%d]=%d", when, i, got, uk, want)
				}
				if v, st := h.e.MapGet(hm, mk, base.HashUserKey(u64(uk)), u64(uk)); st != found || binary.BigEndian.Uint64(v) != want {
					t.Fatalf("%s: map %d MapGet(%d) = %x %v", when, i, uk, v, st)
				}
			}
			if len(got) != min(rounds, 3) {
				t.Fatalf("%s: map %d = %v", when, i, got)
			}
		}
	}
	check("after writes")
	if err := h.e.Drain(); err != nil {
		t.Fatal(err)
	}
	sample()
	check("after drain")
	st := h.e.Stats()
	t.Logf("stats %+v, peak budget use %d MiB of %d MiB", st, peak>>20, b.Limit()>>20)
	if st.Transforms < 3 || st.Compactions == 0 || st.SealedSegments != 0 || st.Slices == 0 {
		t.Errorf("transforms %d, compactions %d, sealed %d, slices %d: the tiers did not move the data",
			st.Transforms, st.Compactions, st.SealedSegments, st.Slices)
	}
	h.close()
	if u := b.Used(); u != 0 {
		t.Errorf("budget used after Close: %d", u)
	}
	if r := b.Reserve(); r != 0 {
		t.Errorf("reserve left after Close: %d", r)
	}
	checkGoroutines(t, before)
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
// compactions wait for them instead of failing, and everything reads back. Each round
// rewrites every key with a longer value, so nothing is rewritten in place and six segments'
// worth of versions pass through a state of 5 MB.
func TestBackpressure(t *testing.T) {
	const seg = 16 << 20
	const val = 1
	h := newHarness(t, Options{Budget: memory.NewBudget(6 * seg), SegmentSize: seg, Workers: 1})
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
			k, hh := testKey(val, fmt.Appendf(nil, "k%d", i))
			if err := h.e.Apply(opPut(k, hh, v)); err != nil {
				t.Fatalf("round %d put %d: %v (stats %+v)", r, i, err, h.e.Stats())
			}
		}
	}
	for i := range keys {
		v, ok := h.get(val, fmt.Appendf(nil, "k%d", i))
		if !ok || len(v) != size(rounds-1) || v[0] != byte(i) || v[1] != byte(i>>8) || v[2] != byte(rounds-1) {
			t.Fatalf("key %d: %d bytes %v", i, len(v), ok)
		}
	}
	st := h.e.Stats()
	t.Logf("stats %+v", st)
	if st.Transforms < 3 {
		t.Errorf("%d transforms, want several: %+v", st.Transforms, st)
	}
}
