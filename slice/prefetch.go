package slice

// Staged lookups (batched reads). A Get of an order hash takes a chain of dependent cache
// misses per run it searches: the run's maxOrder array (run.first), the Slice header, the
// fingerprints at the interpolated rank (lowerBoundFP), the entry's offset (offs) and the
// record (buf). One key at a time, each miss waits for the one before. PrefetchBatch walks
// the same chain for many keys in lock step — one step of every key, then the next — so each
// step issues one independent miss per key and the out-of-order core overlaps them (the
// "group prefetching" of hash joins; Go has no prefetch instruction, a load whose value is
// used is one). The loads feed Table.sink so the compiler keeps them. Nothing else changes
// (no hit counts, no state): a Get after it returns what it would have returned, only from
// the cache.

// PrefetchMax is the most order hashes one PrefetchBatch call takes.
const PrefetchMax = 64

// PrefetchBatch loads, for every order hash of orders (at most PrefetchMax), what a Get of it
// reads in the newest run of its bucket: the line of the run's maxOrder array at the
// interpolated slice, the slice's header, the fingerprints and the offsets at the
// interpolated rank, the entry's record (first and last byte) and the slice's hit counter.
// Older runs (a chain of more than one run, until memory compaction merges it) are left to
// Get. Allocation-free; owner goroutine only.
func (t *Table) PrefetchBatch(orders []uint64) {
	n := len(orders)
	if n > PrefetchMax {
		panic("strata: invariant: PrefetchBatch of more than PrefetchMax orders")
	}
	var (
		runs [PrefetchMax]*run
		sl   [PrefetchMax]*Slice
		at   [PrefetchMax]int32
		x    uint64
	)
	// Stage 1: the run's maxOrder line at the interpolated slice of every key.
	for k, order := range orders {
		c := &t.buckets[order>>t.shift]
		if len(c.runs) == 0 {
			continue
		}
		r := &c.runs[0]
		if !r.filter.mayHold(order) { // a new key: Get skips the run too (invariant 17)
			continue
		}
		runs[k] = r
		if m := len(r.maxs); m > 0 && order > r.lo {
			x += r.maxs[min(int(float64(order-r.lo)*r.scale), m-1)]
		}
	}
	// Stage 2: the slice (run.first, now cached) and its header.
	for k, order := range orders {
		r := runs[k]
		if r == nil {
			continue
		}
		if si := r.first(order); si < len(r.slices) {
			s := r.slices[si]
			sl[k] = s
			x += s.minOrder
		}
	}
	// Stage 3: the fingerprints and the offsets at the interpolated rank (independent lines:
	// the walk from the guess usually stays in them).
	for k, order := range orders {
		s := sl[k]
		if s == nil || s.minOrder > order || s.count == 0 {
			sl[k] = nil
			continue
		}
		g := 0
		if order > s.minOrder {
			g = min(int(float64(order-s.minOrder)*s.scale), s.count-1)
		}
		x += s.fps[g] + uint64(s.offs[g])
	}
	// Stage 4: the search (now in the cache) and the entry's offset.
	for k, order := range orders {
		at[k] = -1
		if s := sl[k]; s != nil {
			if i := s.lowerBoundFP(order); i < s.count && s.fps[i] == order {
				at[k] = int32(i)
				x += uint64(s.offs[i])
			}
		}
	}
	// Stage 5: the record, its first and its last byte (a record straddles a line boundary
	// about as often as not), and the slice's hit counter, which Get increments.
	for k := range n {
		if i := at[k]; i >= 0 {
			s := sl[k]
			x += uint64(s.buf[s.offs[i]]) + uint64(s.buf[s.recEnd(int(i))-1]) + s.hits
		}
	}
	t.sink += x
}
