package slice

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/memory"
)

// TestRunFilter: a run's filter never hides an entry its run holds (invariant 17) — every
// key of three runs reads back, through the newest run that holds it — skips most runs for
// keys no run holds, is charged to the budget while its run is in the table, and goes with
// the runs a compaction replaces (the env's cleanup checks the budget is empty after Close).
func TestRunFilter(t *testing.T) {
	e := newEnv(t, DefaultSliceSize, Options{BucketBits: -1, CompactionThreshold: 1})
	rng := rand.New(rand.NewPCG(3, 4))
	const runs, keys = 3, 3000
	want := map[uint64]string{}
	seq := uint64(0)
	for r := range runs {
		var es []base.Entry
		for i := range keys {
			o := rng.Uint64()
			if r > 0 && i%4 == 0 { // a quarter of each run overwrites an older run's key
				for k := range want {
					o = k
					break
				}
			}
			if _, dup := want[o]; dup && r == 0 {
				continue
			}
			seq++
			v := fmt.Sprintf("r%d-%d", r, i)
			es = append(es, kv(o, fmt.Sprint(o), seq, v))
		}
		// One version per key in a run: the newest (the map walk above may pick a key twice).
		seen := map[uint64]bool{}
		var one []base.Entry
		for i := len(es) - 1; i >= 0; i-- {
			if !seen[es[i].Order] {
				seen[es[i].Order] = true
				one = append(one, es[i])
				want[es[i].Order] = string(es[i].Value)
			}
		}
		e.install(t, one...)
	}
	st := e.t.Stats()
	if st.Runs != runs || st.FilterBytes <= 0 || e.budget.UsedBy(memory.PurposeSlice) < st.FilterBytes {
		t.Fatalf("runs %d, filter bytes %d, slice budget %d", st.Runs, st.FilterBytes, e.budget.UsedBy(memory.PurposeSlice))
	}
	check := func(what string) {
		t.Helper()
		for o, v := range want {
			got, status := e.t.Get(o, []byte(fmt.Sprint(o)))
			if status != Found || string(got) != v {
				t.Fatalf("%s: key %d: %q %v, want %q", what, o, got, status, v)
			}
		}
		before := e.t.Stats().FilterSkips
		const absent = 10000
		for range absent {
			o := rng.Uint64()
			if _, ok := want[o]; ok {
				continue
			}
			if _, status := e.t.Get(o, []byte(fmt.Sprint(o))); status != Absent {
				t.Fatalf("%s: absent key %d: %v", what, o, status)
			}
		}
		st := e.t.Stats()
		if skips := st.FilterSkips - before; skips < int64(st.Runs)*absent*95/100 {
			t.Fatalf("%s: %d runs skipped for %d absent keys in %d runs: the filter lets more than 5%% through", what, skips, absent, st.Runs)
		}
	}
	check("three runs")
	compactAll(t, e.t)
	if st := e.t.Stats(); st.Runs != 1 || st.FilterBytes <= 0 || st.FilterBytes > int64(len(want))*filterBitsPerKey/8+8 {
		t.Fatalf("after the compaction: %d runs, filter bytes %d for %d keys", st.Runs, st.FilterBytes, len(want))
	}
	check("compacted")
}

// checkFilters checks invariant 17 on every run of t: its filter (when it has one) holds the
// order hash of every entry its slices hold, and the table counts the filters' bytes right.
// The model test checks it with its reads.
func checkFilters(tb testing.TB, t *Table, what string) {
	tb.Helper()
	var sum int64
	for b := range t.buckets {
		for ri := range t.buckets[b].runs {
			r := &t.buckets[b].runs[ri]
			sum += int64(len(r.filter)) * 8
			for _, s := range r.slices {
				for _, o := range s.fps[:s.count] {
					if !r.filter.mayHold(o) {
						tb.Fatalf("%s: bucket %d run %d (id %d): the filter hides order %#x", what, b, ri, r.id, o)
					}
				}
			}
		}
	}
	if sum != t.filterBytes {
		tb.Fatalf("%s: the runs' filters hold %d bytes, the table counts %d", what, sum, t.filterBytes)
	}
}
