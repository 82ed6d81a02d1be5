package slice

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/strata-db/strata/internal/base"
)

// sweepKey is a composite key of state 1 (base.StateID reads bytes 2-3).
func sweepKey(i int) []byte { return fmt.Appendf([]byte{0, 0, 0, 1}, "k%d", i) }

// ttlVal is a KindValue of state 1 stamped ts.
func ttlVal(order uint64, i int, seq uint64, ts int64) base.Entry {
	return base.Entry{Order: order, Hash: order, Seq: seq, Kind: base.KindValue, Key: sweepKey(i),
		Value: base.AppendTS(nil, ts)}
}

// TestPickExpired: PickExpired proposes one job per run holding expired data (never a run
// whose data lives, a busy one, or more than max), drops what expired outright only for the
// chain's last run with nothing below (LowerHolds), leaves tombstones elsewhere, and after
// the jobs are installed proposes nothing until more data expires.
func TestPickExpired(t *testing.T) {
	for _, tc := range []struct {
		name      string
		holds     func(lo, hi uint64) bool
		lowerTier bool
		wantOld   []string // the oldest run's entries after its sweep
	}{
		{"nothing-below", func(lo, hi uint64) bool { return false }, true, nil},
		{"lower-holds", func(lo, hi uint64) bool { return true }, false, []string{"tombstone:k0", "tombstone:k1"}},
		{"no-hook-lower-tier", nil, true, []string{"tombstone:k0", "tombstone:k1"}},
		{"no-hook-alone", nil, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := int64(0)
			tab := base.NewTTLTable(func() int64 { return now }, map[uint16]base.TTLState{
				1: {TTL: 10, Layout: base.TTLValue, Compaction: true, ReclaimWithin: 20}})
			e := newEnv(t, 4096, Options{BucketBits: -1, LowerTier: tc.lowerTier, LowerHolds: tc.holds, Expiry: tab.Note,
				NewFilter: func(bottom, sweep bool) base.Filter {
					if !sweep {
						t.Error("a sweep job's filter made without sweep")
					}
					f := &base.TTLFilter{Table: tab, Bottom: bottom}
					return f.Filter
				}})
			e.install(t, ttlVal(1, 0, 1, 0), ttlVal(2, 1, 2, 0))     // oldest: expires at 10
			e.install(t, ttlVal(3, 2, 3, 100), ttlVal(4, 3, 4, 100)) // expires at 110
			e.install(t, ttlVal(5, 4, 5, 0), ttlVal(6, 5, 6, 0))     // newest: expires at 10
			if jobs := e.t.PickExpired(9, 8); len(jobs) != 0 {
				t.Fatalf("%d jobs before anything expired", len(jobs))
			}
			now = 50
			if _, dueBytes, exp := e.t.ExpiryStats(now); dueBytes == 0 || exp != 4*base.TSLen {
				t.Fatalf("ExpiryStats: %d due bytes, %d expired bytes", dueBytes, exp)
			}
			if jobs := e.t.PickExpired(now, 1); len(jobs) != 1 {
				t.Fatalf("max 1: %d jobs", len(jobs))
			} else if err := e.t.CancelCompaction(jobs[0]); err != nil {
				t.Fatal(err)
			}
			jobs := e.t.PickExpired(now, 8)
			if len(jobs) != 2 {
				t.Fatalf("%d jobs, want 2 (the runs that expired)", len(jobs))
			}
			if again := e.t.PickExpired(now, 8); len(again) != 0 {
				t.Fatalf("busy runs proposed again: %d jobs", len(again))
			}
			for _, j := range jobs {
				if !j.Sweep() || j.Runs() != 1 {
					t.Fatalf("job: sweep %v, %d runs", j.Sweep(), j.Runs())
				}
				if err := j.Run(context.Background()); err != nil {
					t.Fatal(err)
				}
				if err := e.t.InstallCompaction(j); err != nil {
					t.Fatal(err)
				}
			}
			var got [][]string
			for _, r := range e.t.buckets[0].runs {
				var es []string
				for _, s := range r.slices {
					for i := range s.count {
						var en base.Entry
						s.Entry(i, &en)
						es = append(es, en.Kind.String()+":"+string(en.Key[4:]))
					}
				}
				got = append(got, es)
			}
			want := [][]string{{"tombstone:k4", "tombstone:k5"}, {"value:k2", "value:k3"}}
			if tc.wantOld != nil {
				want = append(want, tc.wantOld)
			}
			if !slices.EqualFunc(got, want, slices.Equal) {
				t.Fatalf("chain after the sweep: %v, want %v", got, want)
			}
			if jobs := e.t.PickExpired(now, 8); len(jobs) != 0 {
				t.Fatalf("%d jobs after the sweep", len(jobs))
			}
			if n, _, _ := e.t.ExpiryStats(now); n != 0 {
				t.Fatalf("%d slices due after the sweep", n)
			}
			now = 110
			if jobs := e.t.PickExpired(now, 8); len(jobs) != 1 {
				t.Fatalf("%d jobs once the middle run expired, want 1", len(jobs))
			} else if err := e.t.CancelCompaction(jobs[0]); err != nil {
				t.Fatal(err)
			}
		})
	}
}
