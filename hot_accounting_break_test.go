package strata

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/strata-db/strata/memory"
)

func hotBudgetAgrees(s *Store) error {
	if err := s.checkHot(); err != nil {
		return err
	}
	if u := s.budget.UsedBy(memory.PurposeHotTier); u != s.hot.charged {
		return fmt.Errorf("budget holds %d for the tier, charged %d", u, s.hot.charged)
	}
	return nil
}

// stress: random ops over every kind with small bounds; checkHot after each.
func TestHotAcctXStress(t *testing.T) {
	for _, limit := range []int64{4096, 8256, 10 << 10, 20 << 10, 40 << 10, 100 << 10, 300 << 10} {
		t.Run(fmt.Sprint(limit), func(t *testing.T) {
			s := hotStore(t, limit, false)
			v, _ := NewValueState(s, ValueDescriptor[[]byte]{Name: "v", Codec: Bytes})
			r, _ := NewReducingState(s, ReducingDescriptor[int64]{Name: "r", Codec: Int64, Reduce: func(a, b int64) int64 { return a + b }})
			l, _ := NewListState(s, ListDescriptor[string]{Name: "l", Codec: String})
			m, _ := NewMapState(s, MapDescriptor[string, []byte]{Name: "m", KeyCodec: String, ValueCodec: Bytes})
			rng := rand.New(rand.NewPCG(1, uint64(limit)))
			key := func() []byte {
				i := rng.IntN(600)
				if rng.IntN(4) == 0 {
					return []byte(fmt.Sprint(strings.Repeat("L", 45), i))
				}
				return []byte(fmt.Sprint("k", i))
			}
			val := func() []byte { return make([]byte, []int{0, 3, 30, 60, 200, 3000}[rng.IntN(6)]) }
			for op := range 20000 {
				k := s.Key(key())
				var err error
				switch rng.IntN(14) {
				case 0, 1:
					err = v.Put(k, val())
				case 2:
					_, _, err = v.Get(k)
				case 3:
					err = v.Clear(k)
				case 4:
					err = r.Add(k, 1)
				case 5:
					_, _, err = r.Get(k)
				case 6:
					err = l.Add(k, string(val()))
				case 7:
					it := l.Get(k)
					for it.Next() {
					}
					err = it.Err()
				case 8:
					err = l.Update(k, []string{string(val())})
				case 9:
					err = m.Put(k, fmt.Sprint(rng.IntN(5)), val())
				case 10:
					_, _, err = m.Get(k, fmt.Sprint(rng.IntN(5)))
				case 11:
					err = m.Remove(k, fmt.Sprint(rng.IntN(5)))
				case 12:
					if rng.IntN(20) == 0 {
						err = s.WaitBackground()
					}
				case 13:
					if rng.IntN(50) == 0 {
						s.hotDropClean()
					}
				}
				if err != nil {
					t.Fatalf("op %d: %v", op, err)
				}
				if err := hotBudgetAgrees(s); err != nil {
					t.Fatalf("op %d: %v", op, err)
				}
			}
			t.Logf("%+v", s.Stats().HotTier)
			okT(t, s.Close())
			if u := s.budget.UsedBy(memory.PurposeHotTier); u != 0 || s.hot.charged != 0 {
				t.Fatalf("after Close: budget %d charged %d", u, s.hot.charged)
			}
		})
	}
}

// TestHotAcctArrayAlignment: the layout claim hotEntry's comment makes — a table's entry
// array of 256 slots or more is a large object, which starts on a page, so every entry's first
// cache line holds all a hit reads. (Smaller arrays get Go's malloc header in front and do
// not; the comment says so.)
func TestHotAcctArrayAlignment(t *testing.T) {
	var tb hotTable
	for _, size := range []int{256, 320, 1024} {
		tb.rehash(size)
		if p := uintptr(unsafe.Pointer(&tb.ents[0])); p%64 != 0 {
			t.Errorf("a %d-slot array (%d B) starts at %d mod 64", size, size*128, p%64)
		}
	}
}

// TestHotAcctBreakTinyTierDrops: a tier too small for a table's first array (64 slots, 8256
// B) never caches, and never fails a call; but each write then "drops every entry" of a tier
// that holds none (hotRoom falls through to hotDropAll), counted in HotTierStats.Drops.
func TestHotAcctBreakTinyTierDrops(t *testing.T) {
	s := hotStore(t, 4<<10, false)
	v, _ := NewValueState(s, ValueDescriptor[int64]{Name: "v", Codec: Int64})
	for i := range 100 {
		okT(t, v.Put(s.Key([]byte(fmt.Sprint("k", i))), int64(i)))
		x, ok, err := v.Get(s.Key([]byte(fmt.Sprint("k", i))))
		if err != nil || !ok || x != int64(i) {
			t.Fatal(x, ok, err)
		}
	}
	okT(t, hotBudgetAgrees(s))
	if st := s.Stats().HotTier; st.Entries != 0 || st.Drops != 0 {
		t.Errorf("a 4 KiB tier: %+v, want no entry and no drop", st)
	}
}

// TestHotAcctBreakEmptyArraysStarveReads: a table whose keys were all cleared keeps its
// arrays after the write-back (H8 deletes leave deleted slots; nothing shrinks it), so the
// tier's bytes stay at its bound with no entry in it, and another state's point reads —
// which never drop (H7) — find no room: its keys are read uncached, although the tier holds
// nothing.
func TestHotAcctBreakEmptyArraysStarveReads(t *testing.T) {
	const limit = 4 << 20
	s := hotStore(t, limit, false)
	a, _ := NewValueState(s, ValueDescriptor[int64]{Name: "a", Codec: Int64})
	b, _ := NewValueState(s, ValueDescriptor[int64]{Name: "b", Codec: Int64})
	n := 0
	for ; s.hot.bytes < limit*3/4; n++ {
		okT(t, a.Put(s.Key([]byte(fmt.Sprint("k", n))), int64(n)))
	}
	okT(t, s.WaitBackground()) // written back, clean
	for i := range n {
		okT(t, a.Clear(s.Key([]byte(fmt.Sprint("k", i)))))
	}
	okT(t, s.WaitBackground()) // the deletes written back: a's entries leave (H8)
	okT(t, hotBudgetAgrees(s))
	st := s.Stats().HotTier
	t.Logf("after clearing %d keys: %+v; a: %d slots, %d live", n, st, len(a.hot.tags), a.hot.n)
	for i := range 5000 {
		if _, ok, err := b.Get(s.Key([]byte(fmt.Sprint("b", i)))); ok || err != nil {
			t.Fatal(ok, err)
		}
	}
	okT(t, hotBudgetAgrees(s))
	st = s.Stats().HotTier
	t.Logf("after 5000 reads of b: %+v; a: %d slots, b: %d slots, %d live", st, len(a.hot.tags), len(b.hot.tags), b.hot.n)
	if b.hot.n < 5000 {
		t.Errorf("b cached %d of 5000 keys read; the tier holds %d entries in %d bytes of its %d (a's empty arrays: %d slots)",
			b.hot.n, st.Entries, st.Bytes, int64(limit), len(a.hot.tags))
	}
}

func TestHotAcctXTTLJudge(t *testing.T) {
	var now atomic.Int64 // read by background compactions' TTL filters (Options.Clock)
	now.Store(1_000_000)
	for _, limit := range []int64{10 << 10, 40 << 10, 300 << 10} {
		s, err := Open("", Options{MaxParallelism: 16, MemoryBudget: 64 << 20, HotTierSize: limit, Clock: now.Load})
		okT(t, err)
		r, _ := NewReducingState(s, ReducingDescriptor[int64]{Name: "r", Codec: Int64, Reduce: func(a, b int64) int64 { return a + b }, TTL: &TTLConfig{TTL: 50 * time.Millisecond}})
		v, _ := NewValueState(s, ValueDescriptor[[]byte]{Name: "v", Codec: Bytes})
		s.hot.judgeEvery = 300
		rng := rand.New(rand.NewPCG(2, uint64(limit)))
		for op := range 20000 {
			k := s.Key([]byte(fmt.Sprint("k", rng.IntN(800))))
			switch rng.IntN(7) {
			case 0, 1:
				err = r.Add(k, 1)
			case 2:
				_, _, err = r.Get(k)
			case 3:
				err = v.Put(k, make([]byte, rng.IntN(100)))
			case 4:
				_, _, err = v.Get(k)
			case 5:
				now.Add(int64(rng.IntN(20)))
			case 6:
				if rng.IntN(30) == 0 {
					err = s.WaitBackground()
				}
			}
			if err != nil {
				t.Fatal(op, err)
			}
			if err := hotBudgetAgrees(s); err != nil {
				t.Fatalf("limit %d op %d: %v", limit, op, err)
			}
		}
		t.Logf("%+v", s.Stats().HotTier)
		okT(t, s.Discard())
		if u := s.budget.UsedBy(memory.PurposeHotTier); u != 0 {
			t.Fatalf("after Discard: %d", u)
		}
	}
}
