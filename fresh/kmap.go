package fresh

import (
	"encoding/binary"
	"fmt"
)

// entryHash is the index hash of the entry of a user key under the map
// header at hdr: the high 32 bits of the user-key hash (hu32) XOR a mix of
// the header's offset, placed where the index takes its tag and h24 (bits
// 32..63). Entries store hu32, so an iterator can look a user key up in
// other segments without the caller's hash.
func entryHash(hdr, hu32 uint32) uint64 {
	x := hdr
	x ^= x >> 16
	x *= 0x85ebca6b
	x ^= x >> 13
	x *= 0xc2b2ae35
	x ^= x >> 16
	return uint64(hu32^x) << 32
}

func headerSize(mapKey []byte) uint32 { return keyHdrSize + uint32(len(mapKey)) }

func entrySize(userKey, value []byte) uint32 {
	return entryHdrSize + uint32(len(userKey)) + uint32(len(value))
}

func (t *Table) checkMap(mapKey, userKey, value []byte) error {
	if len(mapKey) > MaxKeySize {
		return t.checkKV(mapKey, value)
	}
	return t.checkKV(userKey, value)
}

// mapHeader returns the live map header of mapKey in s (0 if none) and
// whether another key-level record (a tombstone) shadows older segments.
func (s *segment) mapHeader(hm uint64, mapKey []byte) (pos, hdr uint32, shadow bool) {
	pos, off := s.findKey(hm, mapKey)
	if off == 0 {
		return 0, 0, false
	}
	if RecordKind(s.data[off+7]&0xF) != KindMapHeader {
		return pos, 0, true
	}
	return pos, off, false
}

// MapGet returns the value of userKey (hash hu) in the map of mapKey (hash
// hm): Found; Deleted when an entry tombstone, a cleared map (MapClear) or
// a key-level tombstone shadows older data; or Absent. Searches the active
// segment, then sealed ones newest first. The value aliases segment memory
// until the next write. Allocates nothing.
func (t *Table) MapGet(hm uint64, mapKey []byte, hu uint64, userKey []byte) ([]byte, Status) {
	hu32 := uint32(hu >> 32)
	for i := len(t.segs) - 1; i >= 0; i-- {
		s := t.segs[i]
		_, hdr, shadow := s.mapHeader(hm, mapKey)
		if shadow {
			return nil, Deleted
		}
		if hdr == 0 {
			continue
		}
		if _, e := s.findEntry(entryHash(hdr, hu32), hdr, userKey); e != 0 {
			r := s.data[e:]
			if r[7]>>4&FlagTomb != 0 {
				return nil, Deleted
			}
			a := entryHdrSize + uint32(len(userKey))
			b := a + binary.LittleEndian.Uint32(r[12:])
			return r[a:b:b], Found
		}
		if s.data[hdr+7]>>4&FlagBase != 0 {
			return nil, Deleted
		}
	}
	return nil, Absent
}

// MapPut sets userKey (hash hu) to value in the map of mapKey (hash hm),
// as Flink's MapState.put. In place when the entry is in the active
// segment, is not a tombstone (a MapIter must not see a removed entry come
// back) and its capacity holds value; otherwise an entry record is
// appended (and a map header first, when the active segment has none for
// mapKey). Errors as Put.
func (t *Table) MapPut(hm uint64, mapKey []byte, hu uint64, userKey, value []byte) error {
	if err := t.checkMap(mapKey, userKey, value); err != nil {
		return err
	}
	hu32 := uint32(hu >> 32)
	if s := t.active; s != nil {
		if _, hdr, _ := s.mapHeader(hm, mapKey); hdr != 0 {
			// Not over an entry tombstone: a MapIter started while the
			// entry was removed would see it come back (see MapIter).
			if _, e := s.findEntry(entryHash(hdr, hu32), hdr, userKey); e != 0 && s.data[e+7]>>4&FlagTomb == 0 {
				r := s.data[e:]
				c := binary.LittleEndian.Uint32(r[12:]) + uint32(binary.LittleEndian.Uint16(r[10:]))
				n := uint32(len(value))
				if n <= c && c-n <= maxSlack {
					t.seq++
					binary.LittleEndian.PutUint64(r, meta(t.seq, KindMapEntry, 0))
					binary.LittleEndian.PutUint16(r[10:], uint16(c-n))
					binary.LittleEndian.PutUint32(r[12:], n)
					copy(r[entryHdrSize+uint32(len(userKey)):], value)
					return nil
				}
			}
		}
	}
	return t.mapAppend(hm, mapKey, hu32, userKey, value, 0)
}

// MapRemove removes userKey (hash hu) from the map of mapKey (hash hm) with
// an entry tombstone, as Flink's MapState.remove; in place when the entry
// is in the active segment. A no-op when the active segment's header is
// base (cleared) and holds no entry for userKey. Errors as Put.
func (t *Table) MapRemove(hm uint64, mapKey []byte, hu uint64, userKey []byte) error {
	if err := t.checkMap(mapKey, userKey, nil); err != nil {
		return err
	}
	hu32 := uint32(hu >> 32)
	if s := t.active; s != nil {
		if _, hdr, _ := s.mapHeader(hm, mapKey); hdr != 0 {
			_, e := s.findEntry(entryHash(hdr, hu32), hdr, userKey)
			if e == 0 && s.data[hdr+7]>>4&FlagBase != 0 {
				return nil
			}
			if e != 0 {
				r := s.data[e:]
				c := binary.LittleEndian.Uint32(r[12:]) + uint32(binary.LittleEndian.Uint16(r[10:]))
				if c <= maxSlack {
					t.seq++
					binary.LittleEndian.PutUint64(r, meta(t.seq, KindMapEntry, FlagTomb))
					binary.LittleEndian.PutUint16(r[10:], uint16(c))
					binary.LittleEndian.PutUint32(r[12:], 0)
					return nil
				}
			}
		}
	}
	return t.mapAppend(hm, mapKey, hu32, userKey, nil, FlagTomb)
}

// mapAppend appends an entry (flags 0 or FlagTomb) to the map's header in
// the active segment, creating the header when needed.
func (t *Table) mapAppend(hm uint64, mapKey []byte, hu32 uint32, userKey, value []byte, flags uint8) error {
	esize := entrySize(userKey, value)
	s, _, err := t.prepare(headerSize(mapKey)+esize, 2)
	if err != nil {
		return err
	}
	t.seq++
	hpos, hdr, shadow := s.mapHeader(hm, mapKey)
	if hdr == 0 {
		// A tombstone of the key in this segment hides older segments:
		// the new header is base. It takes its own sequence number, older
		// than the entry's (a base header is a map tombstone to the
		// lower tiers).
		var hflags uint8
		if shadow {
			hflags = FlagBase
		}
		hdr = t.newHeader(s, hm, mapKey, hflags, hpos, shadow)
		t.seq++
	}
	he := entryHash(hdr, hu32)
	epos, old := s.findEntry(he, hdr, userKey)
	off := s.alloc(esize)
	r := s.data[off : off+esize]
	binary.LittleEndian.PutUint64(r, meta(t.seq, KindMapEntry, flags))
	binary.LittleEndian.PutUint16(r[8:], uint16(len(userKey)))
	binary.LittleEndian.PutUint16(r[10:], 0)
	binary.LittleEndian.PutUint32(r[12:], uint32(len(value)))
	binary.LittleEndian.PutUint32(r[16:], hdr)
	binary.LittleEndian.PutUint32(r[20:], binary.LittleEndian.Uint32(s.data[hdr+12:]))
	binary.LittleEndian.PutUint32(r[24:], hu32)
	copy(r[entryHdrSize:], userKey)
	copy(r[entryHdrSize+len(userKey):], value)
	binary.LittleEndian.PutUint32(s.data[hdr+12:], off)
	if old != 0 {
		s.setSlot(epos, off)
		s.markDead(old, t.seq)
	} else {
		s.insert(he, off)
	}
	return nil
}

// newHeader appends a map header; when replace, it repoints the index slot
// at pos and kills the record it pointed to (with its entries).
func (t *Table) newHeader(s *segment, hm uint64, mapKey []byte, flags uint8, pos uint32, replace bool) uint32 {
	size := headerSize(mapKey)
	off := s.alloc(size)
	r := s.data[off : off+size]
	binary.LittleEndian.PutUint64(r, meta(t.seq, KindMapHeader, flags))
	binary.LittleEndian.PutUint16(r[8:], uint16(len(mapKey)))
	binary.LittleEndian.PutUint16(r[10:], 0)
	binary.LittleEndian.PutUint32(r[12:], 0)
	copy(r[keyHdrSize:], mapKey)
	if replace {
		_, old := s.findKey(hm, mapKey)
		s.setSlot(pos, off)
		s.kill(old, t.seq)
	} else {
		s.insert(hm, off)
	}
	return off
}

// MapClear clears the map of mapKey (hash hm), as Flink's MapState.clear:
// a base map header with no entries, which hides the entries of the
// segment's previous header and of all older segments. A no-op when the
// active segment's header is already base and empty. Errors as Put.
func (t *Table) MapClear(hm uint64, mapKey []byte) error {
	if err := t.checkKV(mapKey, nil); err != nil {
		return err
	}
	if s := t.active; s != nil {
		if _, hdr, _ := s.mapHeader(hm, mapKey); hdr != 0 &&
			s.data[hdr+7]>>4&FlagBase != 0 && binary.LittleEndian.Uint32(s.data[hdr+12:]) == 0 {
			return nil
		}
	}
	s, _, err := t.prepare(headerSize(mapKey), 1)
	if err != nil {
		return err
	}
	t.seq++
	pos, old := s.findKey(hm, mapKey)
	t.newHeader(s, hm, mapKey, FlagBase, pos, old != 0)
	return nil
}

// MapIter iterates the live entries of one map, newest segment first:
// within a segment it follows the header's chain (newest entry first) and
// skips dead and tombstoned entries; an entry of an older segment is
// yielded only when no newer segment holds a record (entry or tombstone)
// for its user key, and segments older than a base (cleared) header or a
// key-level tombstone are not visited. The order is unspecified.
//
// Writes to the Table during iteration are allowed and do not disturb it:
// the iteration covers the entries as they were when MapIter was called.
// An entry that existed then is yielded exactly once: with its value at
// that time if a write appended a newer version of it before it was
// reached (the superseded record keeps its bytes, and markDead stamps it
// with the superseding write's sequence number, newer than the
// iteration's), or with the value written in place. An entry removed in
// place before it is reached is skipped; entries added during the
// iteration are not yielded. Records appended during the iteration (at or
// past the active segment's bump pointer at the start, or in segments
// rolled since) are never examined. The entry returned by UserKey/Value
// is valid until the next write or Next. A MapIter is a value: creating
// and using one allocates nothing.
type MapIter struct {
	t      *Table
	hm     uint64
	mapKey []byte
	level  int    // index in t.segs of the segment being walked
	top    int    // newest segment when the iteration started
	bottom int    // oldest segment to visit
	hdr    uint32 // header of the map in segs[level]
	next   uint32 // next entry of the chain to examine
	uk, v  []byte

	seq     uint64 // Table.Seq when the iteration started
	topUsed uint32 // segs[top]'s bump pointer then
	topHdr  uint32 // the map's header in segs[top] then (0 = none)
	topHead uint32 // that header's newest entry then

	complete bool  // a base header or key tombstone bounds the iteration
	dropped  int64 // Table.dropped when the indices above were taken
	err      error // ErrSegmentDropped: a needed segment was dropped
}

// MapIter returns an iterator over the map of mapKey (hash hm). mapKey must
// stay unchanged while the iterator is used.
func (t *Table) MapIter(hm uint64, mapKey []byte) MapIter {
	it := MapIter{t: t, hm: hm, mapKey: mapKey, top: len(t.segs) - 1, level: len(t.segs), seq: t.seq, dropped: t.dropped}
	for i := it.top; i >= 0; i-- {
		_, hdr, shadow := t.segs[i].mapHeader(hm, mapKey)
		if i == it.top {
			it.topUsed, it.topHdr = t.segs[i].used, hdr
			if hdr != 0 {
				it.topHead = binary.LittleEndian.Uint32(t.segs[i].data[hdr+12:])
			}
		}
		if shadow {
			it.bottom, it.complete = i+1, true
			break
		}
		if hdr != 0 && t.segs[i].data[hdr+7]>>4&FlagBase != 0 {
			it.bottom, it.complete = i, true
			break
		}
	}
	return it
}

// Next advances to the next live entry and reports whether there is one.
func (it *MapIter) Next() bool {
	t := it.t
	if it.level < 0 || t == nil {
		return false // done, or the zero MapIter
	}
	if it.dropped != t.dropped && !it.rebase() {
		return false
	}
	for {
		if it.next == 0 {
			it.level--
			if it.level < it.bottom || it.level >= len(t.segs) {
				it.uk, it.v = nil, nil
				it.level = -1
				it.bottom = 0
				return false
			}
			if it.level == it.top {
				// The only segment that may have changed since the
				// start: walk its chain as it was then.
				it.hdr, it.next = it.topHdr, it.topHead
				continue
			}
			_, it.hdr, _ = t.segs[it.level].mapHeader(it.hm, it.mapKey)
			if it.hdr == 0 {
				continue
			}
			it.next = binary.LittleEndian.Uint32(t.segs[it.level].data[it.hdr+12:])
			continue
		}
		s := t.segs[it.level]
		e := it.next
		r := s.data[e:]
		it.next = binary.LittleEndian.Uint32(r[20:])
		m := binary.LittleEndian.Uint64(r)
		if f := uint8(m >> 60); f&FlagTomb != 0 || f&FlagDead != 0 && m&seqMask <= it.seq&seqMask {
			continue // removed, or superseded before the iteration started
		}
		klen := uint32(binary.LittleEndian.Uint16(r[8:]))
		uk := r[entryHdrSize : entryHdrSize+klen : entryHdrSize+klen]
		if it.shadowed(binary.LittleEndian.Uint32(r[24:]), uk) {
			continue
		}
		vend := entryHdrSize + klen + binary.LittleEndian.Uint32(r[12:])
		it.uk, it.v = uk, r[entryHdrSize+klen:vend:vend]
		return true
	}
}

// rebase shifts the iterator's segment indices after DropSealed removed
// the oldest segments, or ends the iteration with ErrSegmentDropped when
// it still needed one of them.
//
//go:noinline
func (it *MapIter) rebase() bool {
	d := int(it.t.dropped - it.dropped)
	it.dropped = it.t.dropped
	if it.bottom < d {
		it.err = fmt.Errorf("%w: the map iteration still needed %d of the %d segments dropped since it started",
			ErrSegmentDropped, d-it.bottom, d)
		it.uk, it.v, it.level, it.bottom, it.complete = nil, nil, -1, 0, false
		return false
	}
	it.level -= d
	it.top -= d
	it.bottom -= d
	return true
}

// Err returns ErrSegmentDropped (wrapped) when the iteration ended because
// DropSealed removed a segment it had not finished with (the map's older
// entries moved to the lower tier; start a new iteration across tiers);
// nil otherwise.
func (it *MapIter) Err() error { return it.err }

// shadowed reports whether a segment newer than it.level (up to it.top)
// held a record for the user key when the iteration started.
func (it *MapIter) shadowed(hu32 uint32, uk []byte) bool {
	for i := it.level + 1; i <= it.top && i < len(it.t.segs); i++ {
		s := it.t.segs[i]
		var hdr uint32
		if i == it.top {
			hdr = it.topHdr
		} else {
			_, hdr, _ = s.mapHeader(it.hm, it.mapKey)
		}
		if hdr == 0 {
			continue
		}
		_, e := s.findEntry(entryHash(hdr, hu32), hdr, uk)
		if e == 0 {
			continue
		}
		if e < it.topUsed || i < it.top {
			return true
		}
		// The index points at a version appended during the iteration;
		// an older one may have been there at the start. Rare (a write
		// to an entry not yet reached), so walk the chain as it was.
		for o := it.topHead; o != 0; o = binary.LittleEndian.Uint32(s.data[o+20:]) {
			klen := uint32(binary.LittleEndian.Uint16(s.data[o+8:]))
			if binary.LittleEndian.Uint32(s.data[o+24:]) == hu32 && klen == uint32(len(uk)) &&
				string(s.data[o+entryHdrSize:o+entryHdrSize+klen]) == string(uk) {
				return true
			}
		}
	}
	return false
}

// Complete reports whether the iteration is bounded by a base (cleared)
// map header or a key-level tombstone in the FreshTable, so that the lower
// tiers hold nothing of the map that the iteration does not hide: the map
// as it was when MapIter was called is entirely the entries yielded. When
// false, older entries may live in the lower tiers (those of user keys the
// iteration yielded, or skipped as removed, are shadowed by it: MapGet
// reports Found or Deleted for them). Fixed when the
// MapIter is created; valid at any time, typically read after Next
// returned false.
func (it *MapIter) Complete() bool { return it.complete }

// UserKey returns the current entry's user key (aliases segment memory).
func (it *MapIter) UserKey() []byte { return it.uk }

// Value returns the current entry's value (aliases segment memory).
func (it *MapIter) Value() []byte { return it.v }
