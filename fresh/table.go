package fresh

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/internal/invariants"
	"github.com/strata-db/strata/memory"
)

// MaxKeySize is the largest key, map key or user key in bytes.
const MaxKeySize = 1<<16 - 1

// Status is the outcome of a lookup in the FreshTable: base.Status, shared
// with the SliceTable and the read path (Absent: older tiers may hold the
// key; Found: returned; Deleted: a tombstone or a cleared map shadows older
// tiers).
type Status = base.Status

// The statuses, as base defines them.
const (
	Absent  = base.Absent
	Found   = base.Found
	Deleted = base.Deleted
)

// Options configures a Table.
type Options struct {
	// Pool is required: data segments come from Pool.Get(PurposeFreshData),
	// indices are mapped with Pool.Budget().Map(..., PurposeFreshIndex).
	Pool *memory.Pool

	// StartSeq is the sequence number the Table continues after: the first
	// write gets StartSeq+1 (Seq returns StartSeq until then). A store
	// reopened over a lower tier whose newest sequence number is L (the
	// LsmStore's LastSeq) passes L, so its writes are newer than everything
	// below. Default 0. Records store the low 56 bits of a sequence number
	// (doc.go, "Record"), so StartSeq must be below MaxStartSeq, which
	// leaves 2^40 writes before the 56-bit field could wrap; New returns
	// ErrStartSeq otherwise.
	StartSeq uint64

	// dataLimit, when > 0, caps the bytes used of each segment (tests use
	// it to force many seals with the Pool's 16 MiB minimum).
	dataLimit int
}

// MaxStartSeq bounds Options.StartSeq: 2^56 − 2^40. A Table's sequence
// numbers stay below 2^56 (the record's seq field) for at least 2^40 writes
// after it, so the low 56 bits stored in a record order writes correctly.
const MaxStartSeq = 1<<seqBits - 1<<40

// Table is the FreshTable of one store: the active segment and the sealed
// segments (oldest first in segs). A Table is NOT safe for concurrent use:
// one goroutine (the task's) uses it, like a Flink task thread.
type Table struct {
	pool     *memory.Pool
	budget   *memory.Budget
	limit    uint32 // data bytes per segment
	maxValue uint32 // largest value or batch: segment size / 4
	segs     []*segment
	active   *segment // segs[len-1] unless sealed, or nil
	seq      uint64
	closed   bool
	dropped  int64      // segments dropped by DropSealed (MapIter rebases on it)
	pins     int        // PinSealed count
	deferred []*segment // dropped while pinned: memory kept until pins is 0
	rolls    uint64     // segments taken as active (roll), ever
	// idxHint is the largest index (bytes) a sealed segment of this Table has had: roll maps
	// the next index at that size, so a steady workload's segments do not double their index
	// from minIndexBytes, rehashing every slot at each step (doc.go, "Index size"). 0 before
	// the first seal.
	idxHint int
	sink    uint64    // bytes touched by Prefetch (kept so the loads are not elided)
	memo    probeMemo // the last read's probe of the active segment (invariant 13)
}

// memoKeyMax is the longest key whose absence the remembered probe keeps
// (a copy of the key, so that a write of another key with the same hash
// cannot take the memo for its own).
const memoKeyMax = 96

// probeMemo is the result of the last Get's or ListGet's probe of the
// active segment (doc.go, invariant 13): valid while roll, mask and seq
// are the Table's and the hash and key are the same. roll 0 matches no
// active segment (rolls counts from 1).
type probeMemo struct {
	h    uint64
	seq  uint64 // Table.seq at the probe
	roll uint64 // Table.rolls at the probe: which active segment
	mask uint32 // the segment's index mask at the probe: a growth moves slots
	pos  uint32 // findKey's pos: the slot found, or the empty slot for an insert
	off  uint32 // findKey's off: the record, 0 when absent
	klen uint32 // bytes of key (absent only)
	key  [memoKeyMax]byte
}

// remember keeps the probe (pos, off) of key (hash h) in the active
// segment s for the write that may follow (invariant 13).
func (t *Table) remember(s *segment, h uint64, key []byte, pos, off uint32) {
	m := &t.memo
	if off == 0 {
		if len(key) > memoKeyMax {
			m.roll = 0
			return
		}
		m.klen = uint32(copy(m.key[:], key))
	}
	m.h, m.seq, m.roll, m.mask, m.pos, m.off = h, t.seq, t.rolls, s.mask, pos, off
}

// probe is s.findKey(h, key) for the active segment s, answered from the
// remembered probe when it is still valid for key (invariant 13).
func (t *Table) probe(s *segment, h uint64, key []byte) (pos, off uint32) {
	m := &t.memo
	if m.h == h && m.seq == t.seq && m.roll == t.rolls && m.mask == s.mask {
		if off := m.off; off != 0 {
			r := s.data[off : off+keyHdrSize]
			klen := uint32(binary.LittleEndian.Uint16(r[8:]))
			if RecordKind(r[7]&0xF) != KindMapEntry && klen == uint32(len(key)) &&
				string(s.data[off+keyHdrSize:off+keyHdrSize+klen]) == string(key) {
				return m.pos, off
			}
		} else if m.klen == uint32(len(key)) && string(m.key[:m.klen]) == string(key) {
			return m.pos, 0
		}
	}
	return s.findKey(h, key)
}

// New returns an empty Table whose sequence numbers continue after
// opts.StartSeq. No memory is mapped until the first write. Errors:
// ErrStartSeq (wrapped, with the value) if StartSeq >= MaxStartSeq; a plain
// error without a Pool or with a segment size out of range.
func New(opts Options) (*Table, error) {
	if opts.Pool == nil {
		return nil, errors.New("fresh: Options.Pool is required")
	}
	if opts.StartSeq >= MaxStartSeq {
		return nil, fmt.Errorf("%w: Options.StartSeq = %d, want < %d (2^56 - 2^40)", ErrStartSeq, opts.StartSeq, uint64(MaxStartSeq))
	}
	size := opts.Pool.SegmentSize()
	limit := size
	if opts.dataLimit > 0 && opts.dataLimit < size {
		limit = opts.dataLimit
	}
	if limit < 1024 || size > 1<<31 {
		return nil, fmt.Errorf("fresh: segment data limit %d out of range", limit)
	}
	return &Table{
		pool:     opts.Pool,
		budget:   opts.Pool.Budget(),
		limit:    uint32(limit),
		maxValue: uint32(limit / 4),
		seq:      opts.StartSeq,
	}, nil
}

// Close releases every segment (back to the Pool) and index, those dropped
// while pinned (PinSealed) included, whatever the pin count: a background
// reader of a sealed segment must be done before Close. Slices returned
// earlier become invalid. Later calls return base.ErrClosed.
func (t *Table) Close() error {
	if t.closed {
		return base.ErrClosed
	}
	t.closed = true
	first := t.releaseDeferred()
	for _, s := range t.segs {
		if err := t.release(s); err != nil && first == nil {
			first = fmt.Errorf("release segment index: %w", err)
		}
	}
	t.segs, t.active = nil, nil
	return first
}

// Seq returns the sequence number of the last write. Every write, in place
// or appended, advances it (by 1; by 2 for a MapPut or MapRemove that also
// writes the map's header in the active segment, so that header and entry
// have distinct sequence numbers); the low 56 bits are stored in the
// record. It starts at Options.StartSeq and continues across Seal and
// DropSealed.
func (t *Table) Seq() uint64 { return t.seq }

// Seal seals the active segment now: it stays readable and read-only, and
// the next write takes a new segment from the Pool. A no-op when there is
// no active segment or it holds no record.
func (t *Table) Seal() error {
	if t.closed {
		return base.ErrClosed
	}
	if s := t.active; s != nil && s.used > segHeaderSize {
		s.sealed = true
		t.active = nil
		t.idxHint = max(t.idxHint, len(s.idx))
		if invariants.Enabled {
			if err := t.Verify(); err != nil {
				panic("strata: invariant: fresh: after a seal: " + err.Error())
			}
		}
	}
	return nil
}

// Active reports whether an active segment holds a record (ok), and which
// one: id differs for every segment the Table has made active, so an owner
// that sees the same id twice knows the same records may have waited in
// the active segment in between (the engine's TTL sweep seals a segment
// that stayed active too long). O(1).
func (t *Table) Active() (id uint64, ok bool) {
	if s := t.active; s != nil && s.used > segHeaderSize {
		return t.rolls, true
	}
	return 0, false
}

// Stats describes the memory of a Table.
type Stats struct {
	Segments       int   // data segments held (active and sealed)
	Sealed         int   // sealed segments
	DataBytes      int64 // bytes used in data segments (headers, records, garbage)
	IndexBytes     int64 // bytes mapped for segment indices
	Records        int64 // records written (live and garbage)
	GarbageRecords int64 // records superseded inside their segment
	GarbageBytes   int64 // bytes of those records

	// SealedDataBytes is the part of DataBytes in sealed segments: what a
	// transform of every sealed segment reads.
	SealedDataBytes int64
	// SealedBytes is the memory mapped for sealed segments, data segments
	// (whole Pool segments) and their indices: what DropSealed of every
	// sealed segment gives back to the Pool and Budget.
	SealedBytes int64
	// DroppedSegments counts the sealed segments dropped (DropSealed) in
	// the Table's life.
	DroppedSegments int64
	// PinnedBytes is the memory of segments dropped while pinned
	// (PinSealed): data segments and indices still mapped and counted by
	// the Budget, given back at the last UnpinSealed. Not part of the
	// figures above, which describe the segments on the read path.
	PinnedBytes int64
}

// Stats returns the current figures; O(segments).
func (t *Table) Stats() Stats {
	st := Stats{DroppedSegments: t.dropped}
	for _, s := range t.deferred {
		st.PinnedBytes += int64(len(s.region.Bytes()) + len(s.iReg.Bytes()))
	}
	for _, s := range t.segs {
		st.Segments++
		if s.sealed {
			st.Sealed++
			st.SealedDataBytes += int64(s.used)
			st.SealedBytes += int64(len(s.region.Bytes()) + len(s.iReg.Bytes()))
		}
		st.DataBytes += int64(s.used)
		st.IndexBytes += int64(len(s.idx))
		st.Records += s.records
		st.GarbageRecords += s.deadRecords
		st.GarbageBytes += s.deadBytes
	}
	return st
}

// Prepare maps the active segment and its index now if there is none, so
// that the next write does not need to map them (a Store maps its first
// segment at Open: an Open that succeeds never sees its first write fail for
// memory). Errors: memory.ErrMemoryBudget (nothing mapped), base.ErrClosed.
func (t *Table) Prepare() error {
	if t.closed {
		return base.ErrClosed
	}
	if t.active != nil {
		return nil
	}
	_, err := t.roll()
	return err
}

// roll seals the active segment (if any) and takes a new one with a fresh
// index. On error nothing changes.
func (t *Table) roll() (*segment, error) {
	r, err := t.pool.Get(memory.PurposeFreshData)
	if err != nil {
		return nil, fmt.Errorf("new segment %d: %w", len(t.segs), err)
	}
	if len(r.Bytes()) < int(t.limit) {
		panic("strata: invariant: pool segment smaller than the data limit")
	}
	var ir *memory.Region
	if t.idxHint > minIndexBytes {
		if ir, err = t.budget.Map(t.idxHint, memory.PurposeFreshIndex); err != nil {
			ir = nil
		}
	}
	if ir == nil { // no hint, or the budget refused it: start small and grow, as before
		if ir, err = t.budget.Map(minIndexBytes, memory.PurposeFreshIndex); err != nil {
			t.pool.Put(r)
			return nil, fmt.Errorf("map index of segment %d: %w", len(t.segs), err)
		}
	}
	s := &segment{region: r, data: r.Bytes()[:t.limit:t.limit], used: segHeaderSize}
	s.setIndex(ir)
	putSegmentHeader(s.data, t.limit)
	if t.active != nil {
		t.active.sealed = true
	}
	t.segs = append(t.segs, s)
	t.active = s
	t.rolls++
	return s, nil
}

// prepare makes the active segment able to take need more bytes and slots
// more index slots, sealing and rolling or growing the index as needed.
// changed reports whether the active segment or its index moved, so that
// positions found before are stale. On error nothing was written.
func (t *Table) prepare(need, slots uint32) (s *segment, changed bool, err error) {
	if t.closed {
		return nil, false, base.ErrClosed
	}
	s = t.active
	if s == nil || s.used+need > t.limit {
		if need > t.limit-segHeaderSize {
			return nil, false, fmt.Errorf("%w: record of %d bytes exceeds a segment's %d data bytes", ErrValueTooLarge, need, t.limit-segHeaderSize)
		}
		if s != nil {
			t.idxHint = max(t.idxHint, len(s.idx))
		}
		if s, err = t.roll(); err != nil {
			return nil, false, err
		}
		changed = true
	}
	for s.count+slots > s.growAt && !s.tailFits(t.limit, slots) {
		if err = s.grow(t.budget); err != nil {
			return nil, false, err
		}
		changed = true
	}
	return s, changed, nil
}

// CheckSizes returns the error a write of key, map user key userKey and value (or list
// batch) would fail with for their sizes alone — ErrKeyTooLarge, ErrValueTooLarge — or nil.
// The engine asks it before it waits for room elsewhere for the write (its changelog
// record), so that a write too large is refused as such, not for memory. Allocates nothing
// unless it returns an error.
func (t *Table) CheckSizes(key, userKey, value []byte) error {
	if len(userKey) > MaxKeySize {
		return fmt.Errorf("%w: %d bytes > %d", ErrKeyTooLarge, len(userKey), MaxKeySize)
	}
	if len(key) > MaxKeySize {
		return fmt.Errorf("%w: %d bytes > %d", ErrKeyTooLarge, len(key), MaxKeySize)
	}
	if uint64(len(value)) > uint64(t.maxValue) {
		return fmt.Errorf("%w: %d bytes > %d", ErrValueTooLarge, len(value), t.maxValue)
	}
	return nil
}

func (t *Table) checkKV(key, value []byte) error {
	if t.closed {
		return base.ErrClosed
	}
	if len(key) > MaxKeySize {
		return fmt.Errorf("%w: %d bytes > %d", ErrKeyTooLarge, len(key), MaxKeySize)
	}
	if uint64(len(value)) > uint64(t.maxValue) {
		return fmt.Errorf("%w: %d bytes > %d", ErrValueTooLarge, len(value), t.maxValue)
	}
	return nil
}

// Get returns the value of key (hash h), Found; or Deleted when a
// tombstone shadows older data; or Absent. It searches the active segment,
// then sealed segments newest first. The value aliases segment memory and
// is valid until the next write to the Table. Allocates nothing.
func (t *Table) Get(h uint64, key []byte) ([]byte, Status) {
	for i := len(t.segs) - 1; i >= 0; i-- {
		s := t.segs[i]
		pos, off := s.findKey(h, key)
		if s == t.active {
			t.remember(s, h, key, pos, off)
		}
		if off == 0 {
			continue
		}
		r := s.data[off:]
		switch RecordKind(r[7] & 0xF) {
		case KindValue:
			a := keyHdrSize + uint32(len(key))
			b := a + binary.LittleEndian.Uint32(r[12:])
			return r[a:b:b], Found
		case KindTombstone:
			return nil, Deleted
		}
		return nil, Absent // a key is used with one record family
	}
	return nil, Absent
}

// Put sets the value of key (hash h). It writes in place when the newest
// record of key is a value or tombstone in the active segment whose
// capacity holds value; otherwise it appends a record and repoints the
// index (the old record becomes garbage). Errors: ErrKeyTooLarge,
// ErrValueTooLarge, base.ErrClosed, or a wrapped memory.ErrMemoryBudget when a
// new segment or a larger index cannot be mapped; nothing is written then.
// Allocates nothing unless it errs.
func (t *Table) Put(h uint64, key, value []byte) error {
	if err := t.checkKV(key, value); err != nil {
		return err
	}
	var pos, old uint32
	if s := t.active; s != nil {
		pos, old = t.probe(s, h, key)
		if old != 0 {
			r := s.data[old:]
			if k := RecordKind(r[7] & 0xF); k == KindValue || k == KindTombstone {
				c := binary.LittleEndian.Uint32(r[12:]) + uint32(binary.LittleEndian.Uint16(r[10:]))
				n := uint32(len(value))
				if n <= c && c-n <= maxSlack {
					t.seq++
					binary.LittleEndian.PutUint64(r, meta(t.seq, KindValue, 0))
					binary.LittleEndian.PutUint16(r[10:], uint16(c-n))
					binary.LittleEndian.PutUint32(r[12:], n)
					copy(r[keyHdrSize+uint32(len(key)):], value)
					return nil
				}
			}
		}
	}
	return t.appendKV(h, key, value, KindValue, pos, old)
}

// appendKV appends a value or tombstone as the newest record of key; pos
// and old come from a lookup in the active segment (old == 0: none, and pos
// is the empty slot for the insert, invariant 12).
func (t *Table) appendKV(h uint64, key, value []byte, kind RecordKind, pos, old uint32) error {
	size := keyHdrSize + uint32(len(key)) + uint32(len(value))
	s, changed, err := t.prepare(size, 1)
	if err != nil {
		return err
	}
	if changed || t.active != s {
		pos, old = s.findKey(h, key)
	}
	t.seq++
	off := s.alloc(size)
	r := s.data[off : off+size]
	binary.LittleEndian.PutUint64(r, meta(t.seq, kind, 0))
	binary.LittleEndian.PutUint16(r[8:], uint16(len(key)))
	binary.LittleEndian.PutUint16(r[10:], 0)
	binary.LittleEndian.PutUint32(r[12:], uint32(len(value)))
	copy(r[keyHdrSize:], key)
	copy(r[keyHdrSize+len(key):], value)
	if old != 0 {
		s.setSlot(pos, off)
		s.kill(old, t.seq)
	} else {
		s.insertAt(pos, h, off)
	}
	return nil
}

// Delete writes a tombstone for key (hash h): later Gets return Deleted
// until the next Put. In place when the newest record is a value in the
// active segment. Errors as Put.
func (t *Table) Delete(h uint64, key []byte) error {
	if err := t.checkKV(key, nil); err != nil {
		return err
	}
	var pos, old uint32
	if s := t.active; s != nil {
		pos, old = t.probe(s, h, key)
		if old != 0 {
			r := s.data[old:]
			if k := RecordKind(r[7] & 0xF); k == KindValue || k == KindTombstone {
				c := binary.LittleEndian.Uint32(r[12:]) + uint32(binary.LittleEndian.Uint16(r[10:]))
				if c <= maxSlack {
					t.seq++
					binary.LittleEndian.PutUint64(r, meta(t.seq, KindTombstone, 0))
					binary.LittleEndian.PutUint16(r[10:], uint16(c))
					binary.LittleEndian.PutUint32(r[12:], 0)
					return nil
				}
			}
		}
	}
	return t.appendKV(h, key, nil, KindTombstone, pos, old)
}
