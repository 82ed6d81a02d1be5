package memory

import (
	"errors"
	"testing"
)

// TestReserve: the writers' purposes stop at Limit − Reserve, for new mappings and for free-list
// segments alike, while slices may map into the reserve up to the limit; AddReserve clamps.
func TestReserve(t *testing.T) {
	const seg = SegmentSize16M
	b := NewBudget(4 * seg)
	if r := b.AddReserve(seg); r != seg || b.Reserve() != seg || b.Stats().Reserve != seg {
		t.Fatalf("AddReserve(seg) = %d, Reserve %d", r, b.Reserve())
	}
	p, err := NewPool(b, seg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var fresh []*Region
	for range 3 {
		r, err := p.Get(PurposeFreshData)
		if err != nil {
			t.Fatalf("fresh segment %d: %v", len(fresh), err)
		}
		fresh = append(fresh, r)
	}
	if _, err := p.Get(PurposeFreshData); !errors.Is(err, ErrMemoryBudget) {
		t.Fatalf("fourth fresh segment with one segment reserved: %v, want ErrMemoryBudget", err)
	}
	if _, err := b.Map(ps, PurposeFreshIndex); !errors.Is(err, ErrMemoryBudget) {
		t.Fatalf("index page in the reserve: %v, want ErrMemoryBudget", err)
	}
	if _, err := b.Map(ps, PurposeTimers); !errors.Is(err, ErrMemoryBudget) {
		t.Fatalf("timer page in the reserve: %v, want ErrMemoryBudget", err)
	}
	sl, err := p.Get(PurposeSlice)
	if err != nil {
		t.Fatalf("slice segment in the reserve: %v", err)
	}
	if b.Used() != b.Limit() {
		t.Fatalf("used %d, want the whole limit %d", b.Used(), b.Limit())
	}
	// A fresh segment given back goes to the free list; a writer may take it back only while
	// that keeps the committed bytes below Limit − Reserve.
	p.Put(fresh[2])
	p.Put(sl) // now two free-list segments; committed = 2 fresh segments
	r, err := p.Get(PurposeFreshData)
	if err != nil {
		t.Fatalf("free-list segment within Limit − Reserve: %v", err)
	}
	if _, err := p.Get(PurposeFreshData); !errors.Is(err, ErrMemoryBudget) {
		t.Fatalf("free-list segment into the reserve: %v, want ErrMemoryBudget", err)
	}
	if p.Free() != 1 {
		t.Fatalf("a refused Get took a free segment: %d left", p.Free())
	}
	if sl2, err := p.Get(PurposeSlice); err != nil {
		t.Fatalf("slice takes the last free segment: %v", err)
	} else {
		sl2.Release()
	}
	for _, x := range append(fresh[:2], r) {
		x.Release()
	}
	if b.AddReserve(-2*seg) != 0 || b.AddReserve(8*seg) != b.Limit() {
		t.Fatalf("AddReserve does not clamp to [0, Limit]: %d", b.Reserve())
	}
	if _, err := b.Map(ps, PurposeFreshIndex); !errors.Is(err, ErrMemoryBudget) {
		t.Fatalf("reserve = limit: a writer's page was mapped: %v", err)
	}
	if r, err := b.Map(ps, PurposeOther); err != nil {
		t.Fatalf("reserve = limit: other purposes still map: %v", err)
	} else {
		r.Release()
	}
}
