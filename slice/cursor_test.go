package slice

import (
	"fmt"
	"testing"

	"github.com/strata-db/strata/internal/base"
)

// TestCursor: a Cursor from any order hash yields exactly the entries of a Snapshot's
// iteration (every version, entry order) from that order hash on, across buckets and chains
// of several runs, after compactions; a Reset after the table changed reads the new chains.
func TestCursor(t *testing.T) {
	e := newEnv(t, MinSliceSize, Options{BucketBits: 3, CompactionThreshold: 3})
	w := newSnapWorkload(t, e, 7)
	var c Cursor
	c.Reset(e.t, 0)
	if c.Next() {
		t.Fatal("a Cursor over an empty table yields an entry")
	}
	for round := range 6 {
		for range 4 {
			w.install(300)
		}
		if round%2 == 1 {
			w.compact()
		}
		snap := e.t.Snapshot()
		var all []string
		var orders []uint64
		it := snap.Iter()
		for it.Next() {
			x := it.Entry()
			all = append(all, fmt.Sprintf("%x/%s/%s/%d", x.Order, x.Key, x.UserKey, x.Seq))
			orders = append(orders, x.Order)
		}
		e.t.ReleaseSnapshot(snap)
		starts := []uint64{0, 1, orders[0], orders[len(orders)/2], orders[len(orders)/2] + 1, orders[len(orders)-1], ^uint64(0)}
		for range 20 {
			starts = append(starts, w.r.Uint64())
		}
		for _, lo := range starts {
			i := 0
			for i < len(orders) && orders[i] < lo {
				i++
			}
			c.Reset(e.t, lo)
			var got []string
			var prev base.Entry
			for c.Next() {
				x := c.Entry()
				if len(got) > 0 && base.Compare(&prev, x) >= 0 {
					t.Fatalf("round %d from %x: out of entry order at %d", round, lo, len(got))
				}
				prev = base.Entry{Order: x.Order, Key: append([]byte(nil), x.Key...), UserKey: append([]byte(nil), x.UserKey...), Seq: x.Seq}
				got = append(got, fmt.Sprintf("%x/%s/%s/%d", x.Order, x.Key, x.UserKey, x.Seq))
			}
			want := all[i:]
			if len(got) != len(want) {
				t.Fatalf("round %d from %x: %d entries, want %d", round, lo, len(got), len(want))
			}
			for j := range got {
				if got[j] != want[j] {
					t.Fatalf("round %d from %x: entry %d = %s, want %s", round, lo, j, got[j], want[j])
				}
			}
		}
	}
}
