package changelog

import (
	"encoding/binary"
	"hash/crc32"
	"math"

	"github.com/strata-db/strata/checkpoint"
	"github.com/strata-db/strata/internal/base"
)

// The changelog object format; drawn in doc.go ("Object layout").
const (
	magic         = "STRATACL"
	formatVersion = 1 // part of the format; do not change
	checksumCRC32 = 1 // checksum type 1 = CRC32C (Castagnoli); part of the format; do not change

	headerLen      = 12 // magic, version u16, checksum type u8, reserved u8
	trailerLen     = 20 // footer length u32, version u16, checksum type u8, reserved u8, crc u32, magic
	segHeaderLen   = 4  // record count u32
	recordFixed    = 11 // kind u8, key group u16, seq u64
	entryFixed     = 46 // a footer entry besides its store id
	minRecordLen   = recordFixed + 3
	maxStoreID     = checkpoint.MaxNameLen
	maxFooterBytes = 64 << 20 // a footer longer than this is damage, not a big persist

	// MinKind and MaxKind bound a record's op kind: the engine's OpKind values (OpPut 1 …
	// OpMapClear 8), recorded as they are.
	MinKind = 1
	MaxKind = 8

	// MaxRecord is the largest encoded record Append accepts (1 GiB).
	MaxRecord = 1 << 30
)

// KeyGroupRange is an inclusive range of key groups (checkpoint.KeyGroupRange).
type KeyGroupRange = checkpoint.KeyGroupRange

func contains(r KeyGroupRange, kg uint16) bool { return r.Start <= kg && kg <= r.End }
func overlaps(a, b KeyGroupRange) bool         { return a.Start <= b.End && b.Start <= a.End }

// Record is one state change as the changelog stores it. Key, UserKey and Value alias the
// bytes being replayed: they are valid only during the visit call that receives the Record.
type Record struct {
	// Kind is the engine's OpKind value (1..8).
	Kind uint8
	// KeyGroup is the key group of Key (base.KeyGroupOf), always.
	KeyGroup uint16
	// Seq is the sequence number the engine gave the change.
	Seq uint64
	// Key is the composite key; UserKey the map's user key (empty unless a map entry op);
	// Value the value or list batch (empty for deletes).
	Key, UserKey, Value []byte
}

// recordLen returns the encoded length of a record with these byte strings.
func recordLen(key, userKey, value []byte) int {
	return recordFixed + uvarintLen(uint64(len(key))) + len(key) +
		uvarintLen(uint64(len(userKey))) + len(userKey) +
		uvarintLen(uint64(len(value))) + len(value)
}

func uvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}

// putRecord writes the encoding of a record (doc.go, "Record") into dst, which is exactly
// recordLen(key, userKey, value) bytes long: Append's path into its chunk, no append, no
// allocation.
func putRecord(dst []byte, kind uint8, kg uint16, seq uint64, key, userKey, value []byte) {
	p := putHeader(dst, kind, kg, seq, len(key))
	p += copy(dst[p:], key)
	p += binary.PutUvarint(dst[p:], uint64(len(userKey)))
	p += copy(dst[p:], userKey)
	p += binary.PutUvarint(dst[p:], uint64(len(value)))
	copy(dst[p:], value)
}

// putHeader writes a record's fixed part and its key's length into dst and returns the bytes
// written (at most recordFixed + binary.MaxVarintLen64).
func putHeader(dst []byte, kind uint8, kg uint16, seq uint64, keyLen int) int {
	_ = dst[recordFixed]
	dst[0] = kind
	binary.LittleEndian.PutUint16(dst[1:], kg)
	binary.LittleEndian.PutUint64(dst[3:], seq)
	return recordFixed + binary.PutUvarint(dst[recordFixed:], uint64(keyLen))
}

// appendRecord appends the encoding of a record to dst (doc.go, "Record").
func appendRecord(dst []byte, kind uint8, kg uint16, seq uint64, key, userKey, value []byte) []byte {
	dst = append(dst, kind)
	dst = binary.LittleEndian.AppendUint16(dst, kg)
	dst = binary.LittleEndian.AppendUint64(dst, seq)
	dst = binary.AppendUvarint(dst, uint64(len(key)))
	dst = append(dst, key...)
	dst = binary.AppendUvarint(dst, uint64(len(userKey)))
	dst = append(dst, userKey...)
	dst = binary.AppendUvarint(dst, uint64(len(value)))
	return append(dst, value...)
}

// decodeRecord decodes the record at b[0:] into r, its byte strings aliasing b, and returns
// its length. base is b's offset in the object, for errors. It checks the bounds and the
// rules of one record (kind, key group of the key); not the segment's ranges.
func decodeRecord(name string, base_ int64, b []byte, r *Record) (int, error) {
	if len(b) < recordFixed {
		return 0, base.Corrupt(name, base_, base.ErrTruncated, "record header needs %d bytes, %d left", recordFixed, len(b))
	}
	r.Kind = b[0]
	r.KeyGroup = binary.LittleEndian.Uint16(b[1:])
	r.Seq = binary.LittleEndian.Uint64(b[3:])
	p := recordFixed
	var err error
	if r.Key, p, err = lengthPrefixed(name, base_, b, p, "key"); err != nil {
		return 0, err
	}
	if r.UserKey, p, err = lengthPrefixed(name, base_, b, p, "user key"); err != nil {
		return 0, err
	}
	if r.Value, p, err = lengthPrefixed(name, base_, b, p, "value"); err != nil {
		return 0, err
	}
	if r.Kind < MinKind || r.Kind > MaxKind {
		return 0, base.Corrupt(name, base_, nil, "record kind %d outside %d..%d", r.Kind, MinKind, MaxKind)
	}
	kg, ok := base.KeyGroupOf(r.Key)
	if !ok {
		return 0, base.Corrupt(name, base_, nil, "record key of %d bytes has no key group", len(r.Key))
	}
	if kg != r.KeyGroup {
		return 0, base.Corrupt(name, base_, nil, "record key group %d, its key's is %d", r.KeyGroup, kg)
	}
	return p, nil
}

func lengthPrefixed(name string, base_ int64, b []byte, p int, what string) ([]byte, int, error) {
	n, k := binary.Uvarint(b[p:])
	if k <= 0 {
		return nil, 0, base.Corrupt(name, base_+int64(p), base.ErrTruncated, "record %s length", what)
	}
	p += k
	if n > uint64(len(b)-p) {
		return nil, 0, base.Corrupt(name, base_+int64(p), base.ErrTruncated, "record %s of %d bytes, %d left", what, n, len(b)-p)
	}
	v := b[p : p+int(n) : p+int(n)]
	return v, p + int(n), nil
}

// SegmentInfo is one entry of an object's footer: where a segment is and what it holds.
type SegmentInfo struct {
	// Store is the id of the Store whose records the segment holds (its checkpoint owner).
	Store string
	// KeyGroups is the range from the smallest to the largest key group of its records.
	KeyGroups KeyGroupRange
	// MinSeq and MaxSeq are the smallest and largest sequence numbers of its records.
	MinSeq, MaxSeq uint64
	// Offset and Length place the segment in the object, in bytes.
	Offset, Length int64
	// Records is the number of records.
	Records uint32
	// CRC is the CRC32C (base.CRC32C) of the segment's Length bytes.
	CRC uint32
}

// appendHeader appends the object header.
func appendHeader(dst []byte) []byte {
	dst = append(dst, magic...)
	dst = binary.LittleEndian.AppendUint16(dst, formatVersion)
	return append(dst, checksumCRC32, 0)
}

// appendFooter appends the footer index of segs and the trailer.
func appendFooter(dst []byte, segs []SegmentInfo) []byte {
	start := len(dst)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(segs)))
	for i := range segs {
		s := &segs[i]
		dst = binary.LittleEndian.AppendUint16(dst, uint16(len(s.Store)))
		dst = append(dst, s.Store...)
		dst = binary.LittleEndian.AppendUint16(dst, s.KeyGroups.Start)
		dst = binary.LittleEndian.AppendUint16(dst, s.KeyGroups.End)
		dst = binary.LittleEndian.AppendUint64(dst, s.MinSeq)
		dst = binary.LittleEndian.AppendUint64(dst, s.MaxSeq)
		dst = binary.LittleEndian.AppendUint64(dst, uint64(s.Offset))
		dst = binary.LittleEndian.AppendUint64(dst, uint64(s.Length))
		dst = binary.LittleEndian.AppendUint32(dst, s.Records)
		dst = binary.LittleEndian.AppendUint32(dst, s.CRC)
	}
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(dst)-start))
	dst = binary.LittleEndian.AppendUint16(dst, formatVersion)
	dst = append(dst, checksumCRC32, 0)
	dst = binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], base.CRC32C))
	return append(dst, magic...)
}

// checkHeader checks the 12-byte object header: magic, version, checksum type, in that order.
func checkHeader(name string, b []byte) error {
	if len(b) < len(magic) || string(b[:len(magic)]) != magic {
		if len(b) < len(magic) {
			return base.Corrupt(name, 0, base.ErrTruncated, "object of %d bytes has no header", len(b))
		}
		return base.Corrupt(name, 0, base.ErrBadMagic, "header %q, want %q", b[:len(magic)], magic)
	}
	if len(b) < headerLen {
		return base.Corrupt(name, 0, base.ErrTruncated, "header of %d bytes, want %d", len(b), headerLen)
	}
	if v := binary.LittleEndian.Uint16(b[8:]); v != formatVersion {
		return base.Corrupt(name, 8, base.ErrFormatVersion, "changelog version %d, this code reads %d", v, formatVersion)
	}
	if ck := b[10]; ck != checksumCRC32 {
		return base.Corrupt(name, 10, base.ErrChecksumType, "checksum type %d, want %d (CRC32C)", ck, checksumCRC32)
	}
	if b[11] != 0 {
		return base.Corrupt(name, 11, nil, "reserved header byte %d, want 0", b[11])
	}
	return nil
}

// footerLenOf checks the trailer at the end of tail (the last len(tail) bytes of an object
// of size bytes) — magic, version, checksum type, then the footer length against the object's
// bounds — and returns the footer body's length, so a reader knows how many bytes to fetch.
func footerLenOf(name string, size int64, tail []byte) (int, error) {
	if len(tail) < trailerLen || size < headerLen+trailerLen {
		return 0, base.Corrupt(name, 0, base.ErrTruncated, "object of %d bytes has no room for a header and a trailer", size)
	}
	t := tail[len(tail)-trailerLen:]
	toff := size - trailerLen
	if string(t[12:]) != magic {
		return 0, base.Corrupt(name, toff+12, base.ErrBadMagic, "trailer %q, want %q", t[12:], magic)
	}
	if v := binary.LittleEndian.Uint16(t[4:]); v != formatVersion {
		return 0, base.Corrupt(name, toff+4, base.ErrFormatVersion, "changelog version %d, this code reads %d", v, formatVersion)
	}
	if ck := t[6]; ck != checksumCRC32 {
		return 0, base.Corrupt(name, toff+6, base.ErrChecksumType, "checksum type %d, want %d (CRC32C)", ck, checksumCRC32)
	}
	fl := int64(binary.LittleEndian.Uint32(t))
	if fl < 4 || fl > size-headerLen-trailerLen || fl > maxFooterBytes {
		return 0, base.Corrupt(name, toff, base.ErrTruncated, "footer of %d bytes in an object of %d", fl, size)
	}
	return int(fl), nil
}

// decodeFooter decodes the footer at the end of tail (the last len(tail) bytes of an object
// of size bytes; at least footer+trailer). Checked in the order magic, version, checksum
// type, footer length, CRC, then each entry's bounds and rules.
func decodeFooter(name string, size int64, tail []byte) ([]SegmentInfo, error) {
	fl, err := footerLenOf(name, size, tail)
	if err != nil {
		return nil, err
	}
	if len(tail) < fl+trailerLen {
		return nil, base.Corrupt(name, size-int64(len(tail)), base.ErrTruncated, "footer of %d bytes, %d read", fl, len(tail)-trailerLen)
	}
	body := tail[len(tail)-trailerLen-fl : len(tail)-4-len(magic)] // footer and trailer fields before the crc
	foff := size - trailerLen - int64(fl)
	stored := binary.LittleEndian.Uint32(tail[len(tail)-4-len(magic):])
	if got := crc32.Checksum(body, base.CRC32C); got != stored {
		return nil, base.Corrupt(name, foff, base.ErrChecksum, "footer crc32c %#08x, stored %#08x", got, stored)
	}
	b := body[:fl]
	n := binary.LittleEndian.Uint32(b)
	if uint64(n) > uint64(fl-4)/(entryFixed+1) {
		return nil, base.Corrupt(name, foff, base.ErrTruncated, "footer lists %d segments in %d bytes", n, fl)
	}
	segs := make([]SegmentInfo, n)
	p := 4
	dataEnd := size - trailerLen - int64(fl)
	for i := range segs {
		eoff := foff + int64(p)
		if len(b)-p < 2 {
			return nil, base.Corrupt(name, eoff, base.ErrTruncated, "footer entry %d", i)
		}
		sl := int(binary.LittleEndian.Uint16(b[p:]))
		p += 2
		if len(b)-p < sl+entryFixed-2 {
			return nil, base.Corrupt(name, eoff, base.ErrTruncated, "footer entry %d of %d bytes, %d left", i, sl+entryFixed, len(b)-p+2)
		}
		s := &segs[i]
		s.Store = string(b[p : p+sl])
		p += sl
		s.KeyGroups.Start = binary.LittleEndian.Uint16(b[p:])
		s.KeyGroups.End = binary.LittleEndian.Uint16(b[p+2:])
		s.MinSeq = binary.LittleEndian.Uint64(b[p+4:])
		s.MaxSeq = binary.LittleEndian.Uint64(b[p+12:])
		off := binary.LittleEndian.Uint64(b[p+20:])
		ln := binary.LittleEndian.Uint64(b[p+28:])
		s.Records = binary.LittleEndian.Uint32(b[p+36:])
		s.CRC = binary.LittleEndian.Uint32(b[p+40:])
		p += entryFixed - 2
		if off < headerLen || off > math.MaxInt64 || ln < segHeaderLen || ln > uint64(dataEnd) || off > uint64(dataEnd)-ln {
			return nil, base.Corrupt(name, eoff, base.ErrTruncated, "footer entry %d: segment [%d, +%d) outside the data [%d, %d)", i, off, ln, headerLen, dataEnd)
		}
		s.Offset, s.Length = int64(off), int64(ln)
		switch {
		case sl == 0 || checkpoint.ValidateOwner(s.Store) != nil:
			return nil, base.Corrupt(name, eoff, nil, "footer entry %d: store id %q is not an owner name", i, s.Store)
		case s.KeyGroups.Start > s.KeyGroups.End || s.MinSeq > s.MaxSeq:
			return nil, base.Corrupt(name, eoff, nil, "footer entry %d: key groups %s, seqs %d..%d", i, s.KeyGroups, s.MinSeq, s.MaxSeq)
		case s.Records == 0 || uint64(s.Records) > (ln-segHeaderLen)/minRecordLen:
			return nil, base.Corrupt(name, eoff, nil, "footer entry %d: %d records in %d bytes", i, s.Records, ln)
		}
	}
	if p != len(b) {
		return nil, base.Corrupt(name, foff+int64(p), nil, "%d bytes after the last footer entry", len(b)-p)
	}
	return segs, nil
}

// checkSegment checks the segment bytes seg (at s.Offset of the object name) against its
// footer entry — CRC first, then every record's bounds and rules: kind, key group of the key,
// key group and sequence number within the entry's ranges, sequence numbers not decreasing,
// the record count — and calls fn (if not nil) with each record in order. A record passed to
// fn aliases seg; off is its offset in seg.
func checkSegment(name string, s *SegmentInfo, seg []byte, fn func(off int, r *Record) error) error {
	if int64(len(seg)) != s.Length {
		return base.Corrupt(name, s.Offset, base.ErrTruncated, "segment of %d bytes, %d read", s.Length, len(seg))
	}
	if got := crc32.Checksum(seg, base.CRC32C); got != s.CRC {
		return base.Corrupt(name, s.Offset, base.ErrChecksum, "segment crc32c %#08x, stored %#08x", got, s.CRC)
	}
	return decodeSegment(name, s, seg, fn)
}

// decodeSegment is checkSegment after the CRC.
func decodeSegment(name string, s *SegmentInfo, seg []byte, fn func(off int, r *Record) error) error {
	if len(seg) < segHeaderLen {
		return base.Corrupt(name, s.Offset, base.ErrTruncated, "segment of %d bytes", len(seg))
	}
	if n := binary.LittleEndian.Uint32(seg); n != s.Records {
		return base.Corrupt(name, s.Offset, nil, "segment holds %d records, footer says %d", n, s.Records)
	}
	var r Record
	p := segHeaderLen
	prev := s.MinSeq
	for i := uint32(0); i < s.Records; i++ {
		roff := s.Offset + int64(p)
		start := p
		n, err := decodeRecord(name, roff, seg[p:], &r)
		if err != nil {
			return err
		}
		p += n
		switch {
		case !contains(s.KeyGroups, r.KeyGroup):
			return base.Corrupt(name, roff, nil, "record key group %d outside the segment's %s", r.KeyGroup, s.KeyGroups)
		case r.Seq < prev || r.Seq > s.MaxSeq:
			return base.Corrupt(name, roff, nil, "record seq %d out of order (previous %d, segment %d..%d)", r.Seq, prev, s.MinSeq, s.MaxSeq)
		}
		prev = r.Seq
		if fn != nil {
			if err := fn(start, &r); err != nil {
				return err
			}
		}
	}
	if p != len(seg) {
		return base.Corrupt(name, s.Offset+int64(p), nil, "%d bytes after the segment's last record", len(seg)-p)
	}
	return nil
}

// DecodeObject checks a whole changelog object — header, trailer, footer, and every segment
// with its records — and returns its footer. It is for tools, tests and fuzzing; a restore
// reads only the footer and its own segments (Replay). Errors: *base.CorruptionError naming
// name and the offset, its cause one of base.ErrBadMagic, ErrFormatVersion, ErrChecksumType,
// ErrTruncated, ErrChecksum, or none for a broken rule.
func DecodeObject(name string, data []byte) ([]SegmentInfo, error) {
	if err := checkHeader(name, data); err != nil {
		return nil, err
	}
	segs, err := decodeFooter(name, int64(len(data)), data)
	if err != nil {
		return nil, err
	}
	for i := range segs {
		s := &segs[i]
		if err := checkSegment(name, s, data[s.Offset:s.Offset+s.Length], nil); err != nil {
			return nil, err
		}
	}
	return segs, nil
}
