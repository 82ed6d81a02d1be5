package sstable

import (
	"bytes"
	"sync"
	"sync/atomic"

	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/internal/vfs"
)

// Reader reads one sstable. Open checks the header, footer, file index and
// filter and keeps the index (28 bytes per block) and the filter (about
// BloomBitsPerKey/8 bytes per distinct Order) on the Go heap; data blocks
// are read on demand through the Cache.
//
// A Reader is safe for concurrent use by multiple goroutines (Get, GetLoc,
// EntryAt, MapRange, MapRangeFrom, MayContain, NewIter, Meta), except Close, which must not run concurrently
// with any other call and after which the Reader must not be used.
type Reader struct {
	f      vfs.File
	name   string
	size   int64
	cache  *Cache
	fileID uint64
	idx    []blockHandle
	filter *filter // nil: the file has no filter
	meta   Meta
	closed bool
	// checked[i] is 1<<32 | the CRC32C of data block i once a read validated the block's
	// structure (validate walks every entry: most of the cost of a point read that misses the
	// cache). A later read whose bytes carry the same checksum has the same bytes, so it
	// skips the walk; the checksum itself is verified on every read. Atomic: readers of one
	// file may run on several goroutines.
	checked []atomic.Uint64
}

// blockHandle is one decoded file-index record.
type blockHandle struct {
	first, last uint64 // Order of the block's first and last entry
	off         uint64 // offset of the block in the file
	length      uint32 // bytes, trailer included
}

// minDataBlockLen is the length of the smallest possible data block: one
// entry with empty key, user key and value, one 2-byte slot.
const minDataBlockLen = entryFixedSize + 3 + 2 + dataFooterSize + trailerSize

// Open opens the sstable held by f, of size bytes (from the manifest or
// vfs.File.Stat). name is used in errors only. cache may be nil (every block
// read then goes to f); fileID identifies the file in the cache and must be
// unique among the files sharing the cache and never reused for different
// contents (the file number).
//
// Open checks, in this order, each failure a *base.CorruptionError naming the
// file and offset: the size (base.ErrTruncated below the header plus footer), the
// header's magic (base.ErrBadMagic), format version (base.ErrFormatVersion) and checksum type
// (base.ErrChecksumType); the footer's magic (base.ErrTruncated: a file that does not
// end with its footer was cut short or torn), version, checksum type and
// CRC32C (base.ErrChecksum); then the file index's and the filter's CRC32C
// (base.ErrChecksum) and their structure (base.ErrCorruption). Read errors from f are
// returned wrapped with the name and offset. On success the Reader owns f
// (Reader.Close closes it); on error the caller still does.
func Open(f vfs.File, name string, size int64, cache *Cache, fileID uint64) (*Reader, error) {
	if size < minFileSize {
		return nil, base.Corrupt(name, size, base.ErrTruncated, "file is shorter than a header and a footer")
	}
	var hdr [headerSize]byte
	if err := readAt(f, name, hdr[:], 0); err != nil {
		return nil, err
	}
	if err := checkHeader(hdr[:]); err != nil {
		return nil, locate(err, name, 0)
	}
	var fb [footerSize]byte
	if err := readAt(f, name, fb[:], size-footerSize); err != nil {
		return nil, err
	}
	ft, err := decodeFooter(fb[:], size)
	if err != nil {
		return nil, locate(err, name, size-footerSize)
	}
	r := &Reader{f: f, name: name, size: size, cache: cache, fileID: fileID}
	// One read for the filter and the index, which are adjacent.
	sect := make([]byte, ft.filterLen+ft.indexLen)
	if err := readAt(f, name, sect, int64(ft.filterOff)); err != nil {
		return nil, err
	}
	if err := r.loadIndex(sect[ft.filterLen:], &ft); err != nil {
		return nil, locate(err, name, int64(ft.indexOff))
	}
	if ft.filterLen > 0 {
		p, err := checkTrailer(sect[:ft.filterLen], blockFilter)
		if err == nil {
			r.filter, err = decodeFilter(p)
		}
		if err != nil {
			return nil, locate(err, name, int64(ft.filterOff))
		}
	}
	r.meta = Meta{Size: size, Entries: int64(ft.entries), Blocks: int64(ft.blocks),
		MinOrder: ft.minOrder, MaxOrder: ft.maxOrder, MinSeq: ft.minSeq, MaxSeq: ft.maxSeq,
		Tombstones: int64(ft.tombstones)}
	return r, nil
}

// loadIndex checks and decodes the file index: records tile the data
// section [headerSize, filterOff) in order, with non-decreasing Orders that
// span exactly [minOrder, maxOrder].
func (r *Reader) loadIndex(raw []byte, ft *footer) error {
	p, err := checkTrailer(raw, blockIndex)
	if err != nil {
		return err
	}
	n := len(p) / indexRecordSize
	r.idx = make([]blockHandle, n)
	r.checked = make([]atomic.Uint64, n)
	next := uint64(headerSize)
	for i := range r.idx {
		q := p[i*indexRecordSize:]
		h := blockHandle{first: le.Uint64(q), last: le.Uint64(q[8:]), off: le.Uint64(q[16:]), length: le.Uint32(q[24:])}
		at := int64(i * indexRecordSize)
		switch {
		case h.off != next:
			return corrupt(nil, at+16, "block %d at offset %d, want %d", i, h.off, next)
		case h.length < minDataBlockLen || h.length >= maxBlockLen:
			return corrupt(nil, at+24, "block %d length %d out of range", i, h.length)
		case h.first > h.last:
			return corrupt(nil, at, "block %d orders [%#x, %#x] inverted", i, h.first, h.last)
		case i > 0 && h.first < r.idx[i-1].last:
			return corrupt(nil, at, "block %d first order %#x below block %d's last %#x", i, h.first, i-1, r.idx[i-1].last)
		}
		r.idx[i] = h
		next = h.off + uint64(h.length)
	}
	if next != ft.filterOff {
		return corrupt(nil, int64(len(p)), "data blocks end at %d, filter starts at %d", next, ft.filterOff)
	}
	if n > 0 && (r.idx[0].first != ft.minOrder || r.idx[n-1].last != ft.maxOrder) {
		return corrupt(nil, 0, "index orders [%#x, %#x], footer says [%#x, %#x]",
			r.idx[0].first, r.idx[n-1].last, ft.minOrder, ft.maxOrder)
	}
	return nil
}

// Meta returns the file's properties (from the footer; Size is the size
// given to Open).
func (r *Reader) Meta() Meta { return r.meta }

// Name returns the name given to Open.
func (r *Reader) Name() string { return r.name }

// MayContain reports whether the file may hold an entry with this Order:
// false means it certainly does not (outside [MinOrder, MaxOrder], or the
// bloom filter says no; about 1% false positives at 10 bits per key). It
// reads nothing and allocates nothing.
func (r *Reader) MayContain(order uint64) bool {
	if r.meta.Entries == 0 || order < r.meta.MinOrder || order > r.meta.MaxOrder {
		return false
	}
	return r.filter == nil || r.filter.mayContain(order)
}

// Close drops the file's blocks from the cache (Cache.EvictFile) and closes
// the file. It must not run concurrently with other calls; the Reader must
// not be used afterwards. A second Close returns nil.
func (r *Reader) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	if r.cache != nil {
		r.cache.EvictFile(r.fileID)
	}
	return r.f.Close()
}

// readState is the per-call state of Get and MapRange, pooled so that a read
// allocates nothing in steady state: the Entry handed to visit, the pinned
// frame and a buffer for uncached blocks.
type readState struct {
	e     base.Entry
	frame int32 // pinned cache frame, -1 = none
	buf   []byte
}

var readStates = sync.Pool{New: func() any { return &readState{frame: -1} }}

// maxPooledBuf is the largest private block buffer a pooled readState keeps:
// a block holding one list piece (base.MaxListPiece) and its framing fits.
const maxPooledBuf = 2 << 20

func (r *Reader) putState(st *readState) {
	r.unpin(st)
	st.e = base.Entry{}
	if cap(st.buf) > maxPooledBuf {
		st.buf = nil
	}
	readStates.Put(st)
}

func (r *Reader) unpin(st *readState) {
	if st.frame >= 0 {
		r.cache.release(st.frame)
		st.frame = -1
	}
}

// Get calls visit with every version of (key, userKey) under order, newest
// first (descending Seq), until visit returns false. userKey is nil or empty
// for entries that are not map entries; Get(order, mapKey, nil) finds a map's
// map-level tombstone. The Entry passed to visit aliases the cache frame or a
// pooled buffer and is valid only during that call of visit; copy what must
// outlive it.
//
// Get consults the filter, binary-searches the file index by Order, and
// jumps inside the block through the block's hash index; a run of one Order
// spread over several blocks (a large map, or Order collisions) is entered by
// a binary search over those blocks' first entries. In steady state (a cache
// hit, no error) it allocates nothing. Errors: a *base.CorruptionError for a block
// whose checksum or structure is bad (base.ErrChecksum, base.ErrCorruption) and wrapped
// read errors. Safe for concurrent use.
func (r *Reader) Get(order uint64, key, userKey []byte, visit func(e *base.Entry) bool) error {
	return r.scan(order, key, userKey, true, visit, nil)
}

// GetLoc is Get, also handing visit the place of each version in the file
// — its data block's index and its offset in the block's data — for
// EntryAt: a list read records where its pieces are in a first pass and
// reads them one at a time in a second (engine.LowerList). Entries,
// allocation, errors and concurrency are as for Get.
func (r *Reader) GetLoc(order uint64, key, userKey []byte, visit func(e *base.Entry, block, off uint32) bool) error {
	return r.scan(order, key, userKey, true, nil, visit)
}

// EntryAt calls visit with the entry at offset off of data block block, a
// place GetLoc reported. The Entry aliases the cache frame or a pooled
// buffer and is valid only during the call. Errors: a *base.CorruptionError
// for a bad block or a place that holds no entry, wrapped read errors. Safe
// for concurrent use.
func (r *Reader) EntryAt(block, off uint32, visit func(e *base.Entry)) error {
	if int(block) >= len(r.idx) {
		return base.Corrupt(r.name, 0, nil, "entry place: block %d of %d", block, len(r.idx))
	}
	st := readStates.Get().(*readState)
	defer r.putState(st)
	blk, err := r.load(st, int(block))
	if err != nil {
		return err
	}
	if int(off) >= len(blk.data) || decodeEntry(blk.data, int(off), &st.e) < 0 {
		return base.Corrupt(r.name, int64(r.idx[block].off)+int64(off), nil, "entry place: no entry at offset %d of block %d", off, block)
	}
	visit(&st.e)
	return nil
}

// MapRange calls visit with every entry whose Order and Key are order and
// mapKey — the map-level entries (empty UserKey: a map tombstone) first,
// then every user key's versions — in entry order (UserKey asc, Seq desc),
// until visit returns false. Entries, allocation, errors and concurrency are
// as for Get.
func (r *Reader) MapRange(order uint64, mapKey []byte, visit func(e *base.Entry) bool) error {
	return r.scan(order, mapKey, nil, false, visit, nil)
}

// MapRangeFrom is MapRange from user key from on: the versions of user keys
// >= from (the map-level entries only when from is empty). It finds its
// first block by binary search, so resuming a map's walk costs one search,
// not a scan from the map's start. As MapRange otherwise.
func (r *Reader) MapRangeFrom(order uint64, mapKey, from []byte, visit func(e *base.Entry) bool) error {
	return r.scan(order, mapKey, from, false, visit, nil)
}

// blockRange returns the blocks [lo, hi] whose Order range holds order
// (lo > hi if none).
func (r *Reader) blockRange(order uint64) (lo, hi int) {
	i, j := 0, len(r.idx)
	for i < j {
		m := int(uint(i+j) >> 1)
		if r.idx[m].last < order {
			i = m + 1
		} else {
			j = m
		}
	}
	lo = i
	j = len(r.idx)
	for i < j {
		m := int(uint(i+j) >> 1)
		if r.idx[m].first <= order {
			i = m + 1
		} else {
			j = m
		}
	}
	return lo, i - 1
}

// scan visits the versions of (order, key, userKey) (exact), or of
// (order, key) with a user key >= userKey (not exact), through visit or,
// when it is nil, visitLoc.
func (r *Reader) scan(order uint64, key, userKey []byte, exact bool, visit func(e *base.Entry) bool,
	visitLoc func(e *base.Entry, block, off uint32) bool) error {
	if !r.MayContain(order) {
		return nil
	}
	lo, hi := r.blockRange(order)
	if lo > hi {
		return nil
	}
	st := readStates.Get().(*readState)
	defer r.putState(st)
	start := lo
	if hi > lo {
		var err error
		if start, err = r.searchBlocks(st, lo, hi, order, key, userKey); err != nil {
			return err
		}
	}
	for b := start; b <= hi; b++ {
		blk, err := r.load(st, b)
		if err != nil {
			return err
		}
		off := 0
		if r.idx[b].first != order {
			if off = blk.seek(order); off < 0 {
				return nil
			}
		}
		for off < len(blk.data) {
			next := decodeEntry(blk.data, off, &st.e)
			if next < 0 {
				return base.Corrupt(r.name, int64(r.idx[b].off)+int64(off), nil, "malformed entry in a verified block")
			}
			if st.e.Order != order {
				return nil
			}
			c := bytes.Compare(st.e.Key, key)
			if c == 0 && exact {
				c = bytes.Compare(st.e.UserKey, userKey)
			}
			if c > 0 {
				return nil
			}
			if c == 0 && !exact && len(userKey) > 0 && bytes.Compare(st.e.UserKey, userKey) < 0 {
				c = -1 // before the resume point
			}
			if c == 0 {
				var more bool
				if visit != nil {
					more = visit(&st.e)
				} else {
					more = visitLoc(&st.e, uint32(b), uint32(off))
				}
				if !more {
					return nil
				}
			}
			off = next
		}
		r.unpin(st)
	}
	return nil
}

// searchBlocks returns the last block in [lo, hi] whose first entry sorts
// before (order, key, userKey), or lo: the versions sought start there or
// later. Blocks lo+1..hi all begin with order.
func (r *Reader) searchBlocks(st *readState, lo, hi int, order uint64, key, userKey []byte) (int, error) {
	res := lo
	i, j := lo+1, hi
	for i <= j {
		m := int(uint(i+j) >> 1)
		blk, err := r.load(st, m)
		if err != nil {
			return 0, err
		}
		if decodeEntry(blk.data, 0, &st.e) < 0 {
			return 0, base.Corrupt(r.name, int64(r.idx[m].off), nil, "malformed entry in a verified block")
		}
		less := st.e.Order < order || (st.e.Order == order && base.CompareKey(st.e.Key, st.e.UserKey, key, userKey) < 0)
		r.unpin(st)
		if less {
			res, i = m, m+1
		} else {
			j = m - 1
		}
	}
	return res, nil
}

// load returns block i, verified, pinned in the cache (st.frame) or read
// into st.buf.
func (r *Reader) load(st *readState, i int) (block, error) {
	r.unpin(st)
	h := &r.idx[i]
	if c := r.cache; c != nil && int(h.length) <= c.frameSize {
		f, hit := c.acquire(r.fileID, h.off)
		if hit {
			st.frame = f
			blk, err := parseBlockPayload(c.buf(f)[:h.length-trailerSize])
			if err != nil {
				return block{}, locate(err, r.name, int64(h.off))
			}
			return blk, nil
		}
		if f >= 0 {
			blk, err := r.readVerify(c.buf(f)[:h.length], i, &st.e)
			if err != nil {
				c.abort(f)
				return block{}, err
			}
			c.publish(f)
			st.frame = f
			return blk, nil
		}
	}
	if cap(st.buf) < int(h.length) {
		st.buf = make([]byte, h.length)
	}
	return r.readVerify(st.buf[:h.length], i, &st.e)
}

// readVerify reads block i into buf and verifies it completely: CRC32C,
// structure, every entry, the hash index (doc.go invariant 5).
func (r *Reader) readVerify(buf []byte, i int, scratch *base.Entry) (block, error) {
	h := &r.idx[i]
	if err := readAt(r.f, r.name, buf, int64(h.off)); err != nil {
		return block{}, err
	}
	blk, err := parseBlock(buf)
	if err != nil {
		return block{}, locate(err, r.name, int64(h.off))
	}
	mark := 1<<32 | uint64(le.Uint32(buf[len(buf)-4:])) // parseBlock verified this CRC
	if r.checked[i].Load() == mark {
		return blk, nil
	}
	if err := blk.validate(h.first, h.last, scratch); err != nil {
		return block{}, locate(err, r.name, int64(h.off))
	}
	r.checked[i].Store(mark)
	return blk, nil
}
