package main

import (
	"testing"

	"github.com/strata-db/strata"
)

// TestFixedCostsAtDefaultBudget: at the demo's default 64 MiB the Store's fixed costs
// (Stats.Budget.Fixed: its FreshTable segment with its index, the transform reserve and the
// room eviction keeps for the next segment) stay within an eighth of the budget (issue 22),
// so that the job's state stays in memory. With 16 MiB segments they took 54 of the 64 MiB,
// and the job's state went to the LsmStore: 328 evictions, write amplification 15.6; with
// 4 MiB segments and a reserve of two segments, 17.5 MiB.
func TestFixedCostsAtDefaultBudget(t *testing.T) {
	c := config{budget: 64 << 20, clock: &eventClock{}}
	s, err := strata.Open(t.TempDir(), storeOptions(c, nil, nil, strata.NoClaim))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b := s.Stats().Budget
	if b.Fixed > c.budget/8 || b.Fixed < b.Reserve+b.EvictionRoom {
		t.Fatalf("fixed costs %d KiB of a %d MiB budget (reserve %d KiB, room for the next segment %d KiB, used %d KiB)",
			b.Fixed>>10, c.budget>>20, b.Reserve>>10, b.EvictionRoom>>10, b.Used>>10)
	}
}
