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

// Prefetch loads the index group of hash h in every segment (newest first), so that a Get of
// h soon after finds it in the cache. Allocation-free; owner goroutine only.
func (t *Table) Prefetch(h uint64) {
	_, h24 := hashParts(h)
	var x uint64
	for i := len(t.segs) - 1; i >= 0; i-- {
		s := t.segs[i]
		g := h24 & s.mask
		x += uint64(s.idx[g*groupBytes])
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
		s := t.segs[i]
		g := h24 & s.mask
		grp := s.idx[g*groupBytes : g*groupBytes+groupBytes]
		ctrl := binary.LittleEndian.Uint64(grp)
		for m := matchTag(ctrl, c); m != 0; m &= m - 1 {
			j := uint32(bits.TrailingZeros64(m)) >> 3
			hb := grp[grpHash+3*j : grpHash+3*j+3]
			if uint32(hb[0])|uint32(hb[1])<<8|uint32(hb[2])<<16 != h24 {
				continue
			}
			x += uint64(s.data[binary.LittleEndian.Uint32(grp[grpOffs+4*j:])])
			break
		}
	}
	t.sink += x
}
