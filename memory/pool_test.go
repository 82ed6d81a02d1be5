package memory

import (
	"errors"
	"fmt"
	"sync"
	"testing"
)

func TestNewPoolSegmentSizes(t *testing.T) {
	b := NewBudget(1 << 30)
	tests := []struct {
		size int
		ok   bool
	}{
		{0, false},
		{-SegmentSize16M, false},
		{1, false},
		{1 << 20, false},
		{SegmentSize2M - 1, false},
		{SegmentSize2M, true},
		{SegmentSize4M - 1, false},
		{SegmentSize4M, true},
		{SegmentSize8M, true},
		{SegmentSize16M - 1, false},
		{SegmentSize16M, true},
		{SegmentSize16M + 4096, false},
		{SegmentSize32M, true},
		{48 << 20, false},
		{SegmentSize64M, true},
		{128 << 20, false},
	}
	for _, tt := range tests {
		p, err := NewPool(b, tt.size)
		if tt.ok {
			if err != nil || p.SegmentSize() != tt.size || p.Budget() != b || p.Free() != 0 {
				t.Errorf("NewPool(%d) = %v, %v", tt.size, p, err)
			}
			continue
		}
		if !errors.Is(err, ErrSegmentSize) || p != nil {
			t.Errorf("NewPool(%d): err = %v, want ErrSegmentSize", tt.size, err)
		}
	}
	if _, err := NewPool(nil, SegmentSize16M); err == nil {
		t.Error("NewPool(nil budget) succeeded")
	}
}

func newPool(t testing.TB, segments int64) (*Budget, *Pool) {
	t.Helper()
	b := NewBudget(segments * SegmentSize16M)
	p, err := NewPool(b, SegmentSize16M)
	if err != nil {
		t.Fatal(err)
	}
	return b, p
}

func mustGet(t testing.TB, p *Pool, purpose Purpose) *Region {
	t.Helper()
	r, err := p.Get(purpose)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// checkStats compares the budget's accounting with the expected number of segments per place.
func checkStats(t *testing.T, b *Budget, byPurpose map[Purpose]int, pooled int) {
	t.Helper()
	st := b.Stats()
	total := pooled
	for p := Purpose(0); p < NumPurposes; p++ {
		want := int64(byPurpose[p]) * SegmentSize16M
		if st.ByPurpose[p] != want {
			t.Errorf("ByPurpose[%v] = %d, want %d", p, st.ByPurpose[p], want)
		}
		total += byPurpose[p]
	}
	if st.Pooled != int64(pooled)*SegmentSize16M {
		t.Errorf("Pooled = %d, want %d segments", st.Pooled, pooled)
	}
	if st.Used != int64(total)*SegmentSize16M || st.Mappings != int64(total) {
		t.Errorf("Used = %d, Mappings = %d, want %d segments", st.Used, st.Mappings, total)
	}
}

func TestPoolFreeListReuse(t *testing.T) {
	b, p := newPool(t, 4)
	r := mustGet(t, p, PurposeFreshData)
	if len(r.Bytes()) != SegmentSize16M {
		t.Fatalf("len = %d", len(r.Bytes()))
	}
	r.Bytes()[0], r.Bytes()[SegmentSize16M-1] = 0x5A, 0xA5
	checkStats(t, b, map[Purpose]int{PurposeFreshData: 1}, 0)

	p.Put(r)
	if r.Bytes() != nil {
		t.Fatal("Bytes() not nil after Put")
	}
	if p.Free() != 1 {
		t.Fatalf("Free = %d, want 1", p.Free())
	}
	checkStats(t, b, nil, 1) // free-list segments count toward Used, in no purpose

	// A repeated Put or Release of the same region must not add it twice or unmap it.
	p.Put(r)
	if err := r.Release(); err != nil {
		t.Fatal(err)
	}
	if p.Free() != 1 {
		t.Fatalf("Free = %d after repeated Put, want 1", p.Free())
	}
	checkStats(t, b, nil, 1)

	r2 := mustGet(t, p, PurposeSlice)
	if r2 == r {
		t.Fatal("Get returned the released *Region itself")
	}
	// Same memory: the previous owner's bytes are still there (Get does not zero).
	if r2.Bytes()[0] != 0x5A || r2.Bytes()[SegmentSize16M-1] != 0xA5 {
		t.Fatal("Get did not reuse the free-list segment")
	}
	if r2.Purpose() != PurposeSlice || p.Free() != 0 {
		t.Fatalf("purpose %v free %d", r2.Purpose(), p.Free())
	}
	checkStats(t, b, map[Purpose]int{PurposeSlice: 1}, 0)
	if err := r2.Release(); err != nil {
		t.Fatal(err)
	}
	checkStats(t, b, nil, 0)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestPoolMaxFree(t *testing.T) {
	for n := 0; n <= MaxFree+3; n++ {
		t.Run(fmt.Sprintf("put=%d", n), func(t *testing.T) {
			b, p := newPool(t, int64(MaxFree+3))
			rs := make([]*Region, n)
			for i := range rs {
				rs[i] = mustGet(t, p, PurposeFreshData)
			}
			for _, r := range rs {
				p.Put(r)
			}
			kept := min(n, MaxFree)
			if p.Free() != kept {
				t.Fatalf("Free = %d, want %d", p.Free(), kept)
			}
			checkStats(t, b, nil, kept)
			if err := p.Close(); err != nil {
				t.Fatal(err)
			}
			checkStats(t, b, nil, 0)
		})
	}
}

func TestPoolBudgetExhausted(t *testing.T) {
	b, p := newPool(t, 2)
	r1 := mustGet(t, p, PurposeFreshData)
	r2 := mustGet(t, p, PurposeFreshData)
	if _, err := p.Get(PurposeFreshData); !errors.Is(err, ErrMemoryBudget) {
		t.Fatalf("third Get: err = %v, want ErrMemoryBudget", err)
	}
	// An index mapping through the same budget is refused too.
	if _, err := b.Map(ps, PurposeFreshIndex); !errors.Is(err, ErrMemoryBudget) {
		t.Fatalf("Map with full budget: err = %v", err)
	}
	p.Put(r1)
	// The free-list segment still counts: the budget stays full for other mappings...
	if _, err := b.Map(ps, PurposeFreshIndex); !errors.Is(err, ErrMemoryBudget) {
		t.Fatalf("Map with pooled segment: err = %v", err)
	}
	// ...but the pool can hand it out again.
	r3 := mustGet(t, p, PurposeFreshData)
	p.Put(r2)
	p.Put(r3)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	checkStats(t, b, nil, 0)
}

func TestPoolClose(t *testing.T) {
	b, p := newPool(t, 4)
	out := mustGet(t, p, PurposeFreshData)
	p.Put(mustGet(t, p, PurposeFreshData))
	p.Put(mustGet(t, p, PurposeFreshData))
	// Two were put back, but the first Put's segment was reused by the second Get.
	if p.Free() != 1 {
		t.Fatalf("Free = %d, want 1", p.Free())
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	checkStats(t, b, map[Purpose]int{PurposeFreshData: 1}, 0)
	if _, err := p.Get(PurposeFreshData); !errors.Is(err, ErrClosed) {
		t.Fatalf("Get after Close: err = %v, want ErrClosed", err)
	}
	p.Put(out) // released, not pooled
	if p.Free() != 0 || out.Bytes() != nil {
		t.Fatalf("Put after Close pooled the segment")
	}
	checkStats(t, b, nil, 0)
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestPoolPutForeign(t *testing.T) {
	b, p := newPool(t, 4)
	ob, other := newPool(t, 4)
	small, err := b.Map(ps, PurposeOther)
	if err != nil {
		t.Fatal(err)
	}
	p.Put(small) // wrong size: released
	foreign := mustGet(t, other, PurposeFreshData)
	p.Put(foreign) // wrong budget: released, returned to its own budget
	p.Put(nil)
	if p.Free() != 0 || small.Bytes() != nil || foreign.Bytes() != nil {
		t.Fatalf("foreign regions pooled: free %d", p.Free())
	}
	checkStats(t, b, nil, 0)
	checkStats(t, ob, nil, 0)
}

func TestPoolInvalidPurpose(t *testing.T) {
	b, p := newPool(t, 1)
	if _, err := p.Get(NumPurposes); !errors.Is(err, ErrInvalidPurpose) {
		t.Fatalf("err = %v", err)
	}
	checkStats(t, b, nil, 0)
}

func TestPoolConcurrent(t *testing.T) {
	const goroutines, iterations = 16, 100
	b, p := newPool(t, 4)
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Go(func() {
			purpose := Purpose(g % int(NumPurposes))
			for i := 0; i < iterations; i++ {
				r, err := p.Get(purpose)
				if errors.Is(err, ErrMemoryBudget) {
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				r.Bytes()[g] = byte(i)
				if i%5 == 0 {
					if err := r.Release(); err != nil {
						t.Error(err)
					}
				} else {
					p.Put(r)
				}
				if u := b.Used(); u > b.Limit() {
					t.Errorf("Used %d > Limit %d", u, b.Limit())
				}
			}
		})
	}
	wg.Wait()
	checkStats(t, b, nil, p.Free())
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	checkStats(t, b, nil, 0)
}

// BenchmarkPool compares recycling a segment through the free list with a fresh mmap/munmap.
// touch=pages writes one byte per page, as a FreshTable filling the segment would: that is where
// a fresh mapping pays (page faults and kernel zeroing) and a recycled one does not.
func BenchmarkPool(b *testing.B) {
	touch := func(mem []byte) {
		for i := 0; i < len(mem); i += ps {
			mem[i] = 1
		}
	}
	for _, size := range []int{SegmentSize16M, SegmentSize64M} {
		for _, touched := range []bool{false, true} {
			name := fmt.Sprintf("segment=%dMiB/touch=none", size>>20)
			if touched {
				name = fmt.Sprintf("segment=%dMiB/touch=pages", size>>20)
			}
			b.Run("op=get-put/"+name, func(b *testing.B) {
				p, err := NewPool(NewBudget(4*int64(size)), size)
				if err != nil {
					b.Fatal(err)
				}
				defer p.Close()
				b.ReportAllocs()
				if touched {
					b.SetBytes(int64(size))
				}
				for b.Loop() {
					r, err := p.Get(PurposeFreshData)
					if err != nil {
						b.Fatal(err)
					}
					if touched {
						touch(r.Bytes())
					}
					p.Put(r)
				}
			})
			b.Run("op=map-release/"+name, func(b *testing.B) {
				budget := NewBudget(4 * int64(size))
				b.ReportAllocs()
				if touched {
					b.SetBytes(int64(size))
				}
				for b.Loop() {
					r, err := budget.Map(size, PurposeFreshData)
					if err != nil {
						b.Fatal(err)
					}
					if touched {
						touch(r.Bytes())
					}
					if err := r.Release(); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
