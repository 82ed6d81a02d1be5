package changelog

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strata-db/strata/checkpoint"
	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/memory"
)

// Defaults of WriterOptions (Flink's dstl.dfs.batch.persist-delay, persist-size-threshold and
// preemptive-persist-threshold).
const (
	DefaultPersistDelay        = 10 * time.Millisecond
	DefaultThreshold           = 10 << 20
	DefaultPreemptiveThreshold = 5 << 20
	// MaxThreshold bounds WriterOptions.Threshold (2 GiB): an object the Writer persists holds
	// at most that much, so the ranges a restore reads of it stay below the 4 GiB its record
	// index addresses (Collect).
	MaxThreshold = 2 << 30

	// chargeGranule is how many bytes a Log charges the Budget (and the Writer's buffered
	// count) at a time, so that the shared counters are touched once per granule, not per
	// record.
	chargeGranule = 16 << 10
)

// WriterOptions configures a Writer.
type WriterOptions struct {
	// Storage receives the changelog objects (checkpoint.Storage.Put). Required.
	Storage checkpoint.Storage
	// Prefix is the first name segment of every object: the writer's owner, one per process
	// (e.g. "tm-<id>"), so a persist packs every Store of the process into one object.
	// Required; a valid checkpoint owner (checkpoint.ValidateOwner).
	Prefix string
	// Budget, if not nil, is charged for the bytes buffered (memory.PurposeChangelog, in
	// granules of 16 KiB per Log) until a persist stores them; Append fails with an error
	// matching memory.ErrMemoryBudget when it refuses.
	Budget *memory.Budget
	// PersistDelay is how long records may wait before PersistDue reports a persist due
	// (time); 0 means DefaultPersistDelay (10 ms).
	PersistDelay time.Duration
	// Threshold is the most bytes the Writer buffers, in flight included (bytes): beyond it
	// Append refuses with an error matching memory.ErrMemoryBudget (backpressure, Flink's
	// in-flight data limit). 0 means DefaultThreshold (10 MiB); at most MaxThreshold.
	Threshold int64
	// PreemptiveThreshold is the buffered size at which PersistDue reports a persist due
	// before PersistDelay (bytes); 0 means DefaultPreemptiveThreshold (5 MiB). At most
	// Threshold.
	PreemptiveThreshold int64
	// InFlight, if not nil, protects the objects from checkpoint.GC while a Log references
	// them: each object's name is added once per segment before its Put, and released when
	// the Put fails or when the Log holding that segment's handle drops it (Truncate, Close).
	// A Writer whose Prefix is a Store's checkpoint owner needs it (that Store's GC lists the
	// objects; a persisted segment is in no manifest until a checkpoint lists it). nil: the
	// GC's grace period is the only protection.
	InFlight *checkpoint.InFlight
}

// Validate fills in defaults and returns an error naming the first bad field.
func (o *WriterOptions) Validate() error {
	if o.Storage == nil {
		return errors.New("changelog: WriterOptions.Storage is nil")
	}
	if err := checkpoint.ValidateOwner(o.Prefix); err != nil {
		return fmt.Errorf("changelog: WriterOptions.Prefix: %w", err)
	}
	if o.PersistDelay == 0 {
		o.PersistDelay = DefaultPersistDelay
	}
	if o.Threshold == 0 {
		o.Threshold = DefaultThreshold
	}
	if o.PreemptiveThreshold == 0 {
		o.PreemptiveThreshold = min(DefaultPreemptiveThreshold, o.Threshold)
	}
	switch {
	case o.PersistDelay < 0:
		return fmt.Errorf("changelog: WriterOptions.PersistDelay %v is negative", o.PersistDelay)
	case o.Threshold < 0 || o.Threshold > MaxThreshold:
		return fmt.Errorf("changelog: WriterOptions.Threshold %d outside [0, MaxThreshold %d]", o.Threshold, int64(MaxThreshold))
	case o.PreemptiveThreshold < 0 || o.PreemptiveThreshold > o.Threshold:
		return fmt.Errorf("changelog: WriterOptions.PreemptiveThreshold %d outside [0, Threshold %d]", o.PreemptiveThreshold, o.Threshold)
	}
	return nil
}

// Writer buffers the change records of several Stores of one process and persists them
// together, one object per Persist (doc.go, "Writer protocol"). It starts no goroutine: the
// engine's scheduler asks PersistDue and calls Persist. Safe for concurrent use.
type Writer struct {
	opts WriterOptions

	buffered   atomic.Int64 // bytes charged by every Log, in flight included
	dirty      atomic.Bool  // a record was appended since the last swap
	dirtySince atomic.Int64 // unix ns when PersistDue first saw dirty; 0 none
	closed     atomic.Bool

	logsMu sync.Mutex
	logs   []*Log

	persistMu sync.Mutex // one Persist at a time; guards the fields below and every Log's pending
	nextID    uint64     // object counter, in names
	obj       []byte     // the object being written, reused
	infos     []SegmentInfo

	// freeMu guards free: the Writer's idle chunks (doc.go, "Record buffer"), taken by an
	// Append that fills its chunk and given back by Persist and Close; touched once per
	// chunk, never per record.
	freeMu sync.Mutex
	free   *chunk // linked by next
	nFree  int
}

// NewWriter returns a Writer. Errors: WriterOptions.Validate's.
func NewWriter(o WriterOptions) (*Writer, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	return &Writer{opts: o}, nil
}

// Log returns a new Log of the Store store (its checkpoint owner, checkpoint.ValidateOwner)
// owning the key groups kg. A Store calls it once; two Logs of one store id are allowed
// (a restore beside a closing Store) and kept apart. Errors: a *checkpoint.NameError, ErrClosed,
// an error for an empty kg or one outside [0, 65535] (key groups are 16 bits in a segment).
func (w *Writer) Log(store string, kg KeyGroupRange) (*Log, error) {
	if err := checkpoint.ValidateOwner(store); err != nil {
		return nil, fmt.Errorf("changelog: store id: %w", err)
	}
	if kg.Start > kg.End {
		return nil, fmt.Errorf("changelog: key-group range %s is empty", kg)
	}
	if kg.Start < 0 || kg.End > math.MaxUint16 {
		return nil, fmt.Errorf("changelog: key-group range %s does not fit 16-bit key groups", kg)
	}
	w.logsMu.Lock()
	defer w.logsMu.Unlock()
	if w.closed.Load() {
		return nil, ErrClosed
	}
	l := &Log{w: w, store: store, kg: kg}
	w.logs = append(w.logs, l)
	return l, nil
}

// Buffered returns the bytes the Writer's Logs have charged (buffered or being persisted),
// in granules of 16 KiB per Log.
func (w *Writer) Buffered() int64 { return w.buffered.Load() }

// PersistDue reports whether Persist should run at now: the buffered bytes reached
// PreemptiveThreshold, or records have waited PersistDelay. Age is measured from the first
// PersistDue call that saw records buffered (Append reads no clock), so the scheduler's
// polling period adds to the delay. Cheap (atomics only); safe for concurrent use.
func (w *Writer) PersistDue(now time.Time) bool {
	if w.buffered.Load() >= w.opts.PreemptiveThreshold {
		return true
	}
	if !w.dirty.Load() {
		return false
	}
	since := w.dirtySince.Load()
	if since == 0 {
		w.dirtySince.CompareAndSwap(0, now.UnixNano())
		return w.opts.PersistDelay <= 0
	}
	return now.UnixNano()-since >= int64(w.opts.PersistDelay)
}

// Close closes the Writer: every Log's unpersisted records are dropped and their bytes
// refunded, and later Appends fail with ErrClosed. It waits for a running Persist.
func (w *Writer) Close() {
	w.persistMu.Lock()
	defer w.persistMu.Unlock()
	w.logsMu.Lock()
	w.closed.Store(true)
	logs := w.logs
	w.logs = nil
	w.logsMu.Unlock()
	for _, l := range logs {
		l.drop()
	}
	w.freeMu.Lock()
	idle := w.free
	w.free, w.nFree = nil, 0
	w.freeMu.Unlock()
	w.putChunks(idle) // closed: unmapped
}

// Log is one Store's part of a Writer: its buffer of records, the handles of its persisted
// segments, and how far they reach. Append is for the Store's goroutine; the other methods
// are safe for concurrent use.
type Log struct {
	w     *Writer
	store string
	kg    KeyGroupRange

	// owner is set by OwnerBatch: Append fills own without mu, Publish hands it to cur.
	// Written before the first Append, read by the owner only.
	owner bool
	// own is the owner batch (doc.go, "Writer protocol" 1): only the owner's Append, Publish
	// and the Log's closing touch it, never under mu.
	own batch
	// appendSeq is the largest seq Append took (seq order): the owner's, under mu without
	// an owner batch.
	appendSeq uint64

	// mu guards the active buffer: taken by Append without an owner batch (the owner), by
	// Publish, and once per persist by Persist's swap, so it is uncontended in the common
	// case.
	mu      sync.Mutex
	cur     batch
	lastSeq uint64 // the largest seq in cur or before it (published)
	closed  atomic.Bool
	// reserved is charged room no buffer holds yet (Reserve): Append draws on it before it
	// charges. Changed under mu; read without it by Reserve's fast path.
	reserved atomic.Int64
	// appended counts the records and bytes (encoded) Append took (LogStats).
	appendedRecords, appendedBytes int64

	// pending is what a failed Persist could not store, kept for the next; guarded by
	// w.persistMu.
	pending batch

	persisted atomic.Uint64 // every record with seq <= persisted is persisted

	hmu     sync.Mutex
	handles []checkpoint.Object // persisted, not truncated; MinOrder/MaxOrder are seqs
	// persisted counts the records and bytes of the segments Persist stored (LogStats);
	// guarded by hmu.
	persistedRecords, persistedBytes int64
}

// LogStats counts what went through one Log since Writer.Log created it (Log.Stats).
type LogStats struct {
	// AppendedRecords and AppendedBytes count the records Append buffered and their encoded
	// bytes (record headers included, segment headers not).
	AppendedRecords, AppendedBytes int64
	// PersistedRecords and PersistedBytes count the records of the segments Persist stored
	// for the Log and those segments' bytes (the segment's record count header included).
	PersistedRecords, PersistedBytes int64
}

// Stats returns the Log's counts. Safe for concurrent use with Append and Persist.
func (l *Log) Stats() LogStats {
	l.mu.Lock()
	st := LogStats{AppendedRecords: l.appendedRecords, AppendedBytes: l.appendedBytes}
	l.mu.Unlock()
	l.hmu.Lock()
	st.PersistedRecords, st.PersistedBytes = l.persistedRecords, l.persistedBytes
	l.hmu.Unlock()
	return st
}

// batch is records of one Log not yet persisted: their bytes, in order, in a list of chunks
// (a record may span chunks). Its first record begins its head chunk and has the sequence
// number delta 0 (its segment's MinSeq is its own seq).
type batch struct {
	head, tail     *chunk
	size           int // bytes of records in the chunks
	n              uint32
	minSeq, maxSeq uint64
	kgLo, kgHi     uint16
	charged        int64 // bytes charged for the records and the segment header
	// joins are the first records of the batches merged into this one (merge): each was
	// encoded with delta 0 as the first of its own batch, and Persist writes it with its
	// delta from the record before it in this batch. Only after a failed persist.
	joins []join
}

// join marks a chunk that begins with a record encoded with delta 0 whose delta in its
// segment is delta (batch.joins).
type join struct {
	at    *chunk
	delta uint64
}

func (b *batch) empty() bool { return b.n == 0 }

// merge appends o's records (and charge) after b's; b must not be empty. o's chunks move to b.
func (b *batch) merge(o *batch) {
	b.charged += o.charged
	if o.head == nil {
		return
	}
	if o.n > 0 {
		b.joins = append(b.joins, join{at: o.head, delta: o.minSeq - b.maxSeq})
	}
	b.joins = append(b.joins, o.joins...)
	b.tail.next = o.head
	b.tail = o.tail
	b.size += o.size
	b.n += o.n
	b.maxSeq = o.maxSeq
	b.kgLo, b.kgHi = min(b.kgLo, o.kgLo), max(b.kgHi, o.kgHi)
}

// chunkSize is the size of a record buffer chunk (doc.go, "Record buffer"): 64 KiB mapped
// outside the Go heap.
const chunkSize = 64 << 10

// chunk is a piece of a Log's record buffer: off-heap bytes (memory.MapScratch) of which the
// first n hold records. Owned by one batch, or idle in its Writer's free list.
type chunk struct {
	mem  []byte
	n    int
	next *chunk
}

// getChunk returns an empty chunk: an idle one of the Writer, or a new mapping. Called by
// Append, once per chunk filled.
func (w *Writer) getChunk() (*chunk, error) {
	w.freeMu.Lock()
	if c := w.free; c != nil {
		w.free, c.next, c.n = c.next, nil, 0
		w.nFree--
		w.freeMu.Unlock()
		return c, nil
	}
	w.freeMu.Unlock()
	mem, err := memory.MapScratch(chunkSize)
	if err != nil {
		return nil, errChunkMap
	}
	return &chunk{mem: mem[:chunkSize:chunkSize]}, nil
}

// putChunks gives the chunks from head on (linked by next) back to the Writer: kept idle up to
// Threshold bytes (at least 16 chunks) — what the Writer's Logs may hold at once, so a steady
// load maps nothing — unmapped beyond, and all unmapped once the Writer is closed. Called by
// Persist and by Close, never while an Append may write to them.
func (w *Writer) putChunks(head *chunk) {
	maxIdle := max(int(w.opts.Threshold/chunkSize), 16)
	w.freeMu.Lock()
	defer w.freeMu.Unlock()
	for c := head; c != nil; {
		next := c.next
		if w.nFree < maxIdle && !w.closed.Load() {
			c.next, c.n = w.free, 0
			w.free = c
			w.nFree++
		} else {
			_ = memory.UnmapScratch(c.mem)
			c.mem = nil
		}
		c = next
	}
}

// appendSpanning writes the record of n bytes across the end of c's last chunk and as many
// new ones as it needs (c is the owner batch, or l.cur with l.mu held). The chunks are taken
// first, so a refusal buffers nothing.
func appendSpanning(l *Log, c *batch, n int, kind uint8, delta uint64, key, userKey, value []byte) error {
	room := 0
	if c.tail != nil {
		room = len(c.tail.mem) - c.tail.n
	}
	var head, tail *chunk
	for got := room; got < n; got += chunkSize {
		ch, err := l.w.getChunk()
		if err != nil {
			l.w.putChunks(head)
			return err
		}
		if head == nil {
			head = ch
		} else {
			tail.next = ch
		}
		tail = ch
	}
	first := c.tail
	if first == nil || room == 0 {
		first = head
	}
	if c.tail == nil {
		c.head = head
	} else {
		c.tail.next = head
	}
	c.tail = tail
	if n <= len(first.mem)-first.n { // a fresh chunk holds it whole
		putRecord(first.mem[first.n:first.n+n], kind, delta, key, userKey, value)
		first.n += n
		return nil
	}
	var hdr [1 + 2*binary.MaxVarintLen64]byte
	h := putHead(hdr[:], kind, delta, len(key))
	w := spanWriter{c: first}
	w.write(hdr[:h])
	w.write(key)
	f := kindFields[kind]
	if f&fieldUserKey != 0 {
		w.write(hdr[:binary.PutUvarint(hdr[:], uint64(len(userKey)))])
		w.write(userKey)
	}
	if f&fieldValue != 0 {
		w.write(hdr[:binary.PutUvarint(hdr[:], uint64(len(value)))])
		w.write(value)
	}
	return nil
}

// spanWriter copies bytes into a chain of chunks, moving on when one is full.
type spanWriter struct{ c *chunk }

func (s *spanWriter) write(p []byte) {
	for len(p) > 0 {
		if s.c.n == len(s.c.mem) {
			s.c = s.c.next
		}
		k := copy(s.c.mem[s.c.n:], p)
		s.c.n += k
		p = p[k:]
	}
}

// Store returns the Log's store id.
func (l *Log) Store() string { return l.store }

// KeyGroups returns the Log's key-group range.
func (l *Log) KeyGroups() KeyGroupRange { return l.kg }

// Append buffers one change record: kind is the engine's OpKind value (1..8), kg the key
// group of key (base.KeyGroupOf(key) — checked: a record is always logged under its key's
// group), seq its sequence number (not below the last one appended), key the composite key,
// userKey the map user key (empty unless kind is 6 map-put or 7 map-remove), value the value
// (empty unless kind is 1 put, 3 list-append, 4 list-replace or 6 map-put): a kind stores
// only its fields (doc.go, "Record, version 2"). The bytes are copied.
//
// Called on the Store's goroutine on its write path: it encodes the record in place into the
// Log's current off-heap chunk (doc.go, "Record buffer"), its seq as the delta from the
// previous record of the batch (the Log's mutex guards both), allocates nothing, also in a
// new Log (chunks come from the Writer's idle ones; a chunk is mapped only when none is
// idle), takes one uncontended mutex, and touches the shared counters and the Budget once
// per 16 KiB. Errors, all preallocated: ErrInvalidRecord for a record that breaks the rules; an
// error matching memory.ErrMemoryBudget when the Budget refuses, the Writer holds Threshold
// bytes (ErrThreshold) or no chunk can be mapped (backpressure: persist, then retry); ErrClosed. A refused
// record is not buffered.
func (l *Log) Append(kind uint8, kg uint16, seq uint64, key, userKey, value []byte) error {
	if kind < MinKind || kind > MaxKind {
		return errKind
	}
	if f := kindFields[kind]; len(userKey) > 0 && f&fieldUserKey == 0 || len(value) > 0 && f&fieldValue == 0 {
		return errField
	}
	if len(key) < 2 {
		return errShortKey
	}
	if uint16(key[0])<<8|uint16(key[1]) != kg {
		return errWrongGroup
	}
	if !contains(l.kg, kg) {
		return errOutOfRange
	}
	body := recordBody(kind, key, userKey, value)
	if body > MaxRecord-binary.MaxVarintLen64 {
		return errTooLarge
	}
	if l.owner {
		if l.closed.Load() {
			return errLogClosed
		}
		_, err := l.add(&l.own, kind, kg, seq, key, userKey, value, body)
		return err
	}
	l.mu.Lock()
	if l.closed.Load() {
		l.mu.Unlock()
		return errLogClosed
	}
	n, err := l.add(&l.cur, kind, kg, seq, key, userKey, value, body)
	if err == nil {
		l.appendedRecords++
		l.appendedBytes += int64(n)
		l.lastSeq = seq
	}
	l.mu.Unlock()
	return err
}

// add encodes one checked record of body bytes (before its seq delta) into c — the owner
// batch, or l.cur with l.mu held — and returns its encoded length: Append's common part.
func (l *Log) add(c *batch, kind uint8, kg uint16, seq uint64, key, userKey, value []byte, body int) (int, error) {
	if seq < l.appendSeq {
		return 0, errSeqOrder
	}
	var delta uint64 // 0 for a batch's first record: its segment's MinSeq is its seq
	if !c.empty() {
		delta = seq - c.maxSeq
	}
	n := body + uvarintLen(delta)
	if need := int64(segHeaderLen + c.size + n); need > c.charged {
		// Room reserved for this record (Reserve): up to a granule moves to the batch. A CAS,
		// since Unreserve may take the room concurrently; once per granule.
		for r := l.reserved.Load(); r > 0; r = l.reserved.Load() {
			t := min(r, max(need-c.charged, chargeGranule))
			if l.reserved.CompareAndSwap(r, r-t) {
				c.charged += t
				break
			}
		}
		if need > c.charged {
			g, err := l.w.charge(need - c.charged)
			if err != nil {
				return 0, err
			}
			c.charged += g
		}
	}
	if t := c.tail; t != nil && len(t.mem)-t.n >= n {
		putRecord(t.mem[t.n:t.n+n], kind, delta, key, userKey, value) // the common path
		t.n += n
	} else if err := appendSpanning(l, c, n, kind, delta, key, userKey, value); err != nil {
		return 0, err
	}
	if c.empty() {
		c.minSeq, c.kgLo, c.kgHi = seq, kg, kg
	}
	if !l.w.dirty.Load() {
		l.w.dirty.Store(true)
	}
	c.size += n
	c.n++
	c.maxSeq = seq
	c.kgLo, c.kgHi = min(c.kgLo, kg), max(c.kgHi, kg)
	l.appendSeq = seq
	return n, nil
}

// OwnerBatch gives the Log an owner batch (doc.go, "Writer protocol" 1): from then on Append
// takes no mutex and its records reach Persist, Checkpoint, Handles, LastSeq and Stats only
// at the owner's next Publish. Call it on the owner's goroutine before the first Append; it
// is not undone. Log.Close and Writer.Close must then not run concurrently with Append
// (invariant 8).
func (l *Log) OwnerBatch() { l.owner = true }

// Publish hands the owner batch's records to the Log's current batch under its mutex, where
// Persist takes them (doc.go, "Writer protocol" 1): once per persist, not per record. Owner
// only (the goroutine that appends); a no-op without an owner batch or records. It allocates
// only when records published before are not yet taken by a Persist (a join is noted).
func (l *Log) Publish() {
	o := &l.own
	if o.empty() {
		return // a refused Append's charge or chunk stays for the next record
	}
	l.mu.Lock()
	l.appendedRecords += int64(o.n)
	l.appendedBytes += int64(o.size)
	l.lastSeq = o.maxSeq
	if l.cur.empty() {
		o.charged += l.cur.charged
		l.w.putChunks(l.cur.head)
		l.cur = *o
	} else {
		l.cur.merge(o) // the previous publish waits for its persist: seqs stay in order
	}
	l.mu.Unlock()
	l.own = batch{}
}

// charge charges at least n bytes, rounded up to the granule, and returns how many.
func (w *Writer) charge(n int64) (int64, error) {
	g := (n + chargeGranule - 1) / chargeGranule * chargeGranule
	if after := w.buffered.Add(g); after > w.opts.Threshold && after != g {
		// Over the threshold, unless this is the only buffered data (so one record larger
		// than Threshold still goes through rather than blocking forever).
		w.buffered.Add(-g)
		return 0, ErrThreshold
	}
	if b := w.opts.Budget; b != nil {
		if err := b.Charge(g, memory.PurposeChangelog); err != nil {
			w.buffered.Add(-g)
			return 0, errBudget
		}
	}
	return g, nil
}

// Reserve makes sure that the next Append of a record of these key, userKey and value is not
// refused for memory: it charges room for one (a granule at a time, as Append does) unless
// enough is reserved already. The Store's write path reserves before it applies a change, so
// that a full buffer refuses the write before anything changed, not the log of a change
// already applied (backpressure, never damage; engine doc.go, "Changelog"). Reserved room
// counts in Buffered and the Budget like buffered records; Append uses it up, Unreserve and
// Close return it. Called on the Store's goroutine, like Append; allocates nothing, and
// reads one atomic while enough is reserved. Errors, preallocated: an error matching
// memory.ErrMemoryBudget when the Threshold or the Budget refuses (persist, then retry), as
// Append's; ErrInvalidRecord for a record too large to log; ErrClosed.
func (l *Log) Reserve(key, userKey, value []byte) error {
	n := int64(maxRecordLen(key, userKey, value))
	if n > MaxRecord {
		return errTooLarge
	}
	n += segHeaderLen // the record may begin a new segment
	if l.reserved.Load() >= n {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() {
		return errLogClosed
	}
	g, err := l.w.charge(n - l.reserved.Load())
	if err != nil {
		return err
	}
	l.reserved.Add(g)
	return nil
}

// Unreserve returns the room Reserve charged and no Append used (a Store that stops
// appending to this Log: its generation ended). Safe to call at any time.
func (l *Log) Unreserve() {
	l.mu.Lock()
	r := l.reserved.Swap(0)
	l.mu.Unlock()
	l.w.refund(r)
}

// refund returns n charged bytes.
func (w *Writer) refund(n int64) {
	if n == 0 {
		return
	}
	w.buffered.Add(-n)
	if w.opts.Budget != nil {
		w.opts.Budget.Refund(n, memory.PurposeChangelog)
	}
}

// PersistedUpTo returns the sequence number up to which this Log's records are persisted:
// every record appended with a seq <= it is in a segment whose handle Handles returns (unless
// truncated).
func (l *Log) PersistedUpTo() uint64 { return l.persisted.Load() }

// LastSeq returns the largest sequence number appended (0 if none).
func (l *Log) LastSeq() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastSeq
}

// Handles returns the handles of this Log's persisted, not truncated segments holding
// records with seq <= upTo, oldest first: what a checkpoint cut at upTo references. Segments
// may hold records above upTo (appended after the cut, persisted with it): a restore must
// skip them (ReplayRange). Errors: ErrNotPersisted if a record with seq <= upTo is still
// buffered (Persist first; Checkpoint does both).
func (l *Log) Handles(upTo uint64) ([]checkpoint.Object, error) {
	if p, last := l.persisted.Load(), l.LastSeq(); p < min(upTo, last) {
		return nil, fmt.Errorf("%w: store %s persisted up to seq %d, asked for %d", ErrNotPersisted, l.store, p, upTo)
	}
	l.hmu.Lock()
	defer l.hmu.Unlock()
	var out []checkpoint.Object
	for _, h := range l.handles {
		if h.MinOrder <= upTo {
			out = append(out, h)
		}
	}
	return out, nil
}

// Checkpoint persists this Log's records up to upTo if they are not yet (one Writer.Persist,
// which persists every Log's buffer) and returns Handles(upTo): the changelog part of a
// checkpoint cut at sequence number upTo (Flink's FsStateChangelogWriter.persist). It blocks
// on the storage; call it from the checkpoint's asynchronous part.
func (l *Log) Checkpoint(ctx context.Context, upTo uint64) ([]checkpoint.Object, error) {
	if l.persisted.Load() < min(upTo, l.LastSeq()) {
		if _, err := l.w.Persist(ctx); err != nil {
			return nil, err
		}
	}
	return l.Handles(upTo)
}

// Truncate drops the handles of segments whose records all have seq < before: a
// materialization covering them completed (Flink's truncate after materialization). The
// objects are not deleted here: garbage collection deletes what no retained manifest reaches.
func (l *Log) Truncate(before uint64) {
	l.hmu.Lock()
	defer l.hmu.Unlock()
	l.handles = slices.DeleteFunc(l.handles, func(h checkpoint.Object) bool {
		if h.MaxOrder >= before {
			return false
		}
		if f := l.w.opts.InFlight; f != nil {
			f.Release(h.Name)
		}
		return true
	})
}

// Close removes the Log from its Writer, dropping (and refunding) its unpersisted records and
// its handles (released from WriterOptions.InFlight). Persisted segments stay where they are.
// Later Appends fail with ErrClosed.
func (l *Log) Close() {
	w := l.w
	w.persistMu.Lock()
	defer w.persistMu.Unlock()
	w.logsMu.Lock()
	w.logs = slices.DeleteFunc(w.logs, func(o *Log) bool { return o == l })
	w.logsMu.Unlock()
	l.drop()
}

// drop closes l and refunds its buffers; w.persistMu held.
func (l *Log) drop() {
	l.mu.Lock()
	l.closed.Store(true)
	cur, own := l.cur, l.own // own: the owner does not append concurrently (invariant 8)
	cur.charged += l.reserved.Swap(0) + own.charged
	l.cur, l.own = batch{}, batch{}
	l.mu.Unlock()
	l.w.refund(cur.charged + l.pending.charged)
	l.w.putChunks(cur.head)
	l.w.putChunks(own.head)
	l.w.putChunks(l.pending.head)
	l.pending = batch{}
	l.hmu.Lock()
	if f := l.w.opts.InFlight; f != nil {
		for _, h := range l.handles {
			f.Release(h.Name)
		}
	}
	l.handles = nil
	l.hmu.Unlock()
}

// SegmentHandle is one Store's segment of a persisted object.
type SegmentHandle struct {
	// Store is the Log's store id.
	Store string
	// Object is the handle to put in the Store's manifest: Kind checkpoint.KindChangelog,
	// Packed, Offset and Length of the segment, CRC of those bytes, KeyGroups covered, and
	// MinOrder/MaxOrder holding the segment's smallest and largest sequence numbers.
	Object checkpoint.Object
}

// PersistResult is what one Persist stored.
type PersistResult struct {
	// Name and Size are the object's name and length; "" and 0 if nothing was buffered.
	Name string
	Size int64
	// Segments has one handle per Log that had records, in the order of the object.
	Segments []SegmentHandle
}

// Persist stores every Log's buffered records as one object — one segment per Log — with
// Storage.Put under a new unique name, "<Prefix>/changelog/<n>-<random>.log", and returns the
// segments' handles (each Log also keeps its own; see Handles). With nothing buffered it
// stores nothing and returns a zero PersistResult.
//
// It runs on a background goroutine (the scheduler's) concurrently with Appends: it takes
// each Log's buffer in one short critical section and encodes and uploads outside every Log's
// lock. Persists are serialized. A failed Put keeps the records for the next Persist (nothing
// is lost, the bytes stay charged) and returns the error, wrapped with the object's name.
func (w *Writer) Persist(ctx context.Context) (PersistResult, error) {
	w.persistMu.Lock()
	defer w.persistMu.Unlock()
	w.logsMu.Lock()
	logs := slices.Clone(w.logs)
	w.logsMu.Unlock()

	w.dirtySince.Store(0)
	w.dirty.Store(false)
	var (
		in   []*Log
		last []uint64
	)
	for _, l := range logs {
		l.mu.Lock()
		taken := l.cur
		l.cur = batch{}
		lastSeq := l.lastSeq
		l.mu.Unlock()
		if l.pending.empty() {
			w.putChunks(l.pending.head) // none, or the chunk of a refused Append
			l.pending = taken
		} else {
			l.pending.merge(&taken) // a failed persist's records first: seqs stay in order
		}
		if l.pending.empty() {
			w.refund(l.pending.charged) // 0 unless an Append was refused after charging
			w.putChunks(l.pending.head)
			l.pending = batch{}
			l.persisted.Store(lastSeq) // nothing of this Log waits
			continue
		}
		in = append(in, l)
		last = append(last, lastSeq)
	}
	if len(in) == 0 {
		return PersistResult{}, nil
	}

	w.nextID++
	name := fmt.Sprintf("%s/changelog/%020d-%016x.log", w.opts.Prefix, w.nextID, rand.Uint64())
	obj := appendHeader(w.obj[:0], formatVersion)
	w.infos = w.infos[:0]
	for _, l := range in {
		p := &l.pending
		off := len(obj)
		obj = binary.LittleEndian.AppendUint32(obj, p.n)
		j := 0
		for c := p.head; c != nil; c = c.next {
			if j < len(p.joins) && p.joins[j].at == c {
				// A merged batch's first record: kind, delta 0 (one byte), the rest. Its
				// delta follows the record before it here.
				if c.n < 2 || c.mem[1] != 0 {
					panic("strata: invariant: a merged changelog batch does not begin with a record of delta 0")
				}
				obj = append(obj, c.mem[0])
				obj = binary.AppendUvarint(obj, p.joins[j].delta)
				obj = append(obj, c.mem[2:c.n]...)
				j++
				continue
			}
			obj = append(obj, c.mem[:c.n]...)
		}
		if j != len(p.joins) {
			panic("strata: invariant: a merged changelog batch's join is not one of its chunks")
		}
		seg := obj[off:]
		w.infos = append(w.infos, SegmentInfo{
			Store: l.store, KeyGroups: KeyGroupRange{Start: int(p.kgLo), End: int(p.kgHi)},
			MinSeq: p.minSeq, MaxSeq: p.maxSeq, Offset: int64(off), Length: int64(len(seg)),
			Records: p.n, CRC: crc32.Checksum(seg, base.CRC32C),
		})
	}
	obj = appendFooter(obj, formatVersion, w.infos)
	w.obj = obj
	if f := w.opts.InFlight; f != nil {
		for range in {
			f.Add(name)
		}
	}
	if err := w.opts.Storage.Put(ctx, name, obj); err != nil {
		if f := w.opts.InFlight; f != nil {
			for range in {
				f.Release(name)
			}
		}
		return PersistResult{}, fmt.Errorf("changelog: persist %s (%d segments, %d bytes; kept for the next persist): %w", name, len(in), len(obj), err)
	}
	if cap(w.obj) > 2*int(w.opts.Threshold) {
		w.obj = nil
	}

	res := PersistResult{Name: name, Size: int64(len(obj)), Segments: make([]SegmentHandle, len(in))}
	for i, l := range in {
		s := &w.infos[i]
		h := checkpoint.Object{
			Name: name, Kind: checkpoint.KindChangelog, Size: int64(len(obj)), CRC: s.CRC,
			KeyGroups: s.KeyGroups, MinOrder: s.MinSeq, MaxOrder: s.MaxSeq,
			Packed: true, Offset: s.Offset, Length: s.Length,
		}
		res.Segments[i] = SegmentHandle{Store: l.store, Object: h}
		l.hmu.Lock()
		l.handles = append(l.handles, h)
		l.persistedRecords += int64(s.Records)
		l.persistedBytes += s.Length
		l.hmu.Unlock()
		l.persisted.Store(last[i])
		w.refund(l.pending.charged)
		w.putChunks(l.pending.head)
		l.pending = batch{}
	}
	return res, nil
}

// Objects returns one handle per distinct object holding the Log's persisted, not truncated
// segments (the first segment's), in persist order: what a Store drops at Close when no
// checkpoint references it (the engine's dropUnreferencedChangelog).
func (l *Log) Objects() []checkpoint.Object {
	l.hmu.Lock()
	defer l.hmu.Unlock()
	var out []checkpoint.Object
	for _, h := range l.handles {
		if !slices.ContainsFunc(out, func(o checkpoint.Object) bool { return o.Name == h.Name }) {
			out = append(out, h)
		}
	}
	return out
}

// HeldElsewhere reports whether a Log of w other than those given holds a persisted, not
// truncated segment of object name (another Store of the process still needs it for its next
// checkpoint).
func (w *Writer) HeldElsewhere(name string, mine ...*Log) bool {
	w.logsMu.Lock()
	logs := slices.Clone(w.logs)
	w.logsMu.Unlock()
	for _, l := range logs {
		if slices.Contains(mine, l) {
			continue
		}
		l.hmu.Lock()
		held := slices.ContainsFunc(l.handles, func(h checkpoint.Object) bool { return h.Name == name })
		l.hmu.Unlock()
		if held {
			return true
		}
	}
	return false
}

// ObjectStores reads the footer of changelog object name, of size bytes, and returns the
// store ids of its segments (each once, in footer order): whether other Stores' segments
// share it. Errors: readFooter's (a *base.CorruptionError naming the object, the storage's).
func ObjectStores(ctx context.Context, s checkpoint.Storage, name string, size int64) ([]string, error) {
	footer, err := readFooter(ctx, s, name, size)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, si := range footer {
		if !slices.Contains(out, si.Store) {
			out = append(out, si.Store)
		}
	}
	return out, nil
}
