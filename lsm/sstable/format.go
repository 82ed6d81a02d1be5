package sstable

import (
	"encoding/binary"
	"hash/crc32"
	"math/bits"

	"github.com/strata-db/strata/internal/base"
)

// Magic is the first and the last 8 bytes of every sstable (doc.go, "File").
// Part of the file format; do not change.
const Magic = "STRATAst"

// FormatVersion is the format version this package writes and the only one
// it reads. Part of the file format; do not change the meaning of 1.
const FormatVersion uint32 = 1

// ChecksumType names the checksum algorithm of a file. Part of the file
// format; do not change the values.
type ChecksumType uint8

// ChecksumCRC32C is CRC-32 with the Castagnoli polynomial (hash/crc32,
// hardware-accelerated on amd64 and arm64), the only checksum type.
// Part of the file format; do not change.
const ChecksumCRC32C ChecksumType = 1

// blockType tags each checksummed block (its trailer's first byte). Part of
// the file format; do not change the values.
type blockType uint8

const (
	blockData   blockType = 1 // part of the file format; do not change
	blockIndex  blockType = 2 // part of the file format; do not change
	blockFilter blockType = 3 // part of the file format; do not change
)

// Sizes in bytes of the fixed-size structures (doc.go draws them).
const (
	headerSize       = 16
	footerSize       = 116
	trailerSize      = 8  // every block: type u8, reserved [3]u8, crc32c u32
	dataFooterSize   = 12 // data blocks: dataLen u32, entries u32, slotsLog2 u8, slotWidth u8, reserved [2]u8
	indexRecordSize  = 28 // first u64, last u64, offset u64, length u32
	filterFooterSize = 8  // k u8, reserved [3]u8, lines u32
	entryFixedSize   = 26 // order u64, seq u64, hash u64, kind u8, flags u8
	filterLineSize   = 64 // bytes per bloom line (512 bits, one cache line)
	minFileSize      = headerSize + footerSize
	maxBlockLen      = 1 << 31 // no block (or index/filter) may be this long
	maxEntrySize     = 1 << 30 // largest encoded entry Writer.Add accepts
)

// Entry flags (entry byte 25). Part of the file format; do not change.
const (
	flagUserHash = 1 << 0 // an 8-byte UserHash follows the lengths
	flagsKnown   = flagUserHash
)

// DefaultBlockSize is the target length of a data block in bytes (16 KiB).
const DefaultBlockSize = 16 << 10

// DefaultBloomBitsPerKey is the filter's default bits per distinct Order.
const DefaultBloomBitsPerKey = 10

func checksum(b []byte) uint32 { return crc32.Checksum(b, base.CRC32C) }

var le = binary.LittleEndian

// header is the file's first 16 bytes.
func appendHeader(dst []byte) []byte {
	dst = append(dst, Magic...)
	dst = le.AppendUint32(dst, FormatVersion)
	dst = append(dst, byte(ChecksumCRC32C), 0, 0, 0)
	return dst
}

// checkHeader checks the header in the order magic, version, checksum type,
// reserved bytes.
func checkHeader(h []byte) error {
	if len(h) < headerSize {
		return corrupt(base.ErrTruncated, 0, "header is %d bytes, want %d", len(h), headerSize)
	}
	if string(h[:8]) != Magic {
		return corrupt(base.ErrBadMagic, 0, "header magic %q, want %q", h[:8], Magic)
	}
	if v := le.Uint32(h[8:]); v != FormatVersion {
		return corrupt(base.ErrFormatVersion, 8, "header format version %d, want %d", v, FormatVersion)
	}
	if c := ChecksumType(h[12]); c != ChecksumCRC32C {
		return corrupt(base.ErrChecksumType, 12, "header checksum type %d, want %d (crc32c)", c, ChecksumCRC32C)
	}
	if h[13]|h[14]|h[15] != 0 {
		return corrupt(nil, 13, "header reserved bytes % x are not zero", h[13:16])
	}
	return nil
}

// footer is the decoded fixed-size footer at the end of the file.
type footer struct {
	indexOff, indexLen   uint64
	filterOff, filterLen uint64
	entries, blocks      uint64
	tombstones           uint64
	minOrder, maxOrder   uint64
	minSeq, maxSeq       uint64
	fileSize             uint64
}

func (f *footer) append(dst []byte) []byte {
	start := len(dst)
	for _, v := range [...]uint64{f.indexOff, f.indexLen, f.filterOff, f.filterLen, f.entries,
		f.blocks, f.tombstones, f.minOrder, f.maxOrder, f.minSeq, f.maxSeq, f.fileSize} {
		dst = le.AppendUint64(dst, v)
	}
	dst = le.AppendUint32(dst, FormatVersion)
	dst = append(dst, byte(ChecksumCRC32C), 0, 0, 0)
	dst = le.AppendUint32(dst, checksum(dst[start:]))
	return append(dst, Magic...)
}

// decodeFooter checks and decodes the last footerSize bytes of a file of the
// given size: magic (a missing magic means a torn or truncated file), version,
// checksum type, CRC, reserved bytes, then that the sections it names tile the
// file exactly: header | data blocks | filter | index | footer. Offsets in
// errors are relative to the footer's start.
func decodeFooter(b []byte, size int64) (footer, error) {
	var f footer
	if len(b) != footerSize {
		return f, corrupt(base.ErrTruncated, 0, "footer is %d bytes, want %d", len(b), footerSize)
	}
	if string(b[108:116]) != Magic {
		return f, corrupt(base.ErrTruncated, 108, "file does not end with the footer magic (found %q): truncated or torn", b[108:116])
	}
	if v := le.Uint32(b[96:]); v != FormatVersion {
		return f, corrupt(base.ErrFormatVersion, 96, "footer format version %d, want %d", v, FormatVersion)
	}
	if c := ChecksumType(b[100]); c != ChecksumCRC32C {
		return f, corrupt(base.ErrChecksumType, 100, "footer checksum type %d, want %d (crc32c)", c, ChecksumCRC32C)
	}
	if got, want := checksum(b[:104]), le.Uint32(b[104:]); got != want {
		return f, corrupt(base.ErrChecksum, 0, "footer crc32c %#08x, stored %#08x", got, want)
	}
	if b[101]|b[102]|b[103] != 0 {
		return f, corrupt(nil, 101, "footer reserved bytes are not zero")
	}
	v := func(i int) uint64 { return le.Uint64(b[8*i:]) }
	f = footer{v(0), v(1), v(2), v(3), v(4), v(5), v(6), v(7), v(8), v(9), v(10), v(11)}
	if f.fileSize != uint64(size) {
		return f, corrupt(base.ErrTruncated, 88, "footer records file size %d, file is %d bytes", f.fileSize, size)
	}
	end := uint64(size) - footerSize
	switch {
	case f.indexLen < trailerSize || f.indexLen > maxBlockLen || (f.indexLen-trailerSize)%indexRecordSize != 0:
		return f, corrupt(nil, 8, "index length %d is not a trailer plus whole records", f.indexLen)
	case (f.indexLen-trailerSize)/indexRecordSize != f.blocks:
		return f, corrupt(nil, 40, "index holds %d records, footer counts %d blocks",
			(f.indexLen-trailerSize)/indexRecordSize, f.blocks)
	case f.indexOff > end || f.indexOff+f.indexLen != end:
		return f, corrupt(nil, 0, "index [%d,+%d) does not end at the footer (%d)", f.indexOff, f.indexLen, end)
	case f.filterLen != 0 && (f.filterLen < trailerSize+filterFooterSize || f.filterLen > maxBlockLen):
		return f, corrupt(nil, 24, "filter length %d out of range", f.filterLen)
	case f.filterOff > f.indexOff || f.filterOff+f.filterLen != f.indexOff:
		return f, corrupt(nil, 16, "filter [%d,+%d) does not end at the index (%d)", f.filterOff, f.filterLen, f.indexOff)
	case f.filterOff < headerSize:
		return f, corrupt(nil, 16, "filter offset %d inside the header", f.filterOff)
	case f.blocks == 0 && (f.filterOff != headerSize || f.entries != 0):
		return f, corrupt(nil, 40, "no blocks but %d entries and data ends at %d", f.entries, f.filterOff)
	case f.tombstones > f.entries:
		return f, corrupt(nil, 48, "%d tombstones among %d entries", f.tombstones, f.entries)
	case f.blocks > f.entries:
		return f, corrupt(nil, 40, "%d blocks for %d entries", f.blocks, f.entries)
	case f.entries > 0 && (f.minOrder > f.maxOrder || f.minSeq > f.maxSeq):
		return f, corrupt(nil, 56, "order range [%#x,%#x] or seq range [%d,%d] inverted",
			f.minOrder, f.maxOrder, f.minSeq, f.maxSeq)
	}
	return f, nil
}

// appendTrailer appends the block trailer (type, reserved, CRC32C of the
// block's payload and of the trailer's first 4 bytes).
func appendTrailer(dst []byte, start int, t blockType) []byte {
	dst = append(dst, byte(t), 0, 0, 0)
	return le.AppendUint32(dst, checksum(dst[start:]))
}

// checkTrailer verifies a whole block (payload and trailer): length, CRC,
// type and reserved bytes, and returns the payload. Offsets in errors are
// relative to the block's start.
func checkTrailer(b []byte, t blockType) ([]byte, error) {
	if len(b) < trailerSize {
		return nil, corrupt(nil, 0, "block of %d bytes is shorter than its trailer", len(b))
	}
	n := len(b) - trailerSize
	if got, want := checksum(b[:n+4]), le.Uint32(b[n+4:]); got != want {
		return nil, corrupt(base.ErrChecksum, int64(n), "block crc32c %#08x, stored %#08x (%d bytes)", got, want, len(b))
	}
	if blockType(b[n]) != t {
		return nil, corrupt(nil, int64(n), "block type %d, want %d", b[n], t)
	}
	if b[n+1]|b[n+2]|b[n+3] != 0 {
		return nil, corrupt(nil, int64(n+1), "block trailer reserved bytes are not zero")
	}
	return b[:n], nil
}

// entrySize returns the encoded length of e in a data block.
func entrySize(e *base.Entry) int {
	n := entryFixedSize + uvarintLen(uint64(len(e.Key))) + uvarintLen(uint64(len(e.UserKey))) +
		uvarintLen(uint64(len(e.Value))) + len(e.Key) + len(e.UserKey) + len(e.Value)
	if e.UserHash != 0 {
		n += 8
	}
	return n
}

func uvarintLen(v uint64) int { return (bits.Len64(v|1) + 6) / 7 }

// appendEntry encodes e (doc.go, "Entry").
func appendEntry(dst []byte, e *base.Entry) []byte {
	dst = le.AppendUint64(dst, e.Order)
	dst = le.AppendUint64(dst, e.Seq)
	dst = le.AppendUint64(dst, e.Hash)
	var flags byte
	if e.UserHash != 0 {
		flags |= flagUserHash
	}
	dst = append(dst, byte(e.Kind), flags)
	dst = binary.AppendUvarint(dst, uint64(len(e.Key)))
	dst = binary.AppendUvarint(dst, uint64(len(e.UserKey)))
	dst = binary.AppendUvarint(dst, uint64(len(e.Value)))
	if e.UserHash != 0 {
		dst = le.AppendUint64(dst, e.UserHash)
	}
	dst = append(dst, e.Key...)
	dst = append(dst, e.UserKey...)
	return append(dst, e.Value...)
}

// decodeEntry decodes the entry at off in data into e, aliasing data, and
// returns the offset of the next entry, or -1 if the bytes do not hold a
// well-formed entry (never panics). Kind and flags are checked; order is not.
func decodeEntry(data []byte, off int, e *base.Entry) int {
	if off < 0 || off > len(data) || len(data)-off < entryFixedSize {
		return -1
	}
	p := data[off:]
	e.Order = le.Uint64(p)
	e.Seq = le.Uint64(p[8:])
	e.Hash = le.Uint64(p[16:])
	e.Kind = base.Kind(p[24])
	flags := p[25]
	if !e.Kind.Valid() || flags&^flagsKnown != 0 {
		return -1
	}
	i := entryFixedSize
	kl, n := binary.Uvarint(p[i:])
	if n <= 0 {
		return -1
	}
	i += n
	ul, n := binary.Uvarint(p[i:])
	if n <= 0 {
		return -1
	}
	i += n
	vl, n := binary.Uvarint(p[i:])
	if n <= 0 {
		return -1
	}
	i += n
	e.UserHash = 0
	if flags&flagUserHash != 0 {
		if len(p)-i < 8 {
			return -1
		}
		e.UserHash = le.Uint64(p[i:])
		if e.UserHash == 0 {
			return -1 // the writer sets the flag only for a non-zero UserHash
		}
		i += 8
	}
	rest := uint64(len(p) - i)
	if kl > rest || ul > rest-kl || vl > rest-kl-ul {
		return -1
	}
	k, u, v := int(kl), int(ul), int(vl)
	e.Key = p[i : i+k : i+k]
	e.UserKey = p[i+k : i+k+u : i+k+u]
	e.Value = p[i+k+u : i+k+u+v : i+k+u+v]
	return off + i + k + u + v
}

// isTombstone reports whether k is counted in Meta.Tombstones.
func isTombstone(k base.Kind) bool {
	return k == base.KindTombstone || k == base.KindMapEntryTombstone
}
