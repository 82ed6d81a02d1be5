package slice

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"math/bits"
	"unsafe"

	"github.com/strata-db/strata/internal/base"
)

// Format constants; the layout is drawn in doc.go. Part of the slice
// format (testdata/slice-v2.bin is its golden file): do not change them
// without bumping formatVersion.
const (
	sliceMagic    = 0x43494c53 // "SLIC" little endian
	formatVersion = 2          // 2: varint record headers without hashes; 1: fixed 23/33-byte ones
	csumCRC32C    = 1          // checksum type: CRC32C (Castagnoli)

	headerSize = 64
	hdrMagic   = 0
	hdrVersion = 4
	hdrCsum    = 6
	hdrFlags   = 7
	hdrSize    = 8
	hdrCount   = 12
	hdrMinOrd  = 16
	hdrMaxOrd  = 24
	hdrMinSeq  = 32
	hdrMaxSeq  = 40
	hdrCRC     = 48 // u32; bytes 52..63 are zero

	fpSize  = 8 // fingerprint (order hash) per entry
	offSize = 4 // record offset per entry

	// record: kind u8 (| kindKeyRef), then klen uvarint and key — or, with
	// kindKeyRef, a uvarint back distance to the record holding the key —,
	// [uklen uvarint, user key: map kinds], seq uvarint, value up to the
	// record's end (doc.go).
	recKind    = 0
	kindKeyRef = 0x80 // the key is the previous inline key of the slice
	kindMask   = 0x7f
	recMin     = 3 // kind, klen (or back distance) and seq of one byte each
)

// MaxKeySize is the largest key or user key a slice stores, in bytes.
const MaxKeySize = 1<<16 - 1

// MaxValueSize is the largest value (or resolved list) a slice stores, in
// bytes: a slice's offsets are uint32.
const MaxValueSize = 1<<31 - 1

func init() {
	// The fingerprint and offset arrays are read in place as []uint64 and
	// []uint32 of little-endian values.
	x := uint16(1)
	if *(*byte)(unsafe.Pointer(&x)) != 1 {
		panic("strata: invariant: slice needs a little-endian host")
	}
}

func isMapKind(k base.Kind) bool {
	return k == base.KindMapEntry || k == base.KindMapEntryTombstone
}

// recordSize returns the encoded size of e, in bytes, with its key inline
// (ref 0) or as a back reference of ref bytes.
func recordSize(e *base.Entry, ref int) int {
	n := 1 + uvarintLen(e.Seq) + len(e.Value)
	if ref > 0 {
		n += uvarintLen(uint64(ref))
	} else {
		n += uvarintLen(uint64(len(e.Key))) + len(e.Key)
	}
	if isMapKind(e.Kind) {
		n += uvarintLen(uint64(len(e.UserKey))) + len(e.UserKey)
	}
	return n
}

// uvarintLen returns the length of x as a uvarint, in bytes.
func uvarintLen(x uint64) int { return (bits.Len64(x|1) + 6) / 7 }

// appendRecord appends e's record (layout in doc.go) to dst: its key inline
// (ref 0), or as a reference to the record ref bytes before this one, which
// must hold the same key inline. Its Hash and UserHash are not stored:
// Entry recomputes them (keyHash, userHash).
func appendRecord(dst []byte, e *base.Entry, ref int) []byte {
	if ref > 0 {
		dst = append(dst, byte(e.Kind)|kindKeyRef)
		dst = binary.AppendUvarint(dst, uint64(ref))
	} else {
		dst = append(dst, byte(e.Kind))
		dst = binary.AppendUvarint(dst, uint64(len(e.Key)))
		dst = append(dst, e.Key...)
	}
	if isMapKind(e.Kind) {
		dst = binary.AppendUvarint(dst, uint64(len(e.UserKey)))
		dst = append(dst, e.UserKey...)
	}
	dst = binary.AppendUvarint(dst, e.Seq)
	return append(dst, e.Value...)
}

// keyHash returns the Hash of an entry of key: base.HashCompositeKey of a
// composite key (what the root package computes, base invariant 2), xxh3
// (base.HashKey) of one that is not (tests of this tier).
func keyHash(key []byte) uint64 {
	if h, _, ok := base.HashCompositeKey(key); ok {
		return h
	}
	return base.HashKey(key)
}

// userHash returns the UserHash of an entry of kind k and user key uk:
// base.HashUserKey for the map kinds, 0 otherwise (as the engine sets it).
func userHash(k base.Kind, uk []byte) uint64 {
	if isMapKind(k) {
		return base.HashUserKey(uk)
	}
	return 0
}

// Slice is one immutable sorted run of entries in one block (or, for an
// entry too large for a block, in a region of its own). The encoded bytes
// never change after Build; only the Table's bookkeeping fields (hits,
// heat, busy, moving) do, and only on the owner goroutine; a relocation
// moves the bytes, unchanged, to another block.
type Slice struct {
	buf      []byte   // encoded slice, len = used size
	fps      []uint64 // fingerprint array, a view into buf
	offs     []uint32 // record offsets, a view into buf
	count    int
	minOrder uint64
	maxOrder uint64
	scale    float64 // count / (maxOrder - minOrder), 0 when they are equal: lowerBoundFP's guess
	minSeq   uint64
	maxSeq   uint64
	mem      int      // bytes of memory held (block size or region size)
	ref      blockRef // allocator handle; zero for a decoded slice
	bucket   int      // bucket of its Table (set by Install)
	// exp is when its TTL data expires (Options.Expiry, noted by the builder): in memory
	// only, not part of the format; zero for a decoded slice.
	exp base.Expiry

	// Owner-only bookkeeping; background jobs never read these.
	hits    uint64  // lookups resolved here since the last fold
	heat    float64 // decayed hits as of fold
	fold    int64   // clock (ns) of the last fold
	born    int64   // clock (ns) of creation
	busy    bool    // input of a pending compaction or eviction
	moving  bool    // input of the pending relocation
	dropped bool    // freed while moving: released when the relocation ends
	table   *Table  // installed in (nil before Install and after removal)
	segPos  int     // index in its Table's bySeg[ref.seg] while installed
}

// Len returns the number of entries in s.
func (s *Slice) Len() int { return s.count }

// Bytes returns the encoded slice (header, fingerprints, offsets, records),
// checksummed as described in doc.go; Decode reads it back. Valid until the
// slice is freed or relocated by its Table.
func (s *Slice) Bytes() []byte { return s.buf }

// MemBytes returns the memory the slice holds: its block size, or its
// region's page-rounded size for an oversized entry.
func (s *Slice) MemBytes() int { return s.mem }

// OrderRange returns the smallest and largest order hash in s.
func (s *Slice) OrderRange() (lo, hi uint64) { return s.minOrder, s.maxOrder }

// SeqRange returns the smallest and largest sequence number in s.
func (s *Slice) SeqRange() (lo, hi uint64) { return s.minSeq, s.maxSeq }

// Entry fills e with entry i (0 <= i < Len). Its byte slices alias the
// slice's memory: valid until the slice is freed or relocated. Hash and
// UserHash are recomputed from Key and UserKey (keyHash, userHash): the
// format does not store them.
func (s *Slice) Entry(i int, e *base.Entry) {
	r := s.rec(i)
	*e = base.Entry{Order: s.fps[i], Hash: keyHash(r.key), UserHash: userHash(r.kind, r.uk), Seq: r.seq,
		Kind: r.kind, Key: r.key, UserKey: r.uk, Value: r.val}
}

// entryNoHash is Entry without Hash and UserHash (left 0): hashing every
// key and user key again was a quarter of Entry's time in the flight demo's
// memory compactions, which never read them (newMergeIter).
func (s *Slice) entryNoHash(i int, e *base.Entry) {
	r := s.rec(i)
	*e = base.Entry{Order: s.fps[i], Seq: r.seq, Kind: r.kind, Key: r.key, UserKey: r.uk, Value: r.val}
}

// rec is one decoded record; byte slices alias the slice.
type rec struct {
	seq          uint64
	kind         base.Kind
	key, uk, val []byte
}

// recEnd returns the offset at which record i ends: the next record's
// offset, or the slice's size for the last.
func (s *Slice) recEnd(i int) int {
	if i+1 < s.count {
		return int(s.offs[i+1])
	}
	return len(s.buf)
}

// lenAt decodes the uvarint length (or key back distance) at b[p:] and
// returns it with the offset after it. The slice
// was validated, so the varint is complete and minimal.
func lenAt(b []byte, p int) (n, q int) {
	if x := b[p]; x < 0x80 {
		return int(x), p + 1
	}
	return lenAtSlow(b, p)
}

// lenAt2 is lenAt with two-byte varints decoded inline as well: the back
// distances of a map's key references (up to 16 KiB) take two bytes.
func lenAt2(b []byte, p int) (n, q int) {
	x := b[p]
	if x < 0x80 {
		return int(x), p + 1
	}
	if y := b[p+1]; y < 0x80 {
		return int(x&0x7f) | int(y)<<7, p + 2
	}
	return lenAtSlow(b, p)
}

// ukAt returns the offset of the record that holds record i's key inline
// (its own offset, or the one its key reference points back to) and its user
// key (nil for key-level kinds). Two records of a slice whose keys have the
// same home have equal keys, so a search among one map's entries compares
// user keys only (seekUK).
func (s *Slice) ukAt(i int) (home int, uk []byte) {
	off := int(s.offs[i])
	b := s.buf[off:]
	kl, p := lenAt2(b, recKind+1)
	home = off
	if b[recKind]&kindKeyRef != 0 {
		home -= kl
	} else {
		p += kl
	}
	if isMapKind(base.Kind(b[recKind] & kindMask)) {
		ul, q := lenAt2(b, p)
		return home, b[q : q+ul : q+ul]
	}
	return home, nil
}

func lenAtSlow(b []byte, p int) (n, q int) {
	x, m := binary.Uvarint(b[p:])
	return int(x), p + m
}

// rec decodes record i. The slice was validated when built or decoded, so
// the bounds hold.
func (s *Slice) rec(i int) rec {
	off := int(s.offs[i])
	b := s.buf[off:s.recEnd(i)]
	var r rec
	var p int
	r.kind = base.Kind(b[recKind] & kindMask)
	r.key, p = s.keyIn(b, off)
	if isMapKind(r.kind) {
		var ul int
		ul, p = lenAt(b, p)
		r.uk = b[p : p+ul : p+ul]
		p += ul
	}
	if x := b[p]; x < 0x80 {
		r.seq, p = uint64(x), p+1
	} else {
		x, m := binary.Uvarint(b[p:])
		r.seq, p = x, p+m
	}
	r.val = b[p:len(b):len(b)]
	return r
}

// keyIn returns the key of the record b that starts at offset off, and the
// offset in b after its key part: the key inline, or, for a key reference,
// that of the record it points back to (which holds it inline).
func (s *Slice) keyIn(b []byte, off int) (key []byte, p int) {
	kl, p := lenAt2(b, recKind+1)
	if b[recKind]&kindKeyRef == 0 {
		return b[p : p+kl : p+kl], p + kl
	}
	r := s.buf[off-kl:] // kl is the back distance
	n, q := lenAt(r, recKind+1)
	return r[q : q+n : q+n], p
}

// Outcomes of keyLevel.
const (
	recStop  = iota // record i's key is not the key (or it is an entry of the key's map)
	recSkip         // a map entry with an empty user key: the key-level versions go on after it
	recMatch        // a key-level version of the key: its kind and value are returned
)

// keyLevel decodes record i for a key-level read of key in one pass over its
// header (keyAt followed by rec decoded the key twice and the user key and
// sequence number for nothing): recMatch with the record's kind and value, or
// recSkip, or recStop where a point read's walk over the records that share
// the order hash ends (Table.Get, ListGet: a key's key-level versions come
// before its map's entries, and another key's records after them).
func (s *Slice) keyLevel(i int, key []byte) (val []byte, kind base.Kind, out int) {
	off := int(s.offs[i])
	b := s.buf[off:s.recEnd(i)]
	kind = base.Kind(b[recKind] & kindMask)
	k, p := s.keyIn(b, off)
	if !bytes.Equal(k, key) {
		return nil, kind, recStop
	}
	if isMapKind(kind) {
		if b[p] != 0 { // the user key's length
			return nil, kind, recStop
		}
		return nil, kind, recSkip
	}
	for b[p] >= 0x80 { // the sequence number's varint
		p++
	}
	p++
	return b[p:len(b):len(b)], kind, recMatch
}

// kindAt returns the kind of record i.
func (s *Slice) kindAt(i int) base.Kind { return base.Kind(s.buf[s.offs[i]+recKind] & kindMask) }

// keyAt returns the key and user key of record i (the hot-path compare
// touches nothing else).
func (s *Slice) keyAt(i int) (key, uk []byte) {
	off := int(s.offs[i])
	b := s.buf[off:]
	key, p := s.keyIn(b, off)
	if isMapKind(base.Kind(b[recKind] & kindMask)) {
		ul, q := lenAt(b, p)
		return key, b[q : q+ul]
	}
	return key, nil
}

// newSlice wraps the encoded bytes buf (already validated, 8-byte aligned)
// into a Slice holding mem bytes of memory through ref.
func newSlice(buf []byte, mem int, ref blockRef) *Slice {
	n := int(binary.LittleEndian.Uint32(buf[hdrCount:]))
	s := &Slice{count: n, mem: mem}
	s.rebase(buf, ref)
	s.minOrder = binary.LittleEndian.Uint64(buf[hdrMinOrd:])
	s.maxOrder = binary.LittleEndian.Uint64(buf[hdrMaxOrd:])
	s.setScale()
	s.minSeq = binary.LittleEndian.Uint64(buf[hdrMinSeq:])
	s.maxSeq = binary.LittleEndian.Uint64(buf[hdrMaxSeq:])
	return s
}

// setScale sets the interpolation factor of lowerBoundFP from count,
// minOrder and maxOrder (a float multiply instead of a 128-bit division on
// the lookup path).
func (s *Slice) setScale() {
	s.scale = 0
	if span := s.maxOrder - s.minOrder; span > 0 {
		s.scale = float64(s.count) / float64(span)
	}
}

// rebase points s at buf, a copy of its encoded bytes (8-byte aligned),
// held through ref: the fingerprint and offset arrays are views into buf.
func (s *Slice) rebase(buf []byte, ref blockRef) {
	s.buf, s.ref = buf, ref
	if n := s.count; n > 0 {
		s.fps = unsafe.Slice((*uint64)(unsafe.Pointer(&buf[headerSize])), n)
		s.offs = unsafe.Slice((*uint32)(unsafe.Pointer(&buf[headerSize+fpSize*n])), n)
	}
}

// checksum returns the CRC32C of buf[:size] without the CRC field.
func checksum(buf []byte) uint32 {
	c := crc32.Update(0, base.CRC32C, buf[:hdrCRC])
	return crc32.Update(c, base.CRC32C, buf[hdrCRC+4:])
}

// Decode validates an encoded slice (as returned by Slice.Bytes) and returns
// a read-only Slice over b, which must stay unchanged while the Slice is
// used. It checks, in this order and each with its own cause inside a
// *base.CorruptionError (no file; the offset is into b): the length
// (base.ErrTruncated), the magic (base.ErrBadMagic), the version
// (base.ErrFormatVersion), the checksum type (base.ErrChecksumType), the size
// field against len(b), the CRC32C (base.ErrChecksum), then every bound,
// kind and the entry order (no cause; the message names the record and its
// offset). Every one matches base.ErrCorruption. b must start on an 8-byte boundary
// (ErrAlignment). Trailing bytes past the size field are ignored. The
// returned Slice is not owned by any allocator; it cannot be installed.
// Safe for concurrent use (it reads b only).
func Decode(b []byte) (*Slice, error) {
	if len(b) < headerSize {
		return nil, base.Corrupt("", 0, base.ErrTruncated, "slice of %d bytes, shorter than the %d-byte header", len(b), headerSize)
	}
	if binary.LittleEndian.Uint32(b[hdrMagic:]) != sliceMagic {
		return nil, base.Corrupt("", hdrMagic, base.ErrBadMagic, "slice magic %#x", binary.LittleEndian.Uint32(b[hdrMagic:]))
	}
	if v := binary.LittleEndian.Uint16(b[hdrVersion:]); v != formatVersion {
		return nil, base.Corrupt("", hdrVersion, base.ErrFormatVersion, "slice format version %d, want %d", v, formatVersion)
	}
	if c := b[hdrCsum]; c != csumCRC32C {
		return nil, base.Corrupt("", hdrCsum, base.ErrChecksumType, "slice checksum type %d, want %d (CRC32C)", c, csumCRC32C)
	}
	size := int(binary.LittleEndian.Uint32(b[hdrSize:]))
	if size < headerSize || size > len(b) {
		return nil, base.Corrupt("", hdrSize, nil, "size field %d outside [%d, %d]", size, headerSize, len(b))
	}
	b = b[:size:size]
	if want, got := binary.LittleEndian.Uint32(b[hdrCRC:]), checksum(b); want != got {
		return nil, base.Corrupt("", hdrCRC, base.ErrChecksum, "slice crc32c stored %#08x, computed %#08x", want, got)
	}
	if uintptr(unsafe.Pointer(unsafe.SliceData(b)))%8 != 0 {
		return nil, ErrAlignment
	}
	if err := validate(b); err != nil {
		return nil, err
	}
	return newSlice(b, size, blockRef{}), nil
}

// validate checks everything but magic, version and CRC: the layout tiles
// b exactly, every record is in bounds with a valid kind and minimal
// varints, and entries are strictly ordered with the header's ranges:
// invariants 1 and 2 in doc.go.
func validate(b []byte) error {
	size := len(b)
	n := int(binary.LittleEndian.Uint32(b[hdrCount:]))
	if b[hdrFlags] != 0 {
		return base.Corrupt("", hdrFlags, nil, "flags %#x", b[hdrFlags])
	}
	for _, x := range b[hdrCRC+4 : headerSize] {
		if x != 0 {
			return base.Corrupt("", hdrCRC+4, nil, "reserved header bytes not zero")
		}
	}
	if n == 0 || n > (size-headerSize)/(fpSize+offSize+recMin) {
		return base.Corrupt("", hdrCount, nil, "count %d impossible in %d bytes", n, size)
	}
	fpAt := func(i int) uint64 { return binary.LittleEndian.Uint64(b[headerSize+fpSize*i:]) }
	offAt := func(i int) int {
		return int(binary.LittleEndian.Uint32(b[headerSize+fpSize*n+offSize*i:]))
	}
	if off := offAt(0); off != headerSize+(fpSize+offSize)*n {
		return base.Corrupt("", int64(off), nil, "record 0 at offset %d, expected %d", off, headerSize+(fpSize+offSize)*n)
	}
	var minSeq, maxSeq uint64 = ^uint64(0), 0
	var prev, cur base.Entry               // Order, Key, UserKey and Seq of records i-1 and i
	lastInline, lastKey := -1, []byte(nil) // the last record with its key inline
	for i := 0; i < n; i++ {
		off, end := offAt(i), size
		if i+1 < n {
			end = offAt(i + 1)
		}
		// A record ends where the next begins (or at size), so records
		// tile [offs[0], size) once every one is at least recMin bytes.
		if end > size || end-off < recMin {
			return base.Corrupt("", int64(off), nil, "record %d at %d ends at %d (size %d)", i, off, end, size)
		}
		r := b[off:end]
		kind := base.Kind(r[recKind] & kindMask)
		if !kind.Valid() {
			return base.Corrupt("", int64(off), nil, "record %d at %d: kind %d", i, off, kind)
		}
		var key, uk []byte
		x, p, ok := seqIn(r, recKind+1) // key length or back distance
		switch {
		case !ok:
		case r[recKind]&kindKeyRef != 0:
			// A reference names the slice's last record with an inline key,
			// exactly (so a decoded slice re-encodes to the same bytes).
			if ok = lastInline >= 0 && x == uint64(off-lastInline); ok {
				key = lastKey
			}
		case x > MaxKeySize || int(x) > len(r)-p:
			ok = false
		default:
			key, p = r[p:p+int(x)], p+int(x)
			// An inline key equal to the last inline one must have been a
			// reference (canonical form).
			if ok = lastInline < 0 || !bytes.Equal(key, lastKey); ok {
				lastInline, lastKey = off, key
			}
		}
		if ok && isMapKind(kind) {
			var ul int
			// Lengths against the room left, never a sum (no wrap on 32-bit hosts).
			if ul, p, ok = uvarintIn(r, p, MaxKeySize); ok && ul <= len(r)-p {
				uk, p = r[p:p+ul], p+ul
			} else {
				ok = false
			}
		}
		if !ok {
			return base.Corrupt("", int64(off), nil, "record %d at %d: bad key or lengths past its end %d", i, off, end)
		}
		var seq uint64
		seq, p, ok = seqIn(r, p)
		if !ok || len(r)-p > MaxValueSize {
			return base.Corrupt("", int64(off+p), nil, "record %d at %d: bad sequence number or value", i, off)
		}
		cur.Order, cur.Key, cur.UserKey, cur.Seq = fpAt(i), key, uk, seq
		if i > 0 && base.Compare(&prev, &cur) >= 0 {
			return base.Corrupt("", int64(off), nil, "record %d at %d out of order", i, off)
		}
		prev = cur
		minSeq, maxSeq = min(minSeq, seq), max(maxSeq, seq)
	}
	if fpAt(0) != binary.LittleEndian.Uint64(b[hdrMinOrd:]) || fpAt(n-1) != binary.LittleEndian.Uint64(b[hdrMaxOrd:]) {
		return base.Corrupt("", -1, nil, "order range in header does not match the fingerprints")
	}
	if minSeq != binary.LittleEndian.Uint64(b[hdrMinSeq:]) || maxSeq != binary.LittleEndian.Uint64(b[hdrMaxSeq:]) {
		return base.Corrupt("", -1, nil, "sequence range in header does not match the records")
	}
	return nil
}

// seqIn decodes the minimal uvarint at r[p:], inside r; ok is false when it
// is truncated, overlong or not minimal.
func seqIn(r []byte, p int) (x uint64, q int, ok bool) {
	if p >= len(r) {
		return 0, p, false
	}
	x, m := binary.Uvarint(r[p:])
	if m <= 0 || m != uvarintLen(x) {
		return 0, p, false
	}
	return x, p + m, true
}

// uvarintIn is seqIn for a length of at most limit.
func uvarintIn(r []byte, p int, limit int) (n, q int, ok bool) {
	x, q, ok := seqIn(r, p)
	if !ok || x > uint64(limit) {
		return 0, p, false
	}
	return int(x), q, true
}
