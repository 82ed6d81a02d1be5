package fresh

import (
	"fmt"

	"github.com/strata-db/strata/internal/base"
)

// Key scans (doc.go, "Scans"): the engine's ordered scan of every key
// (Flink's getKeys) reads each segment through a sorted index of record
// offsets that it keeps across its steps, with writes in between. A sealed
// segment never changes, so its handle serves; the active segment changes
// with every write — records appended past the bump pointer, values and
// flags rewritten in place — so the scan takes a view of it at each step
// and indexes only the records appended since the last one.

// ScanSegments appends to dst a handle for every segment on the read path,
// oldest first, and returns the extended slice: the sealed segments'
// handles (as Sealed returns them) and, last, when there is an active
// segment holding records, a view of it.
//
// A view is a SealedSegment over the active segment's records written so
// far, for the owner goroutine only and valid only until the next write:
// later writes extend the segment, rewrite values, tombstones, list chunks
// and map entries in place (a value may become a tombstone, an entry an
// entry tombstone) and mark records FlagDead, so an offset that held a
// live record may hold a dead one at the next view (LiveEntryAt says so),
// while an offset never moves, never changes its key and is never reused
// while the segment is on the read path. Each call refreshes the view
// (one per segment, reused: its length and the sequence number its
// records' 56-bit numbers widen against). A view is never dropped: the
// caller must stop using it, and every offset it read, once the segment
// leaves ScanSegments (Same matches a segment's view and, after a roll or
// Seal, its handle). Entries, EntriesFrom, EntryAt and LiveEntryAt work on
// a view as on a handle. Owner goroutine only; allocation-free but for the
// first view of a segment and dst's growth.
func (t *Table) ScanSegments(dst []*SealedSegment) []*SealedSegment {
	for _, s := range t.segs {
		if s.sealed {
			if s.handle == nil {
				s.handle = &SealedSegment{seg: s, data: s.data[:s.used:s.used], seqBase: t.seq}
			}
			dst = append(dst, s.handle)
			continue
		}
		if s.used <= segHeaderSize {
			continue
		}
		if s.view == nil {
			s.view = &SealedSegment{seg: s}
		}
		s.view.data, s.view.seqBase = s.data[:s.used:s.used], t.seq
		dst = append(dst, s.view)
	}
	return dst
}

// Same reports whether s and o describe the same segment: the same handle,
// or the view ScanSegments took of the active segment and the handle (or a
// later view) of that segment. Owner goroutine only.
func (s *SealedSegment) Same(o *SealedSegment) bool { return s != nil && o != nil && s.seg == o.seg }

// EntriesFrom is Entries starting at off, which must be the offset of a
// record (the DataBytes of an earlier view of the same segment: records
// tile a segment, so where a view ended the next record begins) or the
// segment's length. Same rules as Entries.
func (s *SealedSegment) EntriesFrom(off uint32) *SealedIter {
	it := s.Entries()
	if it.err == nil {
		it.off = max(off, segHeaderSize)
	}
	return it
}

// LiveEntryAt returns the entry of the record at off, an offset a
// SealedIter of this segment reported, as Entries yields it, and live =
// false when Entries would skip the record now: on a view, a record a
// later write marked FlagDead. Other offsets give an error wrapping
// base.ErrCorruption or a meaningless entry. Same rules as EntryAt.
func (s *SealedSegment) LiveEntryAt(off uint32) (base.Entry, bool, error) {
	if s.dropped.Load() {
		return base.Entry{}, false, fmt.Errorf("%w: entry of a dropped segment", ErrSegmentDropped)
	}
	e, _, _, live, err := s.decode(off)
	if err != nil {
		return e, false, fmt.Errorf("segment entry at %d: %w", off, err)
	}
	return e, live, nil
}
