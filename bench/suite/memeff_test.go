package suite

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/strata-db/strata"
)

// Memory efficiency: the memory budget a Strata store on disk needs to keep a state all in
// memory, as a multiple of the state's raw size (issue 14, "Performance at equal memory").
//
//	BenchmarkMemoryEfficiency/state=value/keys=1M/impl=strata
//	BenchmarkMemoryEfficiency/state=list/keys=1M/impl=strata
//	BenchmarkMemoryEfficiency/state=map/keys=200K/impl=strata
//
// Map state has 200 K keys (2 M entries, 39 MiB) rather than 1 M: it needs about three times
// its size (each 18 B entry has its own slice index entry, framing and sequence number, 40 B in
// all), and a search over budgets of GiBs with 10 M entries per probe would take most of the
// suite's time. -memeffkeys sets every row's.
//
// The states, one record per key, each key 16 B with an 8 B namespace:
//
//   - value: a 100 B value                                        N = 16 + 8 + 100      = 124 B/key
//   - list: 10 elements of 10 B, added with one AddAll            N = 16 + 8 + 10 × 10  = 124 B/key
//   - map: 10 entries of an 8 B user key and a 10 B value, PutAll N = 16 + 8 + 10 × 18  = 204 B/key
//
// N (state bytes) is keys × that: what the user wrote, without framing or the key group.
// A budget keeps the state in memory when, after loading every key and Store.WaitBackground,
// nothing went to the LsmStore: no eviction, no flush, no table file (Stats Slices.Evictions,
// LSM.Flushes, LSM.Files all 0) and no write failed. The leaf searches the smallest such budget in
// whole MiB by bisection (from 2 N, doubled until it fits, at most 32 N), a new Store in a new directory for every probe,
// with every other option at its default, and reports it as budget/state (target ≤ 1.5,
// cmd/results), with budget-MiB and state-MiB. A leaf is one search whatever b.N (ns/op is the
// search's time, not a figure). Where the budget goes at the smallest budget is logged from
// Stats. Whether a budget near the smallest fits depends a little on how far the
// background transforms trail the writer (sealed segments waiting for them hold memory), so
// repeats (-count) differ by a few MiB.
var flagMemEffKeys = flag.Int("memeffkeys", 0, "keys of the MemoryEfficiency rows (0: 1M, 200K for map state)")

func BenchmarkMemoryEfficiency(b *testing.B) {
	for _, kind := range []string{"value", "list", "map"} {
		keys := *flagMemEffKeys
		if keys == 0 {
			keys = 1_000_000
			if kind == "map" {
				keys = 200_000
			}
		}
		b.Run(fmt.Sprintf("state=%s/keys=%s/impl=strata", kind, countName(keys)), func(b *testing.B) {
			b.ReportAllocs()
			var budget, state int64
			for range b.N {
				budget, state = MinStrataBudget(b, kind, keys)
			}
			b.ReportMetric(float64(budget)/float64(state), "budget/state")
			b.ReportMetric(float64(budget)/(1<<20), "budget-MiB")
			b.ReportMetric(float64(state)/(1<<20), "state-MiB")
		})
	}
}

// countName spells a key count as the suite's names do (1M, 500K, 1234).
func countName(n int) string {
	switch {
	case n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n%1000 == 0:
		return fmt.Sprintf("%dK", n/1000)
	}
	return fmt.Sprint(n)
}

// MinStrataBudget returns the smallest budget in whole MiB that keeps keys keys of state kind
// ("value", "list", "map") in memory (see BenchmarkMemoryEfficiency), and the state's bytes.
func MinStrataBudget(tb testing.TB, kind string, keys int) (budget, state int64) {
	per := map[string]int64{"value": 124, "list": 124, "map": 204}[kind]
	state = per * int64(keys)
	lo, hi := state>>20, 2*state>>20 // lo fails (the state alone); hi doubles until it fits
	var st strata.Stats              // of the probe at hi
	for {
		ok, s := fitsStrata(tb, kind, keys, hi<<20)
		if ok {
			st = s
			break
		}
		if lo, hi = hi, 2*hi; hi > 32*state>>20 {
			tb.Fatalf("%s: %d keys do not fit %d MiB", kind, keys, lo)
		}
	}
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if ok, s := fitsStrata(tb, kind, keys, mid<<20); ok {
			hi, st = mid, s
		} else {
			lo = mid
		}
	}
	tb.Logf("%s, %d keys, %.1f MiB of state: fits %d MiB (%.2f×); there: segments %d (%d MiB; data %.1f MiB), index %.1f MiB, slices %d (%.1f MiB), block cache %.1f MiB, row cache %.1f MiB, reserve %.1f MiB, used %.1f MiB",
		kind, keys, float64(state)/(1<<20), hi, float64(hi<<20)/float64(state),
		st.Fresh.Segments, st.Fresh.SegmentBytes>>20, mib(st.Fresh.DataBytes), mib(st.Fresh.IndexBytes), st.Slices.Count, mib(st.Slices.Bytes),
		mib(st.Caches.BlockBytes), mib(st.Caches.RowBytes), mib(st.Budget.Reserve), mib(st.Budget.Used))
	return hi << 20, state
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// fitsStrata loads the state into a new Store of the given budget and reports whether all of
// it stayed in memory, with the Store's statistics after loading.
func fitsStrata(tb testing.TB, kind string, keys int, budget int64) (bool, strata.Stats) {
	dir, err := os.MkdirTemp("", "strata-memeff-")
	if err != nil {
		tb.Fatal(err)
	}
	defer os.RemoveAll(dir)
	s, err := strata.Open(dir, strata.Options{MemoryBudget: budget})
	if err != nil {
		if errors.Is(err, strata.ErrInvalidOptions) || errors.Is(err, strata.ErrMemoryBudget) {
			return false, strata.Stats{}
		}
		tb.Fatal(err)
	}
	defer s.Discard()
	err = loadMemEff(s, kind, keys)
	if err == nil {
		err = s.WaitBackground()
	}
	st := s.Stats()
	if err != nil && !errors.Is(err, strata.ErrMemoryBudget) {
		tb.Fatal(err)
	}
	if testing.Verbose() && err != nil {
		tb.Logf("%s at %d MiB: %v", kind, budget>>20, err)
	}
	return err == nil && st.Slices.Evictions == 0 && st.LSM.Flushes == 0 && st.LSM.Files == 0, st
}

// loadMemEff writes keys keys of state kind (see BenchmarkMemoryEfficiency) into s.
func loadMemEff(s *strata.Store, kind string, keys int) error {
	var kb [16]byte
	ns := []byte("window-1") // 8 B
	val := make([]byte, 100)
	for i := range val {
		val[i] = byte(i)
	}
	var elems [10][]byte
	for i := range elems {
		elems[i] = val[10*i : 10*i+10]
	}
	var uks [10]uint64
	for i := range uks {
		uks[i] = uint64(i) * 0x9e3779b97f4a7c15
	}
	var put func(k strata.Key) error
	switch kind {
	case "value":
		v, err := strata.NewValueState(s, strata.ValueDescriptor[[]byte]{Name: "v", Codec: strata.Bytes})
		if err != nil {
			return err
		}
		put = func(k strata.Key) error { return v.Put(k, val) }
	case "list":
		l, err := strata.NewListState(s, strata.ListDescriptor[[]byte]{Name: "l", Codec: strata.Bytes})
		if err != nil {
			return err
		}
		put = func(k strata.Key) error { return l.AddAll(k, elems[:]) }
	case "map":
		m, err := strata.NewMapState(s, strata.MapDescriptor[uint64, []byte]{Name: "m", KeyCodec: strata.Uint64, ValueCodec: strata.Bytes})
		if err != nil {
			return err
		}
		put = func(k strata.Key) error {
			return m.PutAll(k, func(yield func(uint64, []byte) bool) {
				for i, uk := range uks {
					if !yield(uk, elems[i]) {
						return
					}
				}
			})
		}
	default:
		return fmt.Errorf("unknown state kind %q", kind)
	}
	for i := range keys {
		binary.BigEndian.PutUint64(kb[:8], uint64(i)*0x9e3779b97f4a7c15)
		binary.BigEndian.PutUint64(kb[8:], uint64(i))
		if err := put(s.Key(kb[:]).In(ns)); err != nil {
			return err
		}
	}
	return nil
}
