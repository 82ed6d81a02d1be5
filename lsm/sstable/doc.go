// Package sstable is the file format of Strata's LsmStore (the third tier,
// below the FreshTable and the SliceTable): immutable files of entries in
// entry order, cut into CRC32C-checksummed data blocks that each carry a
// hash index over Order, with a bloom filter over Order and a file index
// that finds a block by its Order range. Package lsm builds levels, the
// manifest and compaction on top of it; this package knows nothing of them.
//
// # Terms
//
//   - Entry: one version of a key (internal/base.Entry): Order, Hash,
//     UserHash, Seq, Kind, Key, UserKey, Value.
//   - Entry order: (Order asc, Key asc, UserKey asc, Seq desc). A file holds
//     its entries in strictly increasing entry order.
//   - Run: the consecutive entries sharing one Order — one key's versions, a
//     whole map (all entries of a map share the map key's Order), or several
//     keys whose order hashes collide. A run may span blocks.
//   - Block: a data block (entries + hash index), the filter or the file
//     index; each ends with an 8-byte trailer holding its type and CRC32C.
//   - Oversized block: a data block longer than BlockSize because it holds a
//     single entry longer than BlockSize. Values larger than a block are
//     stored this way (one block per such entry), never split.
//   - Frame: a fixed-size slot of the Cache's off-heap region holding one
//     verified data block.
//
// # File
//
// All integers are little-endian. Offsets are from the start of the file.
//
//	offset 0
//	+------------------------------+
//	| header            16 bytes   |  magic "STRATAst" [8] | format version u32 (=1) |
//	|                              |  checksum type u8 (=1 CRC32C) | reserved [3] (=0)
//	+------------------------------+  offset 16
//	| data block 0                 |  \
//	| data block 1                 |   > back to back, in entry order
//	| ...                          |  /
//	+------------------------------+  filterOffset
//	| filter block (optional)      |  bloom over the distinct Orders
//	+------------------------------+  indexOffset
//	| index block                  |  one 28-byte record per data block
//	+------------------------------+  size - 116
//	| footer           116 bytes   |
//	+------------------------------+  size
//
// Footer (116 bytes):
//
//	 0  indexOffset  u64     48  tombstones u64      96  format version u32 (=1)
//	 8  indexLength  u64     56  minOrder   u64     100  checksum type u8 (=1)
//	16  filterOffset u64     64  maxOrder   u64     101  reserved [3] (=0)
//	24  filterLength u64     72  minSeq     u64     104  crc32c u32 of bytes [0, 104)
//	32  entries      u64     80  maxSeq     u64     108  magic "STRATAst" [8]
//	40  blocks       u64     88  fileSize   u64
//
// filterLength 0 means no filter. Lengths include the block trailer.
//
// Block trailer (last 8 bytes of every data, filter and index block):
//
//	+---------+--------------+----------------------------------------------+
//	| type u8 | reserved [3] | crc32c u32 of the block's payload and of the |
//	| 1 data  | (=0)         | trailer's first 4 bytes                      |
//	| 2 index |              |                                              |
//	| 3 filter|              |                                              |
//	+---------+--------------+----------------------------------------------+
//
// Data block:
//
//	+-------------------------------+  0
//	| entry 0                       |
//	| entry 1  ...                  |  in entry order
//	+-------------------------------+  dataLen
//	| hash index: 2^slotsLog2 slots |  each u16 (dataLen < 65535) or u32:
//	|                               |  offset+1 of the FIRST entry of one
//	|                               |  Order in this block; 0 = empty
//	+-------------------------------+
//	| dataLen u32 | entries u32 |   |  data footer, 12 bytes
//	| slotsLog2 u8 | slotWidth u8 | |
//	| reserved [2] (=0)             |
//	+-------------------------------+
//	| trailer (type 1)      8 bytes |
//	+-------------------------------+
//
// The hash index holds one slot per distinct Order of the block (a run's
// first entry in this block), at home slot (Order·0x9E3779B97F4A7C15) >>
// (64-slotsLog2) with linear probing; 2^slotsLog2 is the smallest power of two
// above runs·4/3 (load ≤ 3/4, so a probe for an absent Order ends at an empty
// slot).
//
// Entry (26 fixed bytes, three uvarint lengths, optional UserHash, bytes):
//
//	 0  Order u64 | 8 Seq u64 | 16 Hash u64 | 24 Kind u8 | 25 flags u8
//	26  len(Key) uvarint | len(UserKey) uvarint | len(Value) uvarint
//	    [UserHash u64, iff flags bit 0 (set iff UserHash != 0); other bits 0]
//	    Key | UserKey | Value
//
// Keys are stored whole (no prefix compression) so that a read can hand out
// slices of the cached block without copying.
//
// Index record (28 bytes per data block, in block order):
//
//	0 first Order u64 | 8 last Order u64 | 16 block offset u64 | 24 block length u32
//
// Filter payload: lines × 64 bytes, then k u8 | reserved [3] (=0) | lines
// u32. A blocked bloom filter (RocksDB's FastLocalBloom shape): an Order is
// mixed with splitmix64; the high 32 bits pick a 512-bit line
// (multiply-shift), the low 32 bits x and delta = rotl(x, 15) give k bit
// positions (x+i·delta) mod 512 in that line. k = round(0.69·bitsPerKey),
// 1..16; lines = ceil(distinct Orders · bitsPerKey / 512); an empty file
// has 0 lines.
//
// # Invariants
//
//  1. Checked in this order on Open, each failure a distinct error: size
//     (base.ErrTruncated), header magic (base.ErrBadMagic), header version
//     (base.ErrFormatVersion), header checksum type
//     (base.ErrChecksumType), reserved bytes; footer magic
//     (base.ErrTruncated: the header is right but the file does not end
//     with a footer, so it was cut short or torn), footer version,
//     checksum type, CRC32C (base.ErrChecksum), then the footer's fields, the
//     index's and the filter's CRC32C and structure.
//  2. Every byte of a file is covered by a check before it is used: the
//     header by exact comparison, everything else by a CRC32C (footer, each
//     data block, filter, index). The sections tile the file exactly (header,
//     data blocks back to back from offset 16 as the index lists them, filter,
//     index, footer), so no byte is unchecked padding. A flipped bit therefore
//     gives an error, never a different read.
//  3. Entries are in strictly increasing entry order within and across
//     blocks; no two entries share (Order, Key, UserKey, Seq). Index records
//     have first ≤ last and last(i) ≤ first(i+1) (equal when a run spans
//     blocks); the index's first and last Orders equal the footer's.
//  4. A data block holds at least one entry and is at most BlockSize bytes
//     unless it holds exactly one entry (an oversized block).
//  5. A data block is verified completely before any of it is used: CRC32C,
//     data footer shape, every entry decoded in bounds with a valid Kind and
//     flags, strictly increasing, first and last Orders as the index says,
//     and the hash index finds exactly each run's first entry and has no
//     other used slot. The cache holds only verified blocks, so a hit reads
//     in place without checking again. A block read from the file again
//     (evicted, or never cached) always has its CRC32C checked; the
//     structural walk is skipped when the Reader already walked a block of
//     that index with the same checksum (Reader.checked), since the same
//     checksum means the same bytes. Iter also checks order across block
//     boundaries.
//  6. Decoders never panic, whatever the bytes: every length and offset is
//     checked against the bytes that hold it before use (fuzzed: FuzzOpen,
//     FuzzFooter, FuzzBlock, FuzzFilter).
//  7. The Cache holds blocks of at most FrameSize bytes; longer blocks are
//     read into a pooled private buffer on every read. A frame is reused only
//     when no read has it pinned (reference count 0), so an Entry handed to a
//     visit callback stays valid for that call.
//  8. Files are immutable: a Writer appends and syncs once at Finish; nothing
//     is rewritten in place. A file is complete and durable only after a
//     successful Finish.
//
// # Reads
//
// Get(order, key, userKey): the filter (no: done); the file index gives the
// blocks [lo, hi] whose Order range holds order (binary search on last, then
// on first); if the run spans several blocks, a binary search over the first
// entries of blocks lo+1..hi picks the block where (key, userKey) starts;
// inside a block the hash index gives the run's first entry; a linear scan
// over the run then compares Key and UserKey, crossing into the next block
// while the run continues. MapRange is the same scan over one Key with any
// UserKey. Iter reads the data section in order, 256 KiB per read, around the
// cache.
//
// # Errors and concurrency
//
// Errors about contents are *base.CorruptionError values naming the file and
// offset; all match base.ErrCorruption and their cause, when a check names
// one (errors.go).
// A Reader and a Cache are safe for concurrent use (except Close); a Writer
// and an Iter belong to one goroutine. The package starts no goroutines.
package sstable
