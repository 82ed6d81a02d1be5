package slice

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"

	"github.com/strata-db/strata/internal/base"
)

// builder packs a sorted stream of entries into slices: one slice per
// block, cut when the next entry does not fit or crosses a bucket
// boundary (invariant 5). Used by Build, compaction and tests; it holds no
// Table state, so background jobs use their own.
type builder struct {
	a     *Allocator
	shift uint // 64 - bucket bits

	recs   []byte   // records of the pending slice
	fps    []uint64 // pending fingerprints
	offs   []uint32 // pending offsets, relative to recs
	minSeq uint64
	maxSeq uint64
	bucket uint64
	// The pending slice's last record with its key inline: its offset in
	// recs and its key (a copy).
	lastInline int
	lastKey    []byte

	prev    base.Entry // the last entry added (Key, UserKey: copies); Order, Key, UserKey, Seq only
	started bool
	note    func(*base.Expiry, *base.Entry) // Options.Expiry; nil: none
	exp     base.Expiry                     // of the pending slice

	out []*Slice
}

func newBuilder(a *Allocator, shift uint, note func(*base.Expiry, *base.Entry)) *builder {
	return &builder{a: a, shift: shift, recs: make([]byte, 0, a.blockSize), note: note}
}

// add appends e, which must follow the previous entry in (Order, Key,
// UserKey, Seq descending) order. Errors: ErrEntry, ErrUnsorted, or the
// allocator's budget error.
func (b *builder) add(e *base.Entry) error {
	if !e.Kind.Valid() || len(e.Key) > MaxKeySize || len(e.UserKey) > MaxKeySize || len(e.Value) > MaxValueSize {
		return fmt.Errorf("%w: kind %v, key %d, user key %d, value %d bytes", ErrEntry, e.Kind, len(e.Key), len(e.UserKey), len(e.Value))
	}
	if len(e.UserKey) > 0 && !isMapKind(e.Kind) {
		return fmt.Errorf("%w: a %v entry with a user key", ErrEntry, e.Kind)
	}
	if b.started {
		if base.Compare(&b.prev, e) >= 0 {
			return fmt.Errorf("%w: order %#x seq %d after order %#x seq %d", ErrUnsorted, e.Order, e.Seq, b.prev.Order, b.prev.Seq)
		}
	}
	b.started = true
	b.prev.Order, b.prev.Seq = e.Order, e.Seq
	b.prev.Key = append(b.prev.Key[:0], e.Key...)
	b.prev.UserKey = append(b.prev.UserKey[:0], e.UserKey...)

	// The key is a reference to the pending slice's last inline key when
	// it is the same (the other versions of a key, a map's entries).
	ref := 0
	if len(b.fps) > 0 && bytes.Equal(e.Key, b.lastKey) {
		ref = len(b.recs) - b.lastInline
	}
	rs := recordSize(e, ref)
	bucket := e.Order >> b.shift
	if n := len(b.fps); n > 0 && (bucket != b.bucket || headerSize+(fpSize+offSize)*(n+1)+len(b.recs)+rs > b.a.blockSize) {
		if err := b.flush(); err != nil {
			return err
		}
		ref = 0 // the first record of a slice holds its key
	}
	if len(b.fps) == 0 {
		b.bucket, b.minSeq, b.maxSeq = bucket, e.Seq, e.Seq
	}
	if ref == 0 {
		b.lastInline = len(b.recs)
		b.lastKey = append(b.lastKey[:0], e.Key...)
	}
	b.fps = append(b.fps, e.Order)
	b.offs = append(b.offs, uint32(len(b.recs)))
	b.recs = appendRecord(b.recs, e, ref)
	b.minSeq, b.maxSeq = min(b.minSeq, e.Seq), max(b.maxSeq, e.Seq)
	if b.note != nil {
		b.note(&b.exp, e)
	}
	if headerSize+(fpSize+offSize)+len(b.recs) > b.a.blockSize {
		return b.flush() // an oversized entry gets a slice of its own
	}
	return nil
}

// flush writes the pending entries as one slice.
func (b *builder) flush() error {
	n := len(b.fps)
	if n == 0 {
		return nil
	}
	base := headerSize + (fpSize+offSize)*n
	size := base + len(b.recs)
	mem, ref, err := b.a.alloc(size)
	if err != nil {
		return err
	}
	buf := mem[:size]
	le := binary.LittleEndian
	le.PutUint32(buf[hdrMagic:], sliceMagic)
	le.PutUint16(buf[hdrVersion:], formatVersion)
	buf[hdrCsum] = csumCRC32C
	buf[hdrFlags] = 0
	le.PutUint32(buf[hdrSize:], uint32(size))
	le.PutUint32(buf[hdrCount:], uint32(n))
	le.PutUint64(buf[hdrMinOrd:], b.fps[0])
	le.PutUint64(buf[hdrMaxOrd:], b.fps[n-1])
	le.PutUint64(buf[hdrMinSeq:], b.minSeq)
	le.PutUint64(buf[hdrMaxSeq:], b.maxSeq)
	clear(buf[hdrCRC:headerSize])
	for i, fp := range b.fps {
		le.PutUint64(buf[headerSize+fpSize*i:], fp)
		le.PutUint32(buf[headerSize+fpSize*n+offSize*i:], uint32(base)+b.offs[i])
	}
	copy(buf[base:], b.recs)
	le.PutUint32(buf[hdrCRC:], checksum(buf))
	sl := newSlice(buf, len(mem), ref)
	sl.exp, b.exp = b.exp, sl.exp // sl.exp is zero: the pending summary starts over
	b.out = append(b.out, sl)
	b.fps, b.offs, b.recs = b.fps[:0], b.offs[:0], b.recs[:0]
	return nil
}

// finish flushes and returns the slices built, in entry order.
func (b *builder) finish() ([]*Slice, error) {
	if err := b.flush(); err != nil {
		return nil, err
	}
	out := b.out
	b.out = nil
	return out, nil
}

// abort frees every slice built so far.
func (b *builder) abort() {
	for _, s := range b.out {
		b.a.release(s.ref)
	}
	b.out = nil
}

// Build packs the entries of it — which must come in (Order, Key, UserKey,
// Seq descending) order, as base.Iterator documents for the tiers below
// the FreshTable — into new slices for t and returns them in entry order,
// ready for Install. A slice never spans two buckets; versions of one key
// may span adjacent slices (Install keeps them in order).
//
// Build is the core of the FreshTable → SliceTable transform. It is a pure
// function of its input and t's fixed configuration (bucket bits,
// allocator): it may run on any goroutine, concurrently with the owner's
// use of t and with other Builds. It checks ctx every 256 entries.
// Errors: ErrUnsorted, ErrEntry, it.Err(), ctx.Err(), or a wrapped
// memory.ErrMemoryBudget; on error nothing stays allocated.
func (t *Table) Build(ctx context.Context, it base.Iterator) ([]*Slice, error) {
	b := newBuilder(t.a, t.shift, t.opts.Expiry)
	for n := 0; it.Next(); n++ {
		if n&255 == 255 {
			if err := ctx.Err(); err != nil {
				b.abort()
				return nil, err
			}
		}
		if err := b.add(it.Entry()); err != nil {
			b.abort()
			return nil, err
		}
	}
	if err := it.Err(); err != nil {
		b.abort()
		return nil, err
	}
	out, err := b.finish()
	if err != nil {
		b.abort()
		return nil, err
	}
	return out, nil
}
