package slice

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/strata-db/strata/memory"
)

func testAllocator(tb testing.TB, limit int64, perSeg int) (*Allocator, *memory.Budget) {
	tb.Helper()
	b := memory.NewBudget(limit)
	p, err := memory.NewPool(b, memory.SegmentSize16M)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = p.Close() })
	return newAllocator(p, MinSliceSize, perSeg), b
}

// checkAlloc compares the allocator's bookkeeping with the blocks held.
func checkAlloc(t *testing.T, a *Allocator, held map[blockRef]bool) {
	t.Helper()
	use := map[*aseg]int32{}
	for ref := range held {
		use[ref.seg]++
	}
	st := a.Stats()
	segs := len(use)
	for _, d := range a.draining {
		if use[d] == 0 {
			segs++ // a draining segment stays held while empty
		}
	}
	if st.Blocks != len(held) || st.Segments != segs || st.FreeBlocks != segs*a.BlocksPerSegment()-len(held) {
		t.Fatalf("stats %+v; held %d blocks in %d segments", st, len(held), segs)
	}
	listedFree := 0
	for g, u := range use {
		if g.used != u || int(g.used)+len(g.free) != a.BlocksPerSegment() {
			t.Fatalf("segment %d: used %d, free %d, held %d", g.id, g.used, len(g.free), u)
		}
		if want := g.drain == 0 && u < a.perSeg; g.listed != want {
			t.Fatalf("segment %d (used %d, drain %d): listed %v", g.id, u, g.drain, g.listed)
		}
		if g.listed {
			listedFree += len(g.free)
		}
	}
	if a.lv.free != listedFree {
		t.Fatalf("levels count %d free blocks, listed segments hold %d", a.lv.free, listedFree)
	}
}

// TestAllocatorFullestFirst: every block comes from the most used segment
// that has a free block and is not draining (draining ones only when no
// other has one; a new segment only when none has one), checked against
// a brute-force scan after random allocations, frees and drains.
func TestAllocatorFullestFirst(t *testing.T) {
	for _, perSeg := range []int{1, 3, 8, 64, 130} {
		a, budget := testAllocator(t, 1<<34, perSeg)
		r := rand.New(rand.NewPCG(uint64(perSeg), 1))
		held := map[blockRef]bool{}
		var refs []blockRef
		var drains []*aseg
		for step := 0; step < 4000; step++ {
			switch op := r.IntN(10); {
			case op < 5 && len(refs) < 200:
				// The candidates, by brute force.
				best, bestDrain := int32(-1), int32(-1)
				cands := append([]*aseg(nil), drains...)
				for ref := range held {
					cands = append(cands, ref.seg)
				}
				for _, g := range cands {
					if len(g.free) == 0 {
						continue
					}
					if g.drain == 0 {
						best = max(best, g.used)
					} else {
						bestDrain = max(bestDrain, g.used)
					}
				}
				before := a.Stats().Segments
				mem, ref, err := a.alloc(100)
				if err != nil {
					t.Fatal(err)
				}
				if len(mem) != MinSliceSize {
					t.Fatalf("block of %d bytes", len(mem))
				}
				got := ref.seg.used - 1
				switch {
				case best >= 0 && (ref.seg.drain != 0 || got != best):
					t.Fatalf("step %d: block from a segment with %d in use (drain %d), fullest had %d", step, got, ref.seg.drain, best)
				case best < 0 && bestDrain >= 0 && ref.seg.drain == 0:
					t.Fatalf("step %d: a new segment while a draining one had a free block", step)
				case best < 0 && bestDrain < 0 && a.Stats().Segments != before+1:
					t.Fatalf("step %d: no free block, yet no new segment", step)
				}
				if held[ref] {
					t.Fatalf("block %v handed out twice", ref)
				}
				held[ref] = true
				refs = append(refs, ref)
			case op < 9 && len(refs) > 0:
				i := r.IntN(len(refs))
				ref := refs[i]
				refs[i] = refs[len(refs)-1]
				refs = refs[:len(refs)-1]
				delete(held, ref)
				a.release(ref)
			case op == 9 && len(refs) > 0 && r.IntN(2) == 0:
				g := refs[r.IntN(len(refs))].seg
				a.startDrain(g)
				drains = append(drains, g)
				// allocMove never fills a draining segment.
				if mem, ref, ok := a.allocMove(g); ok {
					if ref.seg.drain != 0 || ref.seg.used-1 < g.used {
						t.Fatal("allocMove handed out a block of a draining or sparser segment")
					}
					_ = mem
					held[ref] = true
					refs = append(refs, ref)
				} else if f := a.lv.fullest(); f != nil && f.used >= g.used {
					t.Fatal("allocMove found no block, yet a listed segment as used has one")
				}
			case op == 9 && len(drains) > 0:
				i := r.IntN(len(drains))
				a.endDrain(drains[i])
				drains = append(drains[:i], drains[i+1:]...)
			}
			checkAlloc(t, a, held)
		}
		for _, g := range drains {
			a.endDrain(g)
		}
		for _, ref := range refs {
			a.release(ref)
		}
		if st := a.Stats(); st.Segments != 0 || st.Blocks != 0 || st.Draining != 0 || a.lv.free != 0 {
			t.Fatalf("perSeg %d: after freeing everything %+v", perSeg, st)
		}
		if budget.UsedBy(memory.PurposeSlice) > 2<<24 {
			t.Fatalf("the pool keeps %d bytes", budget.UsedBy(memory.PurposeSlice))
		}
	}
}

// TestAllocatorDrainUnderBudget: with the budget exhausted, a build still
// gets a draining segment's free block instead of failing, and allocMove
// never maps memory.
func TestAllocatorDrainUnderBudget(t *testing.T) {
	a, _ := testAllocator(t, memory.SegmentSize16M, 4)
	var refs []blockRef
	for range 3 {
		_, ref, err := a.alloc(10)
		if err != nil {
			t.Fatal(err)
		}
		refs = append(refs, ref)
	}
	a.startDrain(refs[0].seg)
	if _, _, ok := a.allocMove(refs[0].seg); ok {
		t.Fatal("allocMove returned a block of the only (draining) segment")
	}
	_, ref, err := a.alloc(10)
	if err != nil || ref.seg != refs[0].seg {
		t.Fatalf("alloc under a full budget: %v, %v", ref, err)
	}
	refs = append(refs, ref)
	if _, _, err := a.alloc(10); !errors.Is(err, memory.ErrMemoryBudget) {
		t.Fatalf("alloc past the budget: %v", err)
	}
	for _, ref := range refs {
		a.release(ref)
	}
	if st := a.Stats(); st.Segments != 1 || st.Draining != 1 {
		t.Fatalf("a draining segment left before its drain ended: %+v", st)
	}
	a.endDrain(refs[0].seg)
	if st := a.Stats(); st.Segments != 0 || st.Draining != 0 {
		t.Fatalf("an empty segment stayed after its drain ended: %+v", st)
	}
}

// BenchmarkAlloc: one block allocated and one freed with many segments
// held (the per-block cost must not grow with them).
func BenchmarkAlloc(b *testing.B) {
	for _, segs := range []int{4, 64, 512} {
		b.Run(map[int]string{4: "segments=4", 64: "segments=64", 512: "segments=512"}[segs], func(b *testing.B) {
			a, _ := testAllocator(b, 1<<40, 16)
			r := rand.New(rand.NewPCG(1, 1))
			var refs []blockRef
			for range segs * 16 {
				_, ref, err := a.alloc(10)
				if err != nil {
					b.Fatal(err)
				}
				refs = append(refs, ref)
			}
			// Free a quarter at random: partly used segments everywhere.
			for range len(refs) / 4 {
				i := r.IntN(len(refs))
				a.release(refs[i])
				refs[i] = refs[len(refs)-1]
				refs = refs[:len(refs)-1]
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				_, ref, err := a.alloc(10)
				if err != nil {
					b.Fatal(err)
				}
				j := i % len(refs)
				a.release(refs[j])
				refs[j] = ref
			}
			for _, ref := range refs {
				a.release(ref)
			}
		})
	}
}
