package fresh

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"

	"github.com/strata-db/strata/internal/base"
)

// SealedSegment is a handle to one sealed segment of a Table, for the
// background transform (see doc.go, Transform). The segment's bytes never
// change after it is sealed (invariant 4), so Entries and DataBytes may be
// used from any goroutine, concurrently with the owner's writes to the
// active segment, until the owner drops the segment (Table.DropSealed) or
// closes the Table — or, when it was dropped while the sealed segments
// were pinned (Table.PinSealed), until the last Table.UnpinSealed: the
// caller must not drop, unpin or close while a goroutine still uses the
// handle or entries read from it. The same segment always has the same
// handle.
type SealedSegment struct {
	seg     *segment    // owner goroutine only: identity for DropSealed
	data    []byte      // the segment's used bytes; immutable
	seqBase uint64      // Table.Seq when the handle was made: no record is newer
	dropped atomic.Bool // set by DropSealed and Close
}

// DataBytes returns the bytes used in the segment (header, records,
// garbage). Safe from any goroutine.
func (s *SealedSegment) DataBytes() int64 { return int64(len(s.data)) }

// Entries returns an iterator over the live records of the segment, in
// segment order (oldest record first; not sorted), as entries:
//
//	value                          → KindValue
//	tombstone                      → KindTombstone
//	list chunk with FlagBase       → KindListBase (Value = the chunk's batches)
//	list chunk                     → KindListAppend
//	map header with FlagBase       → KindTombstone of the map key (cleared map)
//	map header                     → nothing (its entries stack on older ones)
//	map entry                      → KindMapEntry, Key = the map key, UserKey
//	map entry with FlagTomb        → KindMapEntryTombstone
//
// Records marked FlagDead (superseded inside the segment) are skipped.
// Seq is the record's sequence number (its last write, for records
// rewritten in place); Hash, Order and UserHash are left 0 for the caller,
// which knows its hash functions. Key, UserKey and Value alias the
// segment's memory: valid until the segment is dropped, whatever Next
// does. A record that fails to decode stops the iteration with an error
// wrapping base.ErrCorruption; a handle already dropped yields nothing and
// reports ErrSegmentDropped. Safe to call and use from a background
// goroutine while the owner writes the Table (each iterator by one
// goroutine).
func (s *SealedSegment) Entries() *SealedIter {
	it := &SealedIter{s: s, data: s.data, off: segHeaderSize}
	if s.dropped.Load() {
		it.err = fmt.Errorf("%w: entries of a dropped segment", ErrSegmentDropped)
		it.off = uint32(len(s.data))
	}
	return it
}

// SealedIter is the base.Iterator of SealedSegment.Entries. Besides the
// entry it reports the record's offset (Offset), which EntryAt decodes
// again later: a transform keeps 4 bytes per record instead of the entry.
type SealedIter struct {
	s    *SealedSegment
	data []byte
	off  uint32 // next record
	cur  uint32 // the record Entry describes
	kref uint32 // its key's record (KeyRef)
	e    base.Entry
	err  error
}

// seq widens a record's 56-bit sequence number to the Table's 64 bits: no
// record of the segment is newer than seqBase.
func (s *SealedSegment) seq(low uint64) uint64 {
	b := s.seqBase
	v := b&^uint64(seqMask) | low
	if v > b {
		v -= 1 << seqBits
	}
	return v
}

// decode returns the entry of the record at off as Entries yields it, the
// record's size, and live = false for a record Entries skips (dead, or a
// map header without FlagBase).
//
// kref is the offset of the record holding the entry's key: the map header
// for a map entry, the record itself otherwise.
func (s *SealedSegment) decode(off uint32) (e base.Entry, size, kref uint32, live bool, err error) {
	data := s.data
	r, err := DecodeRecord(data, off)
	if err != nil {
		return e, 0, 0, false, err
	}
	if r.Flags&FlagDead != 0 {
		return e, r.Size, off, false, nil
	}
	e = base.Entry{Seq: s.seq(r.Seq), Key: r.Key, Value: r.Value}
	kref = off
	switch r.Kind {
	case KindValue:
		e.Kind = base.KindValue
	case KindTombstone:
		e.Kind = base.KindTombstone
	case KindListChunk:
		e.Kind = base.KindListAppend
		if r.Flags&FlagBase != 0 {
			e.Kind = base.KindListBase
		}
	case KindMapHeader:
		if r.Flags&FlagBase == 0 {
			return e, r.Size, off, false, nil
		}
		e.Kind = base.KindTombstone
	case KindMapEntry:
		h, err := DecodeRecord(data, r.Header)
		if err == nil && h.Kind != KindMapHeader {
			err = corrupt(off, "map entry's header %d is a %v", r.Header, h.Kind)
		}
		if err != nil {
			return e, 0, 0, false, err
		}
		e.Key, e.UserKey = h.Key, r.Key
		kref = r.Header
		e.Kind = base.KindMapEntry
		if r.Flags&FlagTomb != 0 {
			e.Kind = base.KindMapEntryTombstone
		}
	}
	return e, r.Size, kref, true, nil
}

// EntryAt returns the entry of the record at off, an offset a SealedIter of
// this segment reported (Offset): the entry its Next yielded there. Other
// offsets give an error wrapping base.ErrCorruption or a meaningless entry. Same
// rules as Entries for goroutines and the life of the bytes.
func (s *SealedSegment) EntryAt(off uint32) (base.Entry, error) {
	if s.dropped.Load() {
		return base.Entry{}, fmt.Errorf("%w: entry of a dropped segment", ErrSegmentDropped)
	}
	e, _, _, live, err := s.decode(off)
	if err != nil {
		return e, fmt.Errorf("sealed segment entry at %d: %w", off, err)
	}
	if !live {
		return e, fmt.Errorf("sealed segment entry at %d: %w", off, corrupt(off, "not a live record"))
	}
	return e, nil
}

// KeyRef returns the offset of the record that holds the current entry's key
// (the map header of a map entry, the record itself otherwise): two entries
// of the segment with the same KeyRef have the same Key (different KeyRefs
// may still have equal keys), so a transform can order the entries of one
// map without comparing their keys.
func (it *SealedIter) KeyRef() uint32 { return it.kref }

// Touch reads and returns the first byte of the record at off (0 past the end
// of the segment). A transform that decodes records in another order than
// the segment's touches a batch of records before decoding them, so that
// their cache misses overlap instead of queueing one after the other.
func (s *SealedSegment) Touch(off uint32) byte {
	if off < uint32(len(s.data)) {
		return s.data[off]
	}
	return 0
}

// TouchHeader is Touch of the map header of the map entry at off (0 for
// other records): EntryAt of a map entry reads its header too.
func (s *SealedSegment) TouchHeader(off uint32) byte {
	d := s.data
	if uint64(off)+entryHdrSize > uint64(len(d)) || RecordKind(d[off+7]&0xF) != KindMapEntry {
		return 0
	}
	if h := binary.LittleEndian.Uint32(d[off+16:]); h < uint32(len(d)) {
		return d[h]
	}
	return 0
}

// Next advances to the next live record.
func (it *SealedIter) Next() bool {
	for it.off < uint32(len(it.data)) {
		off := it.off
		e, size, kref, live, err := it.s.decode(off)
		if err != nil {
			it.err = fmt.Errorf("sealed segment entries: %w", err)
			it.off = uint32(len(it.data))
			return false
		}
		it.off += size
		if !live {
			continue
		}
		it.e, it.cur, it.kref = e, off, kref
		return true
	}
	return false
}

// Offset returns the segment offset of the record Entry describes (for
// EntryAt).
func (it *SealedIter) Offset() uint32 { return it.cur }

// Entry returns the current entry (valid until the next Next).
func (it *SealedIter) Entry() *base.Entry { return &it.e }

// Err returns the error that ended the iteration, if any.
func (it *SealedIter) Err() error { return it.err }

// Sealed returns a handle to each sealed segment, oldest first (the order
// in which DropSealed takes them). Owner goroutine only. Nil after Close.
func (t *Table) Sealed() []*SealedSegment {
	var out []*SealedSegment
	for _, s := range t.segs {
		if !s.sealed {
			continue
		}
		if s.handle == nil {
			s.handle = &SealedSegment{seg: s, data: s.data[:s.used:s.used], seqBase: t.seq}
		}
		out = append(out, s.handle)
	}
	return out
}

// DropSealed removes the oldest sealed segment, s, from the read path and
// gives its data segment back to the Pool and its index back to the
// Budget — or, while the sealed segments are pinned (PinSealed), defers
// that until the pin count returns to 0: s, its entries and EntryAt stay
// valid for a background reader meanwhile (a checkpoint's), and the memory
// stays counted by the Budget (Stats.PinnedBytes). The caller must have
// installed the segment's entries in the lower tier first (reads then find
// them there) and must no longer use s, its entries, or values, batches
// read from the Table before the call unless the table is pinned (like a
// write, DropSealed invalidates them; a MapIter created before it reports
// ErrSegmentDropped from Err if it still needed the segment, pinned or
// not). Only the oldest sealed segment may be dropped, so that reads never
// see a gap between tiers: any other s (a newer one, one already dropped,
// or another Table's) returns an error wrapping ErrNotOldestSealed and
// changes nothing. Sequence numbers continue after drops. Owner goroutine
// only. Errors: ErrNotOldestSealed, base.ErrClosed, or a wrapped error from
// releasing the index (the segment is dropped all the same).
func (t *Table) DropSealed(s *SealedSegment) error {
	if t.closed {
		return base.ErrClosed
	}
	if s == nil || len(t.segs) == 0 || t.segs[0].handle != s || !t.segs[0].sealed {
		for i, g := range t.segs {
			if s != nil && g.handle == s {
				return fmt.Errorf("%w: segment %d of %d is not the oldest", ErrNotOldestSealed, i, len(t.segs))
			}
		}
		return fmt.Errorf("%w: not a sealed segment of this table (dropped already?)", ErrNotOldestSealed)
	}
	g := t.segs[0]
	copy(t.segs, t.segs[1:])
	t.segs[len(t.segs)-1] = nil
	t.segs = t.segs[:len(t.segs)-1]
	t.dropped++
	if t.pins > 0 {
		t.deferred = append(t.deferred, g)
		return nil
	}
	if err := t.release(g); err != nil {
		return fmt.Errorf("release index of dropped segment: %w", err)
	}
	return nil
}

// release gives a segment that left the read path back: its handle reports
// ErrSegmentDropped from then on, its data segment goes to the Pool and
// its index to the Budget.
func (t *Table) release(g *segment) error {
	if g.handle != nil {
		g.handle.dropped.Store(true)
	}
	t.pool.Put(g.region)
	err := g.iReg.Release()
	g.data, g.idx, g.region, g.iReg = nil, nil, nil, nil
	return err
}

// PinSealed pins the sealed segments: until as many UnpinSealed calls,
// DropSealed removes a segment from the read path as always but keeps its
// memory, so handles taken before (Sealed), their Entries and EntryAt stay
// readable from a background goroutine — a checkpoint writes the sealed
// segments out while the owner transforms and drops them. Pins are
// counted; the active segment is not concerned (its bytes change with
// every write; a checkpoint seals it first). O(1); owner goroutine only.
func (t *Table) PinSealed() { t.pins++ }

// UnpinSealed undoes one PinSealed; when the count returns to 0 the
// segments dropped meanwhile give their memory back (as DropSealed would
// have), and their handles report ErrSegmentDropped. The caller must make
// sure no goroutine still reads them. After Close it only counts (Close
// released everything). Panics without a matching PinSealed, or if an
// index cannot be unmapped (the mapping is ours: a broken invariant, as in
// memory.Pool.Put). Owner goroutine only; O(segments dropped while pinned).
func (t *Table) UnpinSealed() {
	if t.pins <= 0 {
		panic("strata: invariant: UnpinSealed without a matching PinSealed")
	}
	t.pins--
	if t.pins > 0 {
		return
	}
	if err := t.releaseDeferred(); err != nil {
		panic("strata: invariant: releasing the index of a segment dropped while pinned: " + err.Error())
	}
}

// releaseDeferred releases the segments DropSealed deferred, returning the
// first error.
func (t *Table) releaseDeferred() error {
	var first error
	for i, g := range t.deferred {
		if err := t.release(g); err != nil && first == nil {
			first = fmt.Errorf("release index of a segment dropped while pinned: %w", err)
		}
		t.deferred[i] = nil
	}
	t.deferred = t.deferred[:0]
	return first
}

var _ base.Iterator = (*SealedIter)(nil)
