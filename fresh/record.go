package fresh

import (
	"encoding/binary"
	"fmt"

	"github.com/strata-db/strata/internal/base"
)

// RecordKind is the kind of a record in a segment (low 4 bits of byte 7 of
// the record header). Part of the segment format; do not change.
type RecordKind uint8

const (
	// KindValue is a KV value (value, reducing, aggregating state).
	KindValue RecordKind = 1
	// KindTombstone is a key-level tombstone (Delete, ListDelete,
	// ListReplace with an empty batch).
	KindTombstone RecordKind = 2
	// KindListChunk is one batch of list elements (KLIST).
	KindListChunk RecordKind = 3
	// KindMapHeader is the per-segment header of one (key, namespace) map
	// (KMAP).
	KindMapHeader RecordKind = 4
	// KindMapEntry is one user key of a map, or its tombstone.
	KindMapEntry RecordKind = 5
)

// String names the kind.
func (k RecordKind) String() string {
	switch k {
	case KindValue:
		return "value"
	case KindTombstone:
		return "tombstone"
	case KindListChunk:
		return "list-chunk"
	case KindMapHeader:
		return "map-header"
	case KindMapEntry:
		return "map-entry"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Record flags (high 4 bits of byte 7 of the record header). Part of the
// segment format; do not change.
const (
	// FlagBase on a list chunk or map header: nothing older (older chunks,
	// older segments) belongs to the list or map.
	FlagBase uint8 = 1 << 0
	// FlagTomb on a map entry: the user key is removed.
	FlagTomb uint8 = 1 << 1
	// FlagDead: the record was superseded inside its own segment; it is
	// garbage and no index slot points to it.
	FlagDead uint8 = 1 << 2
)

// Layout constants; see doc.go for the drawings.
const (
	segHeaderSize = 16
	segMagic      = 0x53524653 // "SFRS" little endian: Strata FReSh segment
	segVersion    = 1

	keyHdrSize   = 16 // value, tombstone, chunk, map header: meta, klen, slack, vlen|head
	chunkPrevLen = 4  // a chunk stores prev (u32) right after its key
	entryHdrSize = 28 // meta, uklen, slack, vlen, hdr, next, hu32

	seqBits = 56
	seqMask = 1<<seqBits - 1

	maxSlack = 0xFFFF
)

// meta packs sequence number, kind and flags into the first 8 bytes.
func meta(seq uint64, kind RecordKind, flags uint8) uint64 {
	return seq&seqMask | uint64(kind)<<56 | uint64(flags)<<60
}

// Record is a decoded record; its byte slices alias the segment.
type Record struct {
	Kind  RecordKind
	Flags uint8  // FlagBase, FlagTomb, FlagDead
	Seq   uint64 // low 56 bits of the write's sequence number
	// Key is the composite key (KV, list, map header) or the user key
	// (map entry).
	Key []byte
	// Value is the value (KV), the batch (list chunk) or the value of a
	// map entry; nil for tombstones and map headers.
	Value []byte
	// Cap is the value capacity in bytes (len(Value) + slack).
	Cap int
	// Link is the previous chunk of the same list (list chunk), the next
	// older entry of the header's chain (map entry), or the newest entry
	// (map header); 0 = none.
	Link uint32
	// Header is the offset of the map header of a map entry.
	Header uint32
	// UserKeyHash is the high 32 bits of a map entry's user-key hash.
	UserKeyHash uint32
	// Size is the number of bytes the record occupies in the segment.
	Size uint32
}

func corrupt(off uint32, format string, args ...any) error {
	return base.Corrupt("", int64(off), nil, "record: "+format, args...)
}

// DecodeRecord validates and decodes the record at offset off of a
// segment's bytes seg (the whole segment: seg[0] is the segment header, and
// seg must be cut at the segment's used length for a strict check). It
// checks bounds, the kind, the flags allowed for the kind, lengths, and
// that links point backwards (chunks, entries) or forwards (header to
// newest entry) inside seg. Any violation is an error wrapping
// base.ErrCorruption (a *base.CorruptionError with the offset); it never
// panics.
func DecodeRecord(seg []byte, off uint32) (Record, error) {
	var r Record
	n := uint64(len(seg))
	if off < segHeaderSize {
		return r, corrupt(off, "offset inside segment header")
	}
	if uint64(off)+keyHdrSize > n {
		return r, corrupt(off, "header past end of segment (%d bytes)", n)
	}
	b := seg[off:]
	m := binary.LittleEndian.Uint64(b)
	r.Seq = m & seqMask
	r.Kind = RecordKind(m >> 56 & 0xF)
	r.Flags = uint8(m >> 60)
	klen := uint64(binary.LittleEndian.Uint16(b[8:]))
	slack := uint64(binary.LittleEndian.Uint16(b[10:]))
	vlen := uint64(binary.LittleEndian.Uint32(b[12:]))
	rest := n - uint64(off)
	switch r.Kind {
	case KindValue, KindTombstone:
		if r.Flags&^FlagDead != 0 {
			return r, corrupt(off, "flags %#x not allowed on %v", r.Flags, r.Kind)
		}
		if r.Kind == KindTombstone && vlen != 0 {
			return r, corrupt(off, "tombstone with value length %d", vlen)
		}
		size := keyHdrSize + klen + vlen + slack
		if size > rest {
			return r, corrupt(off, "%v of %d bytes past end of segment", r.Kind, size)
		}
		r.Key = b[keyHdrSize : keyHdrSize+klen : keyHdrSize+klen]
		if r.Kind == KindValue {
			r.Value = b[keyHdrSize+klen : keyHdrSize+klen+vlen : keyHdrSize+klen+vlen]
		}
		r.Cap = int(vlen + slack)
		r.Size = uint32(size)
	case KindListChunk:
		if r.Flags&^(FlagDead|FlagBase) != 0 {
			return r, corrupt(off, "flags %#x not allowed on %v", r.Flags, r.Kind)
		}
		size := keyHdrSize + klen + chunkPrevLen + vlen + slack
		if size > rest {
			return r, corrupt(off, "%v of %d bytes past end of segment", r.Kind, size)
		}
		r.Key = b[keyHdrSize : keyHdrSize+klen : keyHdrSize+klen]
		p := keyHdrSize + klen
		r.Link = binary.LittleEndian.Uint32(b[p:])
		if r.Link != 0 && (r.Link < segHeaderSize || r.Link >= off) {
			return r, corrupt(off, "list chunk links forward or out of segment to %d", r.Link)
		}
		if vlen == 0 {
			return r, corrupt(off, "empty list chunk")
		}
		r.Value = b[p+chunkPrevLen : p+chunkPrevLen+vlen : p+chunkPrevLen+vlen]
		r.Cap = int(vlen + slack)
		r.Size = uint32(size)
	case KindMapHeader:
		if r.Flags&^(FlagDead|FlagBase) != 0 {
			return r, corrupt(off, "flags %#x not allowed on %v", r.Flags, r.Kind)
		}
		if slack != 0 {
			return r, corrupt(off, "map header with reserved bytes %#x", slack)
		}
		size := keyHdrSize + klen
		if size > rest {
			return r, corrupt(off, "%v of %d bytes past end of segment", r.Kind, size)
		}
		r.Key = b[keyHdrSize : keyHdrSize+klen : keyHdrSize+klen]
		r.Link = uint32(vlen)
		if r.Link != 0 && (uint64(r.Link) < uint64(off)+size || uint64(r.Link) >= n) {
			return r, corrupt(off, "map header's newest entry %d out of range", r.Link)
		}
		r.Size = uint32(size)
	case KindMapEntry:
		if r.Flags&^(FlagDead|FlagTomb) != 0 {
			return r, corrupt(off, "flags %#x not allowed on %v", r.Flags, r.Kind)
		}
		if r.Flags&FlagTomb != 0 && vlen != 0 {
			return r, corrupt(off, "map entry tombstone with value length %d", vlen)
		}
		size := entryHdrSize + klen + vlen + slack
		if size > rest {
			return r, corrupt(off, "%v of %d bytes past end of segment", r.Kind, size)
		}
		r.Header = binary.LittleEndian.Uint32(b[16:])
		r.Link = binary.LittleEndian.Uint32(b[20:])
		r.UserKeyHash = binary.LittleEndian.Uint32(b[24:])
		if r.Header < segHeaderSize || r.Header >= off {
			return r, corrupt(off, "map entry's header %d out of range", r.Header)
		}
		if r.Link != 0 && (r.Link < segHeaderSize || r.Link >= off) {
			return r, corrupt(off, "map entry links forward or out of segment to %d", r.Link)
		}
		r.Key = b[entryHdrSize : entryHdrSize+klen : entryHdrSize+klen]
		if r.Flags&FlagTomb == 0 {
			r.Value = b[entryHdrSize+klen : entryHdrSize+klen+vlen : entryHdrSize+klen+vlen]
		}
		r.Cap = int(vlen + slack)
		r.Size = uint32(size)
	default:
		return r, corrupt(off, "unknown kind %d", uint8(r.Kind))
	}
	return r, nil
}

// DecodeSegmentHeader checks the 16-byte segment header: magic, then
// version, then the reserved bytes, each failure a distinct error wrapping
// base.ErrCorruption (base.ErrTruncated, base.ErrBadMagic,
// base.ErrFormatVersion, or no cause for the reserved bytes and the limit). It returns the data limit the segment was written with.
func DecodeSegmentHeader(seg []byte) (limit uint32, err error) {
	if len(seg) < segHeaderSize {
		return 0, base.Corrupt("", 0, base.ErrTruncated, "segment of %d bytes has no header", len(seg))
	}
	if m := binary.LittleEndian.Uint32(seg); m != segMagic {
		return 0, base.Corrupt("", 0, base.ErrBadMagic, "segment magic %#x", m)
	}
	if v := binary.LittleEndian.Uint16(seg[4:]); v != segVersion {
		return 0, base.Corrupt("", 4, base.ErrFormatVersion, "segment version %d", v)
	}
	if binary.LittleEndian.Uint16(seg[6:]) != 0 || binary.LittleEndian.Uint32(seg[12:]) != 0 {
		return 0, base.Corrupt("", 6, nil, "reserved segment header bytes set")
	}
	limit = binary.LittleEndian.Uint32(seg[8:])
	if limit < segHeaderSize {
		return 0, base.Corrupt("", 8, nil, "segment data limit %d below header size", limit)
	}
	return limit, nil
}

func putSegmentHeader(seg []byte, limit uint32) {
	binary.LittleEndian.PutUint32(seg, segMagic)
	binary.LittleEndian.PutUint16(seg[4:], segVersion)
	binary.LittleEndian.PutUint16(seg[6:], 0)
	binary.LittleEndian.PutUint32(seg[8:], limit)
	binary.LittleEndian.PutUint32(seg[12:], 0)
}
