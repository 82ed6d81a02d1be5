package strata

import (
	"fmt"
	"testing"

	"github.com/strata-db/strata/memory"
)

// fixedOf returns the budget's fixed costs as internal/engine/doc.go's "Fixed costs" counts
// them, from the parts Stats reports (so that the test does not take Stats.Budget.Fixed's
// word for it): the FreshTable's data and index, the caches, the reserve, and the room
// eviction keeps for the next segment (MinMemoryBudget of the segment size).
func fixedOf(st Stats) (fixed, seg int64) {
	b := st.Budget
	seg = st.Fresh.SegmentBytes / int64(max(st.Fresh.Segments, 1))
	return b.ByPurpose[memory.PurposeFreshData] + b.ByPurpose[memory.PurposeFreshIndex] +
		b.ByPurpose[memory.PurposeBlockCache] + b.Reserve + MinMemoryBudget(int(seg)), seg
}

// TestFixedCostsRule: the sizing rule of the budget's fixed costs at three budgets (issue 22;
// internal/engine/doc.go "Fixed costs"): the default segment (1/32 of the limit, 2 MiB at
// least), the transform reserve of one segment at Open, the eviction room of a segment and a
// quarter, and Stats.Budget.Fixed adding them up — within an eighth of the budget from 64 MiB
// up (at 16 MiB the 2 MiB floor makes them more). The old rule (4 MiB at least, a reserve of
// two segments at Open) had 17.5 MiB at 64 MiB.
func TestFixedCostsRule(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		budget, seg int64
		eighth      bool // fixed costs within budget/8
	}{
		{16 * mib, 2 * mib, false},
		{64 * mib, 2 * mib, true},
		{1 << 30, 32 * mib, true},
	} {
		t.Run(fmt.Sprintf("budget=%dMiB", tc.budget/mib), func(t *testing.T) {
			s, err := Open(t.TempDir(), Options{MemoryBudget: tc.budget})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			st := s.Stats()
			b := st.Budget
			fixed, seg := fixedOf(st)
			if seg != tc.seg || b.Reserve != seg || b.EvictionRoom != seg+seg/4 || b.Fixed != fixed {
				t.Fatalf("segment %d KiB (want %d), reserve %d KiB (want one segment), room %d KiB (want %d), Fixed %d KiB (parts add up to %d)",
					seg>>10, tc.seg>>10, b.Reserve>>10, b.EvictionRoom>>10, (seg+seg/4)>>10, b.Fixed>>10, fixed>>10)
			}
			if most := seg + seg/4 + seg + seg + seg/4; b.Fixed > most { // active + index ≤ seg/4, room, reserve
				t.Fatalf("fixed costs %d KiB above 7/2 segments (%d KiB)", b.Fixed>>10, most>>10)
			}
			if tc.eighth && b.Fixed > tc.budget/8 {
				t.Fatalf("fixed costs %.2f MiB above an eighth of %d MiB", float64(b.Fixed)/mib, tc.budget/mib)
			}
		})
	}
}

// TestFixedCostsSmallState: at 64 MiB, with a small state that went through several
// transforms (the reserve measured, the segment's index grown for 50-byte records), the
// fixed costs stay within an eighth of the budget and nothing is evicted (issue 22: "a state
// that fits stays in memory"). On the old sizing — 4 MiB segments, the reserve two segments
// at Open and one after — they were 13.5 MiB.
func TestFixedCostsSmallState(t *testing.T) {
	const budget = 64 << 20
	s, err := Open(t.TempDir(), Options{MemoryBudget: budget})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	v := must(NewValueState(s, ValueDescriptor[[]byte]{Name: "v", Codec: Bytes}))
	val := make([]byte, 24)
	for i := range 150_000 { // distinct keys of ~50-byte records: several segments, ~9 MiB of state
		if err := v.Put(s.Key(fmt.Appendf(nil, "key-%06d", i)), val); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.WaitBackground(); err != nil {
		t.Fatal(err)
	}
	st := s.Stats()
	fixed, seg := fixedOf(st)
	if st.Slices.Transforms < 1 || st.Slices.Evictions != 0 || st.Budget.Fixed != fixed {
		t.Fatalf("%d transforms (want one or more), %d evictions (want 0), Fixed %d (parts add up to %d)",
			st.Slices.Transforms, st.Slices.Evictions, st.Budget.Fixed, fixed)
	}
	t.Logf("%d transforms, slices %.2f MiB; fixed costs %.2f MiB: data %.2f, index %.2f, reserve %.2f, room %.2f",
		st.Slices.Transforms, float64(st.Slices.Bytes)/(1<<20), float64(fixed)/(1<<20),
		float64(st.Budget.ByPurpose[memory.PurposeFreshData])/(1<<20), float64(st.Budget.ByPurpose[memory.PurposeFreshIndex])/(1<<20),
		float64(st.Budget.Reserve)/(1<<20), float64(st.Budget.EvictionRoom)/(1<<20))
	if fixed > budget/8 {
		t.Fatalf("fixed costs %.2f MiB above an eighth of the 64 MiB budget (segment %d MiB, index %.2f MiB, reserve %.2f MiB, room %.2f MiB)",
			float64(fixed)/(1<<20), seg>>20, float64(st.Budget.ByPurpose[memory.PurposeFreshIndex])/(1<<20),
			float64(st.Budget.Reserve)/(1<<20), float64(st.Budget.EvictionRoom)/(1<<20))
	}
}
