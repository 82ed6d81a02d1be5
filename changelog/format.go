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
	magic = "STRATACL"
	// formatVersion is the version writers write; decoders read it and formatV1. Both are
	// part of the format; do not change.
	formatVersion = 2
	formatV1      = 1
	checksumCRC32 = 1 // checksum type 1 = CRC32C (Castagnoli); part of the format; do not change

	headerLen      = 12 // magic, version u16, checksum type u8, reserved u8
	trailerLen     = 20 // footer length u32, version u16, checksum type u8, reserved u8, crc u32, magic
	segHeaderLen   = 4  // record count u32
	recordFixedV1  = 11 // version 1: kind u8, key group u16, seq u64
	minRecordLenV1 = recordFixedV1 + 3
	minRecordLenV2 = 5  // version 2: kind, seq delta, key length, a key of 2 bytes
	entryFixed     = 46 // a footer entry besides its store id
	maxStoreID     = checkpoint.MaxNameLen
	maxFooterBytes = 64 << 20 // a footer longer than this is damage, not a big persist

	// MinKind and MaxKind bound a record's op kind: the engine's OpKind values (OpPut 1 …
	// OpMapClear 8), recorded as they are.
	MinKind = 1
	MaxKind = 8

	// MaxRecord is the largest encoded record Append accepts (1 GiB), counting its sequence
	// number delta at its longest (10 bytes).
	MaxRecord = 1 << 30
)

// Which optional fields a version 2 record carries, by kind (doc.go, "Record, version 2"):
// a kind without a user key or a value has no length for it either. Part of the format; do
// not change.
const (
	fieldUserKey = 1 << iota // the record carries ukLen and the map user key
	fieldValue               // the record carries valLen and the value
)

// kindFields is the fields of each kind MinKind..MaxKind (index 0 unused).
var kindFields = [MaxKind + 1]uint8{
	1: fieldValue,                // put
	2: 0,                         // delete
	3: fieldValue,                // list-append
	4: fieldValue,                // list-replace
	5: 0,                         // list-delete
	6: fieldUserKey | fieldValue, // map-put
	7: fieldUserKey,              // map-remove
	8: 0,                         // map-clear
}

// KeyGroupRange is an inclusive range of key groups (checkpoint.KeyGroupRange).
type KeyGroupRange = checkpoint.KeyGroupRange

func contains(r KeyGroupRange, kg uint16) bool { return r.Start <= int(kg) && int(kg) <= r.End }
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

// recordBody returns the encoded length (version 2) of a record of kind (MinKind..MaxKind)
// with these byte strings, but for its sequence number delta. A field the kind does not carry
// (kindFields) must be empty.
func recordBody(kind uint8, key, userKey, value []byte) int {
	n := 1 + uvarintLen(uint64(len(key))) + len(key)
	f := kindFields[kind]
	if f&fieldUserKey != 0 {
		n += uvarintLen(uint64(len(userKey))) + len(userKey)
	}
	if f&fieldValue != 0 {
		n += uvarintLen(uint64(len(value))) + len(value)
	}
	return n
}

// recordLen returns the encoded length (version 2) of a record of kind with sequence number
// delta delta and these byte strings.
func recordLen(kind uint8, delta uint64, key, userKey, value []byte) int {
	return recordBody(kind, key, userKey, value) + uvarintLen(delta)
}

// maxRecordLen bounds the encoded length of a record of any kind and sequence number with
// these byte strings: what Reserve charges ahead, when neither is known.
func maxRecordLen(key, userKey, value []byte) int {
	return 1 + binary.MaxVarintLen64 + uvarintLen(uint64(len(key))) + len(key) +
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

// putRecord writes the version 2 encoding of a record (doc.go, "Record, version 2") into dst,
// which is exactly recordLen(kind, delta, key, userKey, value) bytes long: Append's path into
// its chunk, no append, no allocation. kind is MinKind..MaxKind and the fields it does not
// carry are empty (Append checked both).
func putRecord(dst []byte, kind uint8, delta uint64, key, userKey, value []byte) {
	p := putHead(dst, kind, delta, len(key))
	p += copy(dst[p:], key)
	f := kindFields[kind]
	if f&fieldUserKey != 0 {
		p += binary.PutUvarint(dst[p:], uint64(len(userKey)))
		p += copy(dst[p:], userKey)
	}
	if f&fieldValue != 0 {
		p += binary.PutUvarint(dst[p:], uint64(len(value)))
		copy(dst[p:], value)
	}
}

// putHead writes a record's kind, sequence number delta and key length into dst and returns
// the bytes written (at most 1 + 2*binary.MaxVarintLen64).
func putHead(dst []byte, kind uint8, delta uint64, keyLen int) int {
	dst[0] = kind
	p := 1 + binary.PutUvarint(dst[1:], delta)
	return p + binary.PutUvarint(dst[p:], uint64(keyLen))
}

// appendRecord appends the version 2 encoding of a record to dst (doc.go, "Record,
// version 2"); as putRecord, for tests and tools. A kind outside MinKind..MaxKind is written
// with every field, which the decoder refuses.
func appendRecord(dst []byte, kind uint8, delta uint64, key, userKey, value []byte) []byte {
	f := uint8(fieldUserKey | fieldValue)
	if kind >= MinKind && kind <= MaxKind {
		f = kindFields[kind]
	}
	dst = append(dst, kind)
	dst = binary.AppendUvarint(dst, delta)
	dst = binary.AppendUvarint(dst, uint64(len(key)))
	dst = append(dst, key...)
	if f&fieldUserKey != 0 {
		dst = binary.AppendUvarint(dst, uint64(len(userKey)))
		dst = append(dst, userKey...)
	}
	if f&fieldValue != 0 {
		dst = binary.AppendUvarint(dst, uint64(len(value)))
		dst = append(dst, value...)
	}
	return dst
}

// decodeRecord decodes the record at b[0:], encoded in format version (formatV1 or
// formatVersion), into r, its byte strings aliasing b, and returns its length. prev is the
// sequence number a version 2 record's delta adds to (the previous record's, or the
// segment's MinSeq for its first); version 1 records carry their own. base is b's offset in
// the object, for errors. It checks the bounds and the rules of one record (kind, key group of
// the key, no sequence number past 2^64-1); not the segment's ranges.
func decodeRecord(name string, base_ int64, b []byte, version uint16, prev uint64, r *Record) (int, error) {
	if version == formatV1 {
		return decodeRecordV1(name, base_, b, r)
	}
	if len(b) < 1 {
		return 0, base.Corrupt(name, base_, base.ErrTruncated, "record kind")
	}
	r.Kind = b[0]
	if r.Kind < MinKind || r.Kind > MaxKind {
		return 0, base.Corrupt(name, base_, nil, "record kind %d outside %d..%d", r.Kind, MinKind, MaxKind)
	}
	delta, k := binary.Uvarint(b[1:])
	if k <= 0 {
		return 0, base.Corrupt(name, base_+1, base.ErrTruncated, "record seq delta")
	}
	if delta > math.MaxUint64-prev {
		return 0, base.Corrupt(name, base_+1, nil, "record seq delta %d after seq %d", delta, prev)
	}
	r.Seq = prev + delta
	p := 1 + k
	var err error
	if r.Key, p, err = lengthPrefixed(name, base_, b, p, "key"); err != nil {
		return 0, err
	}
	f := kindFields[r.Kind]
	r.UserKey, r.Value = nil, nil
	if f&fieldUserKey != 0 {
		if r.UserKey, p, err = lengthPrefixed(name, base_, b, p, "user key"); err != nil {
			return 0, err
		}
	}
	if f&fieldValue != 0 {
		if r.Value, p, err = lengthPrefixed(name, base_, b, p, "value"); err != nil {
			return 0, err
		}
	}
	kg, ok := base.KeyGroupOf(r.Key)
	if !ok {
		return 0, base.Corrupt(name, base_, nil, "record key of %d bytes has no key group", len(r.Key))
	}
	r.KeyGroup = kg
	return p, nil
}

// decodeRecordV1 is decodeRecord for format version 1 (doc.go, "Record, version 1").
func decodeRecordV1(name string, base_ int64, b []byte, r *Record) (int, error) {
	if len(b) < recordFixedV1 {
		return 0, base.Corrupt(name, base_, base.ErrTruncated, "record header needs %d bytes, %d left", recordFixedV1, len(b))
	}
	r.Kind = b[0]
	r.KeyGroup = binary.LittleEndian.Uint16(b[1:])
	r.Seq = binary.LittleEndian.Uint64(b[3:])
	p := recordFixedV1
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
	// Version is the format version of the object holding the segment (1 or 2, from its
	// trailer): how its records are encoded. Not stored in the footer entry.
	Version uint16
}

// appendHeader appends the object header of format version (formatVersion; formatV1 in
// tests).
func appendHeader(dst []byte, version uint16) []byte {
	dst = append(dst, magic...)
	dst = binary.LittleEndian.AppendUint16(dst, version)
	return append(dst, checksumCRC32, 0)
}

// appendFooter appends the footer index of segs and the trailer of format version (the
// header's). The footer's layout is the same in both versions.
func appendFooter(dst []byte, version uint16, segs []SegmentInfo) []byte {
	start := len(dst)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(segs)))
	for i := range segs {
		s := &segs[i]
		dst = binary.LittleEndian.AppendUint16(dst, uint16(len(s.Store)))
		dst = append(dst, s.Store...)
		dst = binary.LittleEndian.AppendUint16(dst, uint16(s.KeyGroups.Start))
		dst = binary.LittleEndian.AppendUint16(dst, uint16(s.KeyGroups.End))
		dst = binary.LittleEndian.AppendUint64(dst, s.MinSeq)
		dst = binary.LittleEndian.AppendUint64(dst, s.MaxSeq)
		dst = binary.LittleEndian.AppendUint64(dst, uint64(s.Offset))
		dst = binary.LittleEndian.AppendUint64(dst, uint64(s.Length))
		dst = binary.LittleEndian.AppendUint32(dst, s.Records)
		dst = binary.LittleEndian.AppendUint32(dst, s.CRC)
	}
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(dst)-start))
	dst = binary.LittleEndian.AppendUint16(dst, version)
	dst = append(dst, checksumCRC32, 0)
	dst = binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], base.CRC32C))
	return append(dst, magic...)
}

// knownVersion reports whether this code reads format version v.
func knownVersion(v uint16) bool { return v == formatV1 || v == formatVersion }

// checkHeader checks the 12-byte object header — magic, version, checksum type, in that
// order — and returns its format version.
func checkHeader(name string, b []byte) (uint16, error) {
	if len(b) < len(magic) || string(b[:len(magic)]) != magic {
		if len(b) < len(magic) {
			return 0, base.Corrupt(name, 0, base.ErrTruncated, "object of %d bytes has no header", len(b))
		}
		return 0, base.Corrupt(name, 0, base.ErrBadMagic, "header %q, want %q", b[:len(magic)], magic)
	}
	if len(b) < headerLen {
		return 0, base.Corrupt(name, 0, base.ErrTruncated, "header of %d bytes, want %d", len(b), headerLen)
	}
	v := binary.LittleEndian.Uint16(b[8:])
	if !knownVersion(v) {
		return 0, base.Corrupt(name, 8, base.ErrFormatVersion, "changelog version %d, this code reads %d and %d", v, formatV1, formatVersion)
	}
	if ck := b[10]; ck != checksumCRC32 {
		return 0, base.Corrupt(name, 10, base.ErrChecksumType, "checksum type %d, want %d (CRC32C)", ck, checksumCRC32)
	}
	if b[11] != 0 {
		return 0, base.Corrupt(name, 11, nil, "reserved header byte %d, want 0", b[11])
	}
	return v, nil
}

// footerLenOf checks the trailer at the end of tail (the last len(tail) bytes of an object
// of size bytes) — magic, version, checksum type, then the footer length against the object's
// bounds — and returns the footer body's length, so a reader knows how many bytes to fetch,
// and the object's format version.
func footerLenOf(name string, size int64, tail []byte) (int, uint16, error) {
	if len(tail) < trailerLen || size < headerLen+trailerLen {
		return 0, 0, base.Corrupt(name, 0, base.ErrTruncated, "object of %d bytes has no room for a header and a trailer", size)
	}
	t := tail[len(tail)-trailerLen:]
	toff := size - trailerLen
	if string(t[12:]) != magic {
		return 0, 0, base.Corrupt(name, toff+12, base.ErrBadMagic, "trailer %q, want %q", t[12:], magic)
	}
	v := binary.LittleEndian.Uint16(t[4:])
	if !knownVersion(v) {
		return 0, 0, base.Corrupt(name, toff+4, base.ErrFormatVersion, "changelog version %d, this code reads %d and %d", v, formatV1, formatVersion)
	}
	if ck := t[6]; ck != checksumCRC32 {
		return 0, 0, base.Corrupt(name, toff+6, base.ErrChecksumType, "checksum type %d, want %d (CRC32C)", ck, checksumCRC32)
	}
	fl := int64(binary.LittleEndian.Uint32(t))
	if fl < 4 || fl > size-headerLen-trailerLen || fl > maxFooterBytes {
		return 0, 0, base.Corrupt(name, toff, base.ErrTruncated, "footer of %d bytes in an object of %d", fl, size)
	}
	return int(fl), v, nil
}

// decodeFooter decodes the footer at the end of tail (the last len(tail) bytes of an object
// of size bytes; at least footer+trailer). Checked in the order magic, version, checksum
// type, footer length, CRC, then each entry's bounds and rules.
func decodeFooter(name string, size int64, tail []byte) ([]SegmentInfo, error) {
	fl, version, err := footerLenOf(name, size, tail)
	if err != nil {
		return nil, err
	}
	minRecordLen := uint64(minRecordLenV2)
	if version == formatV1 {
		minRecordLen = minRecordLenV1
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
		s.Version = version
		s.Store = string(b[p : p+sl])
		p += sl
		s.KeyGroups.Start = int(binary.LittleEndian.Uint16(b[p:]))
		s.KeyGroups.End = int(binary.LittleEndian.Uint16(b[p+2:]))
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

// checkSegment checks the segment bytes seg (at s.Offset of the object name, its records
// encoded in format s.Version) against its footer entry — CRC first, then every record's
// bounds and rules: kind, key group of the key, key group and sequence number within the
// entry's ranges, sequence numbers not decreasing, the record count — and calls fn (if not
// nil) with each record in order. A record passed to fn aliases seg; off is its offset in seg.
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
		n, err := decodeRecord(name, roff, seg[p:], s.Version, prev, &r)
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
	hv, err := checkHeader(name, data)
	if err != nil {
		return nil, err
	}
	segs, err := decodeFooter(name, int64(len(data)), data)
	if err != nil {
		return nil, err
	}
	if tv := binary.LittleEndian.Uint16(data[len(data)-16:]); tv != hv {
		return nil, base.Corrupt(name, int64(len(data)-16), nil, "trailer version %d, header version %d", tv, hv)
	}
	for i := range segs {
		s := &segs[i]
		if err := checkSegment(name, s, data[s.Offset:s.Offset+s.Length], nil); err != nil {
			return nil, err
		}
	}
	return segs, nil
}
