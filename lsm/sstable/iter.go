package sstable

import (
	"github.com/strata-db/strata/internal/base"
)

// readAhead is the number of bytes of consecutive blocks an Iter reads with
// one ReadAt (at least one block).
const readAhead = 256 << 10

// Iter iterates over a file's entries in entry order (Order asc, Key asc,
// UserKey asc, Seq desc). It implements base.Iterator. It reads blocks
// directly from the file, 256 KiB of consecutive blocks per read, into its
// own buffer and not through the Cache (a compaction scanning a file must not
// evict the blocks point reads need), verifying each block as Get does.
//
// An Iter is not safe for concurrent use; several Iters over one Reader are.
// The Reader must stay open while the Iter is used.
type Iter struct {
	r      *Reader
	buf    []byte // blocks [bufLo, bufHi) read from offset idx[bufLo].off
	bufLo  int
	bufHi  int
	b      int   // current block, len(idx) at the end
	blk    block // view of block b, valid if loaded
	loaded bool
	off    int // offset of the next entry in blk.data
	e      base.Entry
	err    error
	// The last entry of block lastOf (sort fields only, keys in lastBuf):
	// the next block's first entry must sort after it (doc.go invariant 4).
	last    base.Entry
	lastOf  int
	lastBuf []byte
}

// NewIter returns an iterator positioned before the first entry.
func (r *Reader) NewIter() *Iter { return &Iter{r: r, lastOf: -1} }

// Next advances to the next entry and reports whether there is one. It
// returns false at the end and on an error (Err). It allocates nothing after
// the iterator's buffer has grown to its working size.
func (it *Iter) Next() bool {
	if it.err != nil {
		return false
	}
	for it.b < len(it.r.idx) {
		if !it.loaded {
			if !it.load(it.b) {
				return false
			}
		}
		if it.off < len(it.blk.data) {
			next := decodeEntry(it.blk.data, it.off, &it.e)
			if next < 0 {
				it.err = base.Corrupt(it.r.name, int64(it.r.idx[it.b].off)+int64(it.off), nil, "malformed entry in a verified block")
				return false
			}
			it.off = next
			return true
		}
		it.b++
		it.off = 0
		it.loaded = false
	}
	return false
}

// Entry returns the current entry. Its byte slices alias the iterator's
// buffer and are valid until the next call of Next or SeekGE.
func (it *Iter) Entry() *base.Entry { return &it.e }

// Err returns the error that ended the iteration: a *base.CorruptionError
// (base.ErrChecksum, base.ErrCorruption, base.ErrTruncated) or a wrapped read error; nil at
// a clean end.
func (it *Iter) Err() error { return it.err }

// SeekGE positions the iterator so that the next call of Next yields the
// first entry whose Order is at least order (or reports the end). It clears
// nothing but the position: an earlier error stays.
func (it *Iter) SeekGE(order uint64) {
	if it.err != nil {
		return
	}
	idx := it.r.idx
	i, j := 0, len(idx)
	for i < j {
		m := int(uint(i+j) >> 1)
		if idx[m].last < order {
			i = m + 1
		} else {
			j = m
		}
	}
	it.b, it.off, it.loaded = i, 0, false
	if i == len(idx) || idx[i].first >= order {
		return
	}
	if !it.load(i) {
		return
	}
	// The block holds order's run or the first larger Order: find it.
	if off := it.blk.seek(order); off >= 0 {
		it.off = off
		return
	}
	var e base.Entry
	for off := 0; off < len(it.blk.data); {
		next := decodeEntry(it.blk.data, off, &e)
		if next < 0 || e.Order >= order {
			it.off = off
			return
		}
		off = next
	}
	it.off = len(it.blk.data)
}

// Reset points it before the first entry of r, keeping its buffers: a walk
// over the files of one level reads them one after the other through one
// buffer. Any earlier error is forgotten.
func (it *Iter) Reset(r *Reader) {
	*it = Iter{r: r, buf: it.buf[:0], lastOf: -1, lastBuf: it.lastBuf[:0]}
}

// Close releases the iterator's buffer. The iterator must not be used
// afterwards. It returns nil.
func (it *Iter) Close() error {
	it.buf, it.blk, it.loaded = nil, block{}, false
	it.b = len(it.r.idx)
	return nil
}

// load makes block i current, reading it (and the blocks after it, up to
// readAhead bytes) unless the buffer holds it.
func (it *Iter) load(i int) bool {
	idx := it.r.idx
	if i < it.bufLo || i >= it.bufHi {
		j, n := i, 0
		for j < len(idx) && (j == i || n+int(idx[j].length) <= readAhead) {
			n += int(idx[j].length)
			j++
		}
		if cap(it.buf) < n {
			it.buf = make([]byte, max(n, readAhead))
		}
		it.buf = it.buf[:n]
		it.bufLo, it.bufHi = 0, 0
		if err := readAt(it.r.f, it.r.name, it.buf, int64(idx[i].off)); err != nil {
			it.err = err
			return false
		}
		it.bufLo, it.bufHi = i, j
	}
	h := &idx[i]
	start := int(h.off - idx[it.bufLo].off)
	raw := it.buf[start : start+int(h.length)]
	blk, err := parseBlock(raw)
	if err == nil {
		err = blk.validate(h.first, h.last, &it.e)
	}
	if err == nil && it.lastOf == i-1 && i > 0 {
		var first base.Entry
		decodeEntry(blk.data, 0, &first)
		if base.Compare(&it.last, &first) >= 0 {
			err = corrupt(nil, 0, "block %d's first entry does not sort after block %d's last", i, i-1)
		}
	}
	if err != nil {
		it.err = locate(err, it.r.name, int64(h.off))
		return false
	}
	it.lastBuf = append(append(it.lastBuf[:0], it.e.Key...), it.e.UserKey...)
	it.last = base.Entry{Order: it.e.Order, Seq: it.e.Seq,
		Key: it.lastBuf[:len(it.e.Key):len(it.e.Key)], UserKey: it.lastBuf[len(it.e.Key):]}
	it.lastOf = i
	it.blk, it.loaded = blk, true
	return true
}

var _ base.Iterator = (*Iter)(nil)
