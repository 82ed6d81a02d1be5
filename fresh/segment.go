package fresh

import (
	"encoding/binary"
	"fmt"
	"math/bits"

	"github.com/strata-db/strata/memory"
)

// Index group layout (64 bytes, one cache line; see doc.go):
//
//	[0:8]   ctrl: 8 control bytes, 0x00 = empty, 0x80|tag = full
//	[8:40]  8 × u32 record offset
//	[40:64] 8 × u24 hash bits 32..55 (h24), used to re-place slots on
//	        growth and as a 24-bit second check before touching the record
const (
	groupBytes    = 64
	groupSlots    = 8
	grpOffs       = 8
	grpHash       = 40
	ctrlFull      = 0x80
	lsb           = 0x0101010101010101
	msb           = 0x8080808080808080
	minIndexBytes = 4096
)

// matchTag returns a mask with the high bit set in each byte of ctrl equal
// to c (c has its high bit set, so empty bytes never match). As in Go's
// runtime swiss map, a byte just above a true match may be a false
// positive; callers verify h24 and the key.
func matchTag(ctrl, c uint64) uint64 {
	v := ctrl ^ c
	return (v - lsb) &^ v & msb
}

// matchEmpty returns the high bit of each empty control byte (exact).
func matchEmpty(ctrl uint64) uint64 { return ^ctrl & msb }

// hashParts splits a 64-bit hash into the broadcast control byte (tag = top
// 7 bits, high bit set) and h24 (bits 32..55), from which the home group is
// taken (h24 & mask).
func hashParts(h uint64) (ctrlBroadcast uint64, h24 uint32) {
	return lsb * (ctrlFull | h>>57), uint32(h>>32) & 0xFFFFFF
}

// segment is one data segment with its own hash index. Go-heap struct;
// data and idx alias off-heap Regions.
type segment struct {
	data   []byte // region bytes cut at the data limit
	used   uint32 // bump pointer: next free offset
	idx    []byte // index groups
	mask   uint32 // number of groups - 1
	count  uint32 // full slots
	growAt uint32 // count at which the index doubles (7/8 of slots)
	fullAt uint32 // count the index may reach near the end of the segment (15/16 of slots)
	sealed bool
	handle *SealedSegment // made by Table.Sealed
	view   *SealedSegment // the active segment's view (ScanSegments), owner only

	records      int64 // records appended
	deadRecords  int64 // records marked FlagDead
	deadBytes    int64
	region, iReg *memory.Region
}

func (s *segment) setIndex(r *memory.Region) {
	b := r.Bytes()
	groups := uint32(len(b) / groupBytes)
	groups = 1 << (31 - bits.LeadingZeros32(groups)) // power of two
	s.iReg = r
	s.idx = b[:groups*groupBytes]
	s.mask = groups - 1
	s.growAt = groups * groupSlots * 7 / 8
	s.fullAt = groups * groupSlots * 15 / 16
}

// tailFits reports whether the index may take slots more slots beyond 7/8 load without
// doubling: when the slots the segment's data room can still bring, at the slots per data
// byte of its records so far, keep it at or below 15/16 load (limit is the segment's data
// limit). Doubling for the last few records of a segment leaves half of the new index empty
// for as long as the segment lives (a sealed segment waits for its transform with it); a
// misjudged tail only makes the index double later, at 15/16.
func (s *segment) tailFits(limit, slots uint32) bool {
	if s.count+slots > s.fullAt || s.used <= segHeaderSize {
		return false
	}
	rest := uint64(limit-s.used) * uint64(s.count) / uint64(s.used-segHeaderSize)
	return uint64(s.count)+uint64(slots)+rest <= uint64(s.fullAt)
}

// hashAt reports whether slot j of the index group grp holds the hash bits h24 (the lookups
// check it for each slot whose tag matches before they read the slot's record).
func hashAt(grp []byte, j, h24 uint32) bool {
	hb := grp[grpHash+3*j : grpHash+3*j+3]
	return uint32(hb[0])|uint32(hb[1])<<8|uint32(hb[2])<<16 == h24
}

// findKey returns the index position and offset of the key-level record
// (value, tombstone, list chunk, map header) for key; off == 0 if absent,
// and then pos is the empty slot an insert of h would take (invariant 12:
// the first empty slot of the group where the probe ended).
func (s *segment) findKey(h uint64, key []byte) (pos, off uint32) {
	c, h24 := hashParts(h)
	idx, data := s.idx, s.data
	g := h24 & s.mask
	for step := uint32(1); ; step++ {
		grp := idx[g*groupBytes : g*groupBytes+groupBytes]
		ctrl := binary.LittleEndian.Uint64(grp)
		for m := matchTag(ctrl, c); m != 0; m &= m - 1 {
			j := uint32(bits.TrailingZeros64(m)) >> 3
			if !hashAt(grp, j, h24) {
				continue
			}
			o := binary.LittleEndian.Uint32(grp[grpOffs+4*j:])
			r := data[o : o+keyHdrSize]
			klen := uint32(binary.LittleEndian.Uint16(r[8:]))
			if RecordKind(r[7]&0xF) == KindMapEntry || klen != uint32(len(key)) {
				continue
			}
			if string(data[o+keyHdrSize:o+keyHdrSize+klen]) == string(key) {
				return g*groupSlots + j, o
			}
		}
		if m := matchEmpty(ctrl); m != 0 {
			return g*groupSlots + uint32(bits.TrailingZeros64(m))>>3, 0
		}
		g = (g + step) & s.mask
	}
}

// findEntry returns the index position and offset of the map entry of
// userKey under the map header at hdr; he = entryHash(hdr, hu32).
func (s *segment) findEntry(he uint64, hdr uint32, userKey []byte) (pos, off uint32) {
	c, h24 := hashParts(he)
	idx, data := s.idx, s.data
	g := h24 & s.mask
	for step := uint32(1); ; step++ {
		grp := idx[g*groupBytes : g*groupBytes+groupBytes]
		ctrl := binary.LittleEndian.Uint64(grp)
		for m := matchTag(ctrl, c); m != 0; m &= m - 1 {
			j := uint32(bits.TrailingZeros64(m)) >> 3
			if !hashAt(grp, j, h24) {
				continue
			}
			o := binary.LittleEndian.Uint32(grp[grpOffs+4*j:])
			// Check the kind first: a key-level record (16 bytes or more)
			// with the same tag and h24 may end less than an entry header
			// (28 bytes) before the end of the segment.
			if RecordKind(data[o+7]&0xF) != KindMapEntry {
				continue
			}
			r := data[o : o+entryHdrSize]
			klen := uint32(binary.LittleEndian.Uint16(r[8:]))
			if klen != uint32(len(userKey)) || binary.LittleEndian.Uint32(r[16:]) != hdr {
				continue
			}
			if string(data[o+entryHdrSize:o+entryHdrSize+klen]) == string(userKey) {
				return g*groupSlots + j, o
			}
		}
		if matchEmpty(ctrl) != 0 {
			return 0, 0
		}
		g = (g + step) & s.mask
	}
}

// setSlot repoints the index slot at pos to the record at off.
func (s *segment) setSlot(pos, off uint32) {
	if s.sealed {
		panic("strata: invariant: index slot of a sealed segment repointed")
	}
	g, j := pos/groupSlots, pos%groupSlots
	binary.LittleEndian.PutUint32(s.idx[g*groupBytes+grpOffs+4*j:], off)
}

// insert puts a new slot for hash h pointing at off. The caller made room
// (count < growAt, or count < fullAt when tailFits).
func (s *segment) insert(h uint64, off uint32) {
	c, h24 := hashParts(h)
	insertSlot(s.idx, s.mask, uint8(c), h24, off)
	s.count++
}

// insertAt puts a new slot for hash h pointing at off at pos, the empty
// slot a findKey of h returned with the index unchanged since (invariant
// 12). The caller made room as for insert.
func (s *segment) insertAt(pos uint32, h uint64, off uint32) {
	c, h24 := hashParts(h)
	g, j := pos/groupSlots, pos%groupSlots
	grp := s.idx[g*groupBytes : g*groupBytes+groupBytes]
	if grp[j] != 0 {
		panic("strata: invariant: fresh: insert at a full index slot")
	}
	grp[j] = uint8(c)
	binary.LittleEndian.PutUint32(grp[grpOffs+4*j:], off)
	grp[grpHash+3*j] = byte(h24)
	grp[grpHash+3*j+1] = byte(h24 >> 8)
	grp[grpHash+3*j+2] = byte(h24 >> 16)
	s.count++
}

func insertSlot(idx []byte, mask uint32, ctrl uint8, h24, off uint32) {
	g := h24 & mask
	for step := uint32(1); ; step++ {
		grp := idx[g*groupBytes : g*groupBytes+groupBytes]
		if m := matchEmpty(binary.LittleEndian.Uint64(grp)); m != 0 {
			j := uint32(bits.TrailingZeros64(m)) >> 3
			grp[j] = ctrl
			binary.LittleEndian.PutUint32(grp[grpOffs+4*j:], off)
			grp[grpHash+3*j] = byte(h24)
			grp[grpHash+3*j+1] = byte(h24 >> 8)
			grp[grpHash+3*j+2] = byte(h24 >> 16)
			return
		}
		g = (g + step) & mask
	}
}

// grow doubles the index into a new Region and releases the old one.
func (s *segment) grow(b *memory.Budget) error {
	size := len(s.idx) * 2
	r, err := b.Map(size, memory.PurposeFreshIndex)
	if err != nil {
		return fmt.Errorf("grow segment index to %d bytes: %w", size, err)
	}
	old, oldReg := s.idx, s.iReg
	s.setIndex(r)
	for g := 0; g < len(old); g += groupBytes {
		grp := old[g : g+groupBytes]
		for j := 0; j < groupSlots; j++ {
			if grp[j]&ctrlFull == 0 {
				continue
			}
			h24 := uint32(grp[grpHash+3*j]) | uint32(grp[grpHash+3*j+1])<<8 | uint32(grp[grpHash+3*j+2])<<16
			insertSlot(s.idx, s.mask, grp[j], h24, binary.LittleEndian.Uint32(grp[grpOffs+4*j:]))
		}
	}
	if err := oldReg.Release(); err != nil {
		return fmt.Errorf("release old segment index: %w", err)
	}
	return nil
}

// recordSize returns the bytes occupied by the (trusted) record at off.
func (s *segment) recordSize(off uint32) uint32 {
	r := s.data[off:]
	klen := uint32(binary.LittleEndian.Uint16(r[8:]))
	slack := uint32(binary.LittleEndian.Uint16(r[10:]))
	vlen := binary.LittleEndian.Uint32(r[12:])
	switch RecordKind(r[7] & 0xF) {
	case KindListChunk:
		return keyHdrSize + klen + chunkPrevLen + vlen + slack
	case KindMapHeader:
		return keyHdrSize + klen
	case KindMapEntry:
		return entryHdrSize + klen + vlen + slack
	}
	return keyHdrSize + klen + vlen + slack
}

// markDead flags one record as superseded garbage (idempotent) and
// stores in it seq, the sequence number of the write that superseded it:
// a MapIter yields an entry killed after it started (see MapIter).
func (s *segment) markDead(off uint32, seq uint64) {
	if s.sealed {
		panic("strata: invariant: record of a sealed segment marked dead")
	}
	m := binary.LittleEndian.Uint64(s.data[off:])
	if uint8(m>>60)&FlagDead != 0 {
		return
	}
	binary.LittleEndian.PutUint64(s.data[off:], m&^seqMask|seq&seqMask|uint64(FlagDead)<<60)
	s.deadRecords++
	s.deadBytes += int64(s.recordSize(off))
}

// kill marks the record at off dead, with everything that only it
// reaches: the older chunks of a list, the entries of a map header; seq is
// the sequence number of the superseding write.
func (s *segment) kill(off uint32, seq uint64) {
	r := s.data[off:]
	switch RecordKind(r[7] & 0xF) {
	case KindListChunk:
		for o := off; o != 0; {
			s.markDead(o, seq)
			klen := uint32(binary.LittleEndian.Uint16(s.data[o+8:]))
			o = binary.LittleEndian.Uint32(s.data[o+keyHdrSize+klen:])
		}
	case KindMapHeader:
		s.markDead(off, seq)
		for e := binary.LittleEndian.Uint32(r[12:]); e != 0; e = binary.LittleEndian.Uint32(s.data[e+20:]) {
			s.markDead(e, seq)
		}
	default:
		s.markDead(off, seq)
	}
}

// alloc bumps the data pointer by n bytes; the caller checked room.
func (s *segment) alloc(n uint32) uint32 {
	if s.sealed {
		panic("strata: invariant: record appended to a sealed segment")
	}
	o := s.used
	s.used += n
	s.records++
	return o
}
