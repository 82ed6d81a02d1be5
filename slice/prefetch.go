package slice

import "math/bits"

// Staged lookups (batched reads). A Get of an order hash takes three dependent cache misses
// per slice it searches: the fingerprint array near the interpolated position
// (lowerBoundFP), the entry's offset (offs), and the record (buf). For a batch of keys the
// engine issues PrefetchGet for every key (the first miss of every key, independent of one
// another, so the out-of-order core overlaps them), then PrefetchRecord for every key (the
// search inside the window, now mostly cached, and the offset and record), then Get. The
// loads feed Table.sink so the compiler keeps them; nothing else changes (no hit counts, no
// state), so skipping the passes leaves Get's result the same.

// PrefetchGet loads, in the first slice of each run of order's bucket that may hold order,
// the fingerprints at the ends and the middle of lowerBoundFP's window: the loads a Get of
// order starts with. Allocation-free; owner goroutine only.
func (t *Table) PrefetchGet(order uint64) {
	c := &t.buckets[order>>t.shift]
	var x uint64
	for ri := range c.runs {
		r := &c.runs[ri]
		si := r.first(order)
		if si == len(r.slices) {
			continue
		}
		s := r.slices[si]
		if s.minOrder > order || s.count <= 64 {
			if s.count > 0 {
				x += s.fps[s.count>>1]
			}
			continue
		}
		if order <= s.minOrder || order > s.maxOrder {
			continue
		}
		n := s.count
		ph, pl := bits.Mul64(order-s.minOrder, uint64(n))
		g, _ := bits.Div64(ph, pl, s.maxOrder-s.minOrder)
		w := 8 + n>>4
		lo, hi := max(int(g)-w, 0), min(int(g)+w, n)
		x += s.fps[lo] + s.fps[hi-1] + s.fps[min(int(g), n-1)]
	}
	t.sink += x
}

// PrefetchRecord finds order's first entry in the first slice of each run that may hold it
// (a search that PrefetchGet made mostly cached) and loads its offset and record, the
// remaining misses of a Get. Allocation-free; owner goroutine only.
func (t *Table) PrefetchRecord(order uint64) {
	c := &t.buckets[order>>t.shift]
	var x uint64
	for ri := range c.runs {
		r := &c.runs[ri]
		si := r.first(order)
		if si == len(r.slices) {
			continue
		}
		s := r.slices[si]
		if s.minOrder > order {
			continue
		}
		i := s.lowerBoundFP(order)
		if i < s.count && s.fps[i] == order {
			x += uint64(s.buf[s.offs[i]])
		}
	}
	t.sink += x
}
