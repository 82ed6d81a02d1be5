package sstable

import (
	"fmt"

	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/internal/vfs"
)

// WriterOptions configures a Writer. The zero value gives the defaults.
type WriterOptions struct {
	// BlockSize is the target length of a data block in bytes, trailer and
	// hash index included; default (0) DefaultBlockSize = 16 KiB, values
	// above 1 GiB are clamped. A block is cut before the entry that would take
	// it past BlockSize, so every block holds at least one entry: an entry
	// longer than BlockSize gets a block of its own (an oversized block, which
	// the Cache does not hold; see doc.go, invariant 7).
	BlockSize int
	// BloomBitsPerKey is the filter's bits per distinct Order; default (0)
	// DefaultBloomBitsPerKey = 10 (about 1% false positives), values above 64
	// are clamped, and a negative value writes no filter (MayContain is then
	// true for every Order inside the file's range).
	BloomBitsPerKey int
	// OrdersHint is about how many distinct Orders the caller will add (0:
	// unknown); values above 1<<20 are clamped. The Writer keeps every
	// distinct Order until Finish (for the filter): sized once from the hint,
	// that list is not copied again and again as it grows — a bulk load of a
	// million entries spent a tenth of its time there. A wrong hint costs
	// memory or copies, never correctness.
	OrdersHint int
}

// writeBufferSize is the number of bytes the Writer gathers before one
// File.Write (fewer write operations for crash tests to step through).
const writeBufferSize = 64 << 10

// Writer writes one sstable: entries in entry order (Add), then the filter,
// the file index and the footer (Finish). It buffers up to one block plus
// 64 KiB and keeps the distinct Orders (8 bytes each) and the index
// (28 bytes per block) until Finish.
//
// A Writer is not safe for concurrent use. Background compactions each use
// their own Writer on their own file.
type Writer struct {
	f      vfs.File
	opts   WriterOptions
	out    []byte // header, finished blocks not yet written to f, then the current block's entries
	off    int64  // bytes written to f so far
	blk    int    // start of the current block's entries in out
	runs   []run  // first entry of each Order in the current block
	nBlk   int    // entries in the current block
	index  []byte // index records of finished blocks
	orders []uint64
	meta   Meta
	prev   base.Entry // copy of the last entry added (Key, UserKey in prevBuf)
	prevKB []byte
	err    error
	done   bool
}

// NewWriter returns a Writer that appends an sstable to f, which must be
// empty and open for writing (vfs.FS.Create). The header is written with the
// first block or at Finish.
func NewWriter(f vfs.File, opts WriterOptions) *Writer {
	if opts.BlockSize <= 0 {
		opts.BlockSize = DefaultBlockSize
	}
	opts.BlockSize = min(opts.BlockSize, 1<<30)
	if opts.BloomBitsPerKey == 0 {
		opts.BloomBitsPerKey = DefaultBloomBitsPerKey
	}
	opts.BloomBitsPerKey = min(opts.BloomBitsPerKey, 64)
	w := &Writer{f: f, opts: opts}
	if h := min(opts.OrdersHint, 1<<20); h > 0 {
		w.orders = make([]uint64, 0, h)
	}
	w.out = appendHeader(make([]byte, 0, writeBufferSize+opts.BlockSize))
	w.blk = len(w.out)
	return w
}

// Add appends e, copying its bytes (e may be reused after Add returns).
// Entries must come in strictly increasing entry order (Order asc, Key asc,
// UserKey asc, Seq desc) with a valid Kind; otherwise Add returns
// ErrOutOfOrder and the Writer stays usable (the entry is not added). A write
// error from f is returned wrapped with the offset and is sticky: every later
// Add and Finish return it, and the caller removes the partial file.
func (w *Writer) Add(e *base.Entry) error {
	if w.done {
		return ErrFinished
	}
	if w.err != nil {
		return w.err
	}
	if !e.Kind.Valid() {
		return fmt.Errorf("%w: kind %d is not valid", ErrOutOfOrder, e.Kind)
	}
	if w.meta.Entries > 0 && base.Compare(&w.prev, e) >= 0 {
		return fmt.Errorf("%w: order %#x seq %d after order %#x seq %d (or the same key, seq not descending)",
			ErrOutOfOrder, e.Order, e.Seq, w.prev.Order, w.prev.Seq)
	}
	if entrySize(e) > maxEntrySize {
		return fmt.Errorf("%w: %d bytes", ErrEntryTooLarge, entrySize(e))
	}
	newRun := w.nBlk == 0 || e.Order != w.prev.Order
	if w.nBlk > 0 {
		runs := len(w.runs)
		if newRun {
			runs++
		}
		if blockSize(len(w.out)-w.blk+entrySize(e), runs) > w.opts.BlockSize {
			if err := w.flushBlock(); err != nil {
				return err
			}
			newRun = true
		}
	}
	if newRun {
		w.runs = append(w.runs, run{order: e.Order, off: uint32(len(w.out) - w.blk)})
	}
	w.out = appendEntry(w.out, e)
	w.nBlk++

	// Remember the entry for the order check and the file's properties.
	if w.meta.Entries == 0 || e.Order != w.prev.Order {
		w.orders = append(w.orders, e.Order)
	}
	if w.meta.Entries == 0 {
		w.meta.MinOrder, w.meta.MinSeq, w.meta.MaxSeq = e.Order, e.Seq, e.Seq
	}
	w.meta.MaxOrder = e.Order
	w.meta.MinSeq = min(w.meta.MinSeq, e.Seq)
	w.meta.MaxSeq = max(w.meta.MaxSeq, e.Seq)
	w.meta.Entries++
	if isTombstone(e.Kind) {
		w.meta.Tombstones++
	}
	w.prevKB = append(append(w.prevKB[:0], e.Key...), e.UserKey...)
	w.prev = base.Entry{Order: e.Order, Seq: e.Seq, Kind: e.Kind,
		Key: w.prevKB[:len(e.Key):len(e.Key)], UserKey: w.prevKB[len(e.Key):]}
	return nil
}

// flushBlock finishes the current block into the output buffer and records
// it in the index.
func (w *Writer) flushBlock() error {
	if w.nBlk == 0 {
		return nil
	}
	start := w.blk
	w.out = finishBlock(w.out, start, w.runs, w.nBlk)
	length := len(w.out) - start
	w.index = le.AppendUint64(w.index, w.runs[0].order)
	w.index = le.AppendUint64(w.index, w.prev.Order)
	w.index = le.AppendUint64(w.index, uint64(w.off+int64(start)))
	w.index = le.AppendUint32(w.index, uint32(length))
	w.meta.Blocks++
	w.runs, w.nBlk = w.runs[:0], 0
	if len(w.out) >= writeBufferSize {
		if err := w.flushOut(); err != nil {
			return err
		}
	}
	w.blk = len(w.out)
	return nil
}

// flushOut writes the output buffer to f.
func (w *Writer) flushOut() error {
	if len(w.out) == 0 {
		return nil
	}
	n, err := w.f.Write(w.out)
	if err != nil {
		w.err = fmt.Errorf("write %d bytes at offset %d: %w", len(w.out), w.off, err)
		return w.err
	}
	w.off += int64(n)
	w.out = w.out[:0]
	return nil
}

// EstimatedSize returns the file's size in bytes if Finish were called now,
// without the filter and index: a compaction cuts its output files by it.
func (w *Writer) EstimatedSize() int64 {
	size := w.off + int64(w.blk) + footerSize
	if w.nBlk > 0 {
		size += int64(blockSize(len(w.out)-w.blk, len(w.runs)))
	}
	return size
}

// Entries returns the number of entries added so far.
func (w *Writer) Entries() int64 { return w.meta.Entries }

// LastOrder returns the Order of the last entry added and whether there is
// one; a compaction that must not split one Order across two files compares
// it with the next entry's Order before cutting.
func (w *Writer) LastOrder() (uint64, bool) { return w.prev.Order, w.meta.Entries > 0 }

// Finish writes the last block, the filter, the file index and the footer,
// then syncs f (File.Sync). It does not close f. It returns the file's Meta;
// after a successful Finish the file is complete and durable (its name is
// durable only once the caller syncs the directory). Errors: the sticky write
// error, or the Sync error wrapped (after a failed Sync the file must be
// abandoned, vfs invariant 9); ErrFinished on a second call.
func (w *Writer) Finish() (Meta, error) {
	if w.done {
		return Meta{}, ErrFinished
	}
	if w.err != nil {
		return Meta{}, w.err
	}
	if err := w.flushBlock(); err != nil {
		return Meta{}, err
	}
	w.done = true
	var ft footer
	ft.filterOff = uint64(w.off + int64(len(w.out)))
	if w.opts.BloomBitsPerKey > 0 {
		start := len(w.out)
		w.out = appendFilter(w.out, w.orders, w.opts.BloomBitsPerKey)
		w.out = appendTrailer(w.out, start, blockFilter)
		ft.filterLen = uint64(len(w.out) - start)
	}
	ft.indexOff = ft.filterOff + ft.filterLen
	start := len(w.out)
	w.out = append(w.out, w.index...)
	w.out = appendTrailer(w.out, start, blockIndex)
	ft.indexLen = uint64(len(w.out) - start)
	m := &w.meta
	ft.entries, ft.blocks, ft.tombstones = uint64(m.Entries), uint64(m.Blocks), uint64(m.Tombstones)
	ft.minOrder, ft.maxOrder, ft.minSeq, ft.maxSeq = m.MinOrder, m.MaxOrder, m.MinSeq, m.MaxSeq
	ft.fileSize = ft.indexOff + ft.indexLen + footerSize
	w.out = ft.append(w.out)
	if err := w.flushOut(); err != nil {
		return Meta{}, err
	}
	if err := w.f.Sync(); err != nil {
		w.err = fmt.Errorf("sync after %d bytes: %w", w.off, err)
		return Meta{}, w.err
	}
	m.Size = w.off
	w.orders, w.index = nil, nil
	return *m, nil
}

// Meta describes a finished file: its properties as stored in the footer.
type Meta struct {
	Size       int64  // file size in bytes
	Entries    int64  // number of entries
	Blocks     int64  // number of data blocks
	MinOrder   uint64 // smallest Order (0 if Entries == 0)
	MaxOrder   uint64 // largest Order (0 if Entries == 0)
	MinSeq     uint64 // smallest sequence number (0 if Entries == 0)
	MaxSeq     uint64 // largest sequence number (0 if Entries == 0)
	Tombstones int64  // entries of KindTombstone or KindMapEntryTombstone
}
