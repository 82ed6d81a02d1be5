package fresh

import (
	"encoding/binary"
	"math/bits"
)

// Staged lookups (batched reads). Go has no prefetch intrinsic; a load whose result is used
// (here: added into Table.sink) is a prefetch the out-of-order core overlaps with the other
// independent loads of a loop. A batch of keys is read in passes: Prefetch for every key (the
// index group of each segment: one miss per key and segment, all independent), then
// PrefetchRecord for every key (the record the group points at: one miss per key, all
// independent), then Get for every key, which finds both in the cache. The passes change
// nothing but the cache and sink: skipping them, or a write between them, leaves Get's
// result the same.
//
// A batch of writes stages only the active segment (PrefetchActive, PrefetchActiveRecord):
// Put and Delete look a key up in the active segment alone, so loading the groups and records
// of the sealed segments would be misses nobody uses.

// Prefetch loads the index group of hash h in every segment (newest first), so that a Get of
// h soon after finds it in the cache. Allocation-free; owner goroutine only.
func (t *Table) Prefetch(h uint64) {
	_, h24 := hashParts(h)
	var x uint64
	for i := len(t.segs) - 1; i >= 0; i-- {
		x += t.segs[i].touchGroup(h24)
	}
	t.sink += x
}

// PrefetchRecord loads, in every segment, the record of the first index slot whose tag and
// 24 hash bits match h (usually h's record; a false match only wastes the load). Call it after
// Prefetch(h) so the index group is in the cache. Allocation-free; owner goroutine only.
func (t *Table) PrefetchRecord(h uint64) {
	c, h24 := hashParts(h)
	var x uint64
	for i := len(t.segs) - 1; i >= 0; i-- {
		x += t.segs[i].touchRecord(c, h24)
	}
	t.sink += x
}

// PrefetchActive loads the index group of hash h in the active segment only (nothing when
// there is none), the one a Put or Delete of h looks at. Allocation-free; owner goroutine only.
func (t *Table) PrefetchActive(h uint64) {
	if s := t.active; s != nil {
		_, h24 := hashParts(h)
		t.sink += s.touchGroup(h24)
	}
}

// PrefetchActiveRecord is PrefetchRecord for the active segment only: the record an in-place
// Put or Delete of h rewrites. Call it after PrefetchActive(h). Allocation-free; owner
// goroutine only.
func (t *Table) PrefetchActiveRecord(h uint64) {
	if s := t.active; s != nil {
		c, h24 := hashParts(h)
		t.sink += s.touchRecord(c, h24)
	}
}

// touchGroup loads the first byte of the index group of h24 (its home group).
func (s *segment) touchGroup(h24 uint32) uint64 {
	g := h24 & s.mask
	return uint64(s.idx[g*groupBytes])
}

// touchRecord loads the first byte of the record of the first slot of h24's home group whose
// tag is c and whose hash bits are h24 (0 when none matches).
func (s *segment) touchRecord(c uint64, h24 uint32) uint64 {
	g := h24 & s.mask
	grp := s.idx[g*groupBytes : g*groupBytes+groupBytes]
	ctrl := binary.LittleEndian.Uint64(grp)
	for m := matchTag(ctrl, c); m != 0; m &= m - 1 {
		j := uint32(bits.TrailingZeros64(m)) >> 3
		if !hashAt(grp, j, h24) {
			continue
		}
		return uint64(s.data[binary.LittleEndian.Uint32(grp[grpOffs+4*j:])])
	}
	return 0
}
