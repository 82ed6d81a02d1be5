package fresh

import (
	"encoding/binary"
	"fmt"

	"github.com/strata-db/strata/internal/base"
)

// Verify checks the invariants of every segment (see doc.go): the segment
// header, that records tile the used bytes exactly and each decodes, that
// every index slot points at the start of a live record of a key-level
// kind or a map entry, that the slot count and garbage figures match, and
// that each map header's chain holds only entries of that header. Errors
// wrap base.ErrCorruption (a *base.CorruptionError; no file: segments live
// in memory). O(data); for tests and debugging.
func (t *Table) Verify() error {
	for si, s := range t.segs {
		data := s.data[:s.used]
		if _, err := DecodeSegmentHeader(data); err != nil {
			return fmt.Errorf("segment %d: %w", si, err)
		}
		starts := make(map[uint32]Record)
		var dead, deadBytes, n int64
		for off := uint32(segHeaderSize); off < s.used; {
			r, err := DecodeRecord(data, off)
			if err != nil {
				return fmt.Errorf("segment %d: %w", si, err)
			}
			if r.Flags&FlagDead != 0 {
				dead++
				deadBytes += int64(r.Size)
			}
			n++
			starts[off] = r
			off += r.Size
		}
		if n != s.records || dead != s.deadRecords || deadBytes != s.deadBytes {
			return base.Corrupt("", -1, nil, "segment %d: %d records (%d dead, %d bytes), stats say %d (%d, %d)", si, n, dead, deadBytes, s.records, s.deadRecords, s.deadBytes)
		}
		var full uint32
		for g := 0; g < len(s.idx); g += groupBytes {
			for j := 0; j < groupSlots; j++ {
				if s.idx[g+j]&ctrlFull == 0 {
					continue
				}
				full++
				off := binary.LittleEndian.Uint32(s.idx[g+grpOffs+4*j:])
				r, ok := starts[off]
				if !ok {
					return base.Corrupt("", -1, nil, "segment %d: index slot points at %d, not a record", si, off)
				}
				if r.Flags&FlagDead != 0 && (r.Kind != KindMapEntry || starts[r.Header].Flags&FlagDead == 0) {
					// Only entries of a dead (cleared) map header stay indexed
					// after they die: no lookup reaches them any more.
					return base.Corrupt("", -1, nil, "segment %d: index slot points at dead record %d", si, off)
				}
				if r.Kind == KindMapEntry {
					if h, ok := starts[r.Header]; !ok || h.Kind != KindMapHeader {
						return base.Corrupt("", -1, nil, "segment %d: entry %d has no map header at %d", si, off, r.Header)
					}
				}
			}
		}
		if full != s.count {
			return base.Corrupt("", -1, nil, "segment %d: %d full slots, count %d", si, full, s.count)
		}
		for off, r := range starts {
			if r.Kind != KindMapHeader {
				continue
			}
			for e := r.Link; e != 0; {
				er, ok := starts[e]
				if !ok || er.Kind != KindMapEntry || er.Header != off {
					return base.Corrupt("", -1, nil, "segment %d: map header %d chains to %d, not its entry", si, off, e)
				}
				e = er.Link
			}
		}
	}
	return nil
}
