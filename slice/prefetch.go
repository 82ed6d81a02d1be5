package slice

import (
	"encoding/binary"
	"math/bits"

	"github.com/strata-db/strata/internal/base"
)

// Staged lookups (batched reads). A Get of an order hash takes a chain of dependent cache
// misses per run it searches: the binary search over the run's slices (run.first: a Slice
// header per step), the fingerprints near the interpolated position (lowerBoundFP), the
// entry's offset (offs) and the record (buf). One key at a time, each miss waits for the one
// before. PrefetchBatch walks the same chain for many keys in lock step — one step of every
// key's search, then the next — so each step issues one independent miss per key and the
// out-of-order core overlaps them (the "group prefetching" of hash joins; Go has no prefetch
// instruction, a load whose value is used is one). The loads feed Table.sink so the compiler
// keeps them. Nothing else changes (no hit counts, no state): a Get after it returns what it
// would have returned, only from the cache.

// PrefetchMax is the most order hashes one PrefetchBatch call takes.
const PrefetchMax = 64

// PrefetchBatch loads, for every order hash of orders (at most PrefetchMax), what a Get of it
// reads in the newest run of its bucket: the slice headers of run.first's search, the
// fingerprint window of lowerBoundFP, the entry's offset, its record and the slice's hit
// counter. Older runs (a chain
// of more than one run, until memory compaction merges it) are left to Get. Allocation-free;
// owner goroutine only.
func (t *Table) PrefetchBatch(orders []uint64) {
	n := len(orders)
	if n > PrefetchMax {
		panic("strata: invariant: PrefetchBatch of more than PrefetchMax orders")
	}
	var (
		runs   [PrefetchMax]*run
		lo, hi [PrefetchMax]int32
		sl     [PrefetchMax]*Slice
		at     [PrefetchMax]int32
		x      uint64
	)
	// Stage 1: run.first of every key, one binary-search step of every key per round.
	for k, order := range orders {
		c := &t.buckets[order>>t.shift]
		if len(c.runs) == 0 {
			continue
		}
		runs[k] = &c.runs[0]
		lo[k], hi[k] = 0, int32(len(runs[k].slices))
	}
	for active := true; active; {
		active = false
		for k := range n {
			if lo[k] >= hi[k] {
				continue
			}
			active = true
			m := int32(uint32(lo[k]+hi[k]) >> 1)
			if runs[k].slices[m].maxOrder < orders[k] {
				lo[k] = m + 1
			} else {
				hi[k] = m
			}
		}
	}
	// Stage 2: the fingerprint window around each interpolated position (independent lines).
	for k, order := range orders {
		r := runs[k]
		if r == nil || int(lo[k]) == len(r.slices) {
			continue
		}
		s := r.slices[lo[k]]
		if s.minOrder > order || s.count == 0 {
			continue
		}
		sl[k] = s
		wlo, whi := 0, s.count
		if s.count > 64 && order > s.minOrder && order <= s.maxOrder {
			ph, pl := bits.Mul64(order-s.minOrder, uint64(s.count))
			g, _ := bits.Div64(ph, pl, s.maxOrder-s.minOrder)
			w := 8 + s.count>>4
			wlo, whi = max(int(g)-w-1, 0), min(int(g)+w, s.count)
		}
		if whi-wlo <= 128 { // the whole window: at most 17 lines
			for i := wlo; i < whi; i += 8 {
				x += s.fps[i]
			}
			x += s.fps[whi-1]
		} else { // a large window: its ends and middle, lowerBoundFP's first loads
			x += s.fps[wlo] + s.fps[(wlo+whi)>>1] + s.fps[whi-1]
		}
	}
	// Stage 3: the search (now in the cache) and the entry's offset.
	for k, order := range orders {
		at[k] = -1
		if s := sl[k]; s != nil {
			if i := s.lowerBoundFP(order); i < s.count && s.fps[i] == order {
				at[k] = int32(i)
				x += uint64(s.offs[i])
			}
		}
	}
	// Stage 4: the record, its first and its last byte (a record straddles a line boundary
	// about as often as not), and the slice's hit counter, which Get increments.
	for k := range n {
		if i := at[k]; i >= 0 {
			s := sl[k]
			off := int(s.offs[i])
			b := s.buf[off:]
			end := recKeyOff + int(binary.LittleEndian.Uint16(b[recKlen:])) + int(binary.LittleEndian.Uint32(b[recVlen:]))
			if isMapKind(base.Kind(b[recKind])) { // a map's first entry (MapGet)
				end += recMapKOff - recKeyOff + int(binary.LittleEndian.Uint16(b[recUklen:]))
			}
			x += uint64(b[min(end, len(b))-1]) + s.hits
		}
	}
	t.sink += x
}
