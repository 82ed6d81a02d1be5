package engine

import (
	"bytes"
	"cmp"

	"github.com/strata-db/strata/internal/base"
)

// LowerTier is the tier below the SliceTable, where the SliceTable's eviction sends its coldest
// slices: the LsmStore. Its shape is lsm.DB's, so that the LSM adapter (issue 4) is a thin
// wrapper: Evict is DB.WriteL0, Install is DB.InstallL0, Discard is DB.Discard, and the two
// reads are DB.Get and DB.MapRange, which visit raw versions (the root resolves them, as it
// resolves the upper tiers' records: newest wins, list operands stack on a base, a map's
// KindTombstone with an empty user key hides its older entries).
//
// The production implementation is lsmTier (lsmtier.go), over the Store's lsm.DB; a Store in
// memory only has none and never evicts. Tests also plug in their own (lowreader_test.go).
//
// Concurrency: Evict runs on a background goroutine (an eviction task of the scheduler) while
// the owner keeps reading the lower tier, so it must not change what the reads see: its output
// stays invisible until the owner calls Install. Every other method runs on the owner
// goroutine.
type LowerTier interface {
	// Evict writes one sorted run (base.Iterator order: Order, Key, UserKey ascending, Seq
	// descending; every version kept) and returns a handle to it, invisible to reads until
	// Install. The entries are valid only during the call.
	Evict(it base.Iterator) (pending any, err error)
	// Install makes an evicted run visible to reads, as the newest data of the tier (every
	// evicted run is newer than the runs evicted before it). lastSeq is the store's sequence
	// number at install, for the tier to continue numbering after a restart.
	Install(pending any, lastSeq uint64) error
	// Discard drops an evicted run that will not be installed.
	Discard(pending any)
	// Get visits the versions of (key, userKey) held by the tier, newest first, until visit
	// returns false; userKey is nil for key-level entries. The entry is valid only during
	// visit.
	Get(order uint64, key, userKey []byte, visit func(*base.Entry) bool) error
	// GetLoc is Get, also handing visit each version's place (base.Loc) for ReadAt: a long
	// list's read records where its pieces are and loads them one at a time (LowerList).
	GetLoc(order uint64, key, userKey []byte, visit func(*base.Entry, base.Loc) bool) error
	// ReadAt visits the version of (order, key) at loc, a place GetLoc reported, valid until
	// the tier's next Install or compaction install. The entry is valid only during visit.
	ReadAt(order uint64, key []byte, loc base.Loc, visit func(*base.Entry)) error
	// MapRange visits every entry of the map (order, mapKey) with a user key >= from (from
	// empty: the whole map, its key-level tombstones first), user keys ascending, each user
	// key's versions newest first, until visit returns false. A caller walks a large map in
	// chunks: it stops at a user key and calls again from it.
	MapRange(order uint64, mapKey, from []byte, visit func(*base.Entry) bool) error
	// Scan positions a walk over every version the tier holds with an order hash in [lo, hi],
	// in entry order (Order, Key, UserKey ascending, Seq descending; nothing resolved), and
	// returns it: it, reused when not nil (a key scan walks the tier once per step), or a new
	// one. The walk pins what it reads until its Release (the end of the step) and must not
	// be used across an Install or a compaction's install. Errors as Get.
	Scan(it LowerScan, lo, hi uint64) (LowerScan, error)
	// Close releases the tier (the Store closes it after its own tiers).
	Close() error
}

// lowerInstallAll is a LowerTier that can install several evicted runs at once (lsmTier: one
// lsm manifest record): after an error none of them is visible and all stay pending. The runs
// of one call hold disjoint order ranges (a parallel bulk replay's parts, doc.go invariant 30).
// A tier without it gets one Install per run.
type lowerInstallAll interface {
	InstallAll(pending []any, lastSeq uint64) error
}

// LowerScan is a walk of the lower tier in entry order (LowerTier.Scan), used by the owner
// between two writes. Entries are valid until the next Next. Release ends a step (the walk
// keeps its buffers for the next LowerTier.Scan); Close drops it.
type LowerScan = base.ScanIter

// evictSink adapts a LowerTier to the base.Sink that slice.Eviction.Run feeds, keeping the
// pending run for the owner's install. One per eviction job; used by that job's task only
// until the job is done.
type evictSink struct {
	low     LowerTier
	pending any
}

func (e *evictSink) Evict(it base.Iterator) error {
	p, err := e.low.Evict(it)
	if err != nil {
		return err
	}
	e.pending = p
	return nil
}

// lowReader is the state of the point reads of the lower tier (tiers.lr): visit functions bound
// once (a func literal per read escaped through the LowerTier interface, and with it the
// variables it captured: three allocations per read) and an arena for the copies of the values
// read, which stay valid until the next write, as the upper tiers' values do (tiers.before
// resets it; bytes handed out are never overwritten before that, a full arena is replaced, not
// reused). Owner goroutine only.
type lowReader struct {
	buf          []byte // the arena: copies handed out since the last write
	gen          uint64 // arena resets (writes) so far: a LowerList of an older one is stale
	val          []byte
	st           status
	kind         base.Kind     // kind of the version get returned (found only)
	res          base.Resolver // the merge rules of the read in progress
	getFn, mapFn func(*base.Entry) bool
	tombFn       func(*base.Entry) bool
	listFn       func(*base.Entry, base.Loc) bool
	pieceFn      func(*base.Entry)
	dst          [][]byte   // listGet's output while it runs
	ll           *LowerList // listGet's places while it runs (nil: copy the whole list)
	eager        bool       // listGet still copies the pieces it visits
	eagerBytes   int
	eagerMax     int // most bytes copied at once (Options.ListEagerBytes; 0: lowListEager)
	bound        bool
}

// lowArenaMax bounds the chunks of the arena: reads with no write between them take a new
// chunk once one is full (the old one lives on in the values handed out).
const lowArenaMax = 1 << 20

// lowListEager is the most bytes of a list's lower-tier pieces that a list read copies at
// once (listGet): a longer list is read one piece at a time (LowerList), so a read holds
// O(one piece) of it, not the whole list.
const lowListEager = 256 << 10

func (r *lowReader) init() {
	if !r.bound {
		r.getFn, r.mapFn, r.tombFn, r.listFn, r.bound = r.visitGet, r.visitMap, r.visitTomb, r.visitList, true
		r.pieceFn = r.visitPiece
	}
}

// reset makes the arena reusable (at a write: the copies handed out before it are dead).
func (r *lowReader) reset() {
	r.buf = r.buf[:0]
	r.gen++
}

// copy returns a copy of b in the arena.
func (r *lowReader) copy(b []byte) []byte {
	if len(r.buf)+len(b) > cap(r.buf) {
		r.buf = make([]byte, 0, max(min(2*cap(r.buf), lowArenaMax), 4<<10, len(b)))
	}
	n := len(r.buf)
	r.buf = append(r.buf, b...)
	return r.buf[n:len(r.buf):len(r.buf)]
}

// The point reads below feed the lower tier's versions of one key, newest first, to the one
// Resolver (base, "Merge rules") and copy what it keeps into the arena.

// get resolves the newest key-level version of key in the lower tier: Found with a copy of the
// value (a value, or a list's base batch; in the arena), Deleted for a tombstone, Absent when
// the tier holds nothing. r.kind is the kind of the version found. The tier's bytes are only
// valid during the visit.
func (r *lowReader) get(low LowerTier, order uint64, key []byte) ([]byte, status, error) {
	r.init()
	r.val, r.st = nil, absent
	r.res.StartRead()
	err := low.Get(order, key, nil, r.getFn)
	v, st := r.val, r.st
	r.val = nil
	return v, st, err
}

func (r *lowReader) visitGet(e *base.Entry) bool {
	switch r.res.ReadKey(e) {
	case base.StepOperand, base.StepBase:
		// A value read stops at the newest value (a list append under a value key cannot occur:
		// a key belongs to one state, and value states write no operands).
		r.val, r.st, r.kind = r.copy(e.Value), found, e.Kind
		return false
	case base.StepDelete:
		r.st = deleted
		return false
	}
	return true
}

// mapGet resolves user key uk of the map mapKey in the lower tier: the newest version of the
// entry against the newest key-level tombstone (a clear or delete of the map).
func (r *lowReader) mapGet(low LowerTier, order uint64, mapKey, uk []byte) ([]byte, status, error) {
	r.init()
	r.val = nil
	r.res.StartRead()
	err := low.Get(order, mapKey, uk, r.mapFn)
	if err == nil {
		err = low.Get(order, mapKey, nil, r.tombFn)
	}
	v := r.val
	r.val = nil
	if err != nil {
		return nil, absent, err
	}
	st, _, _ := r.res.Answer()
	if st != found {
		v = nil
	}
	return v, st, nil
}

func (r *lowReader) visitMap(e *base.Entry) bool {
	switch r.res.ReadMapEntry(e) {
	case base.StepBase:
		r.val = r.copy(e.Value)
		return false
	case base.StepDelete:
		return false
	}
	return true
}

func (r *lowReader) visitTomb(e *base.Entry) bool {
	return r.res.ReadClear(e) == base.StepSkip
}

// listGet reads the lower tier's pieces (batches) of a list, stopping at a base or tombstone
// (which it includes or not). Up to lowListEager bytes — or all of them when ll is nil — it
// appends copies (in the arena, valid until the next write) to dst, oldest first, and leaves
// ll empty. A longer list is left to ll: dst gets nothing, and ll holds the pieces' places,
// oldest first, for LowerList.Next to load one at a time. The visit function is bound once,
// so a read allocates nothing beyond the arena (and ll's places, reused).
func (r *lowReader) listGet(low LowerTier, order uint64, key []byte, dst [][]byte, ll *LowerList) ([][]byte, error) {
	r.init()
	start := len(dst)
	r.dst, r.ll, r.eager, r.eagerBytes = dst, ll, true, 0
	if ll != nil {
		ll.locs, ll.next = ll.locs[:0], 0
	}
	r.res.StartRead()
	err := low.GetLoc(order, key, nil, r.listFn)
	dst, r.dst, r.ll = r.dst, nil, nil
	if r.eager {
		reverse(dst[start:])
		if ll != nil {
			ll.locs = ll.locs[:0]
		}
		return dst, err
	}
	reverse(ll.locs)
	ll.order, ll.key = order, append(ll.key[:0], key...)
	ll.gen = r.gen
	return dst[:start], err
}

func (r *lowReader) visitList(e *base.Entry, loc base.Loc) bool {
	s := r.res.ReadKey(e)
	switch s {
	case base.StepOperand, base.StepBase:
		if r.ll != nil {
			r.ll.locs = append(r.ll.locs, loc)
		}
		if r.eager {
			if r.ll != nil && r.eagerBytes+len(e.Value) > cmp.Or(r.eagerMax, lowListEager) {
				r.eager = false // too long to copy at once: read it piece by piece
			} else {
				r.eagerBytes += len(e.Value)
				r.dst = append(r.dst, r.copy(e.Value))
			}
		}
		return s == base.StepOperand
	case base.StepDelete:
		return false
	}
	return true
}

func (r *lowReader) visitPiece(e *base.Entry) { r.val = r.copy(e.Value) }

// LowerList is the lower tier's part of one list read too long to copy at once (Engine.ListGet:
// more than lowListEager bytes): the places of its pieces (base.Loc), oldest first, which Next
// loads one at a time through the lower tier's block cache. A read so holds one piece of the
// list at a time, plus 16 bytes per piece. The root's ListState owns one and reuses it for
// every read (the previous read's LowerList is then gone, as its batches are).
//
// Validity: the places are valid until the next write (or WaitBackground, Persist, Close: an
// install may replace the files they point into); Next then fails with
// ErrIteratorInvalidated. Each piece Next returns is a copy in the read arena, valid — as every
// value a read returns — until the next write; a piece already returned is never overwritten
// by a later Next. Owner goroutine only.
type LowerList struct {
	t     *Engine
	order uint64
	key   []byte
	locs  []base.Loc
	next  int
	gen   uint64 // lowReader.gen at the read
	epoch uint64 // Engine.epoch at the read
}

// Valid reports whether no write or install happened since the read: the pieces returned and
// the places left are good.
func (l *LowerList) Valid() bool { return l.gen == l.t.lr.gen && l.epoch == l.t.epoch }

// Reset forgets the places of the previous read: Pending is false until the next read that
// streams (the root's hot tier answers a list read without one).
func (l *LowerList) Reset() { l.locs, l.next = l.locs[:0], 0 }

// Pending reports whether Next has a piece left.
func (l *LowerList) Pending() bool { return l.next < len(l.locs) }

// Pieces returns the number of pieces the read found in the lower tier (0 when it copied them
// all at once).
func (l *LowerList) Pieces() int { return len(l.locs) }

// Next returns the next piece of the list, oldest first: a list batch (framed elements) copied
// into the read arena, valid until the next write. Errors: ErrIteratorInvalidated after a write
// or an install since the read; the lower tier's read errors (ErrCorruption with its cause,
// file and offset; I/O errors). Call it only while Pending.
func (l *LowerList) Next() ([]byte, error) {
	t := l.t
	if !l.Valid() || t.low == nil {
		l.next = len(l.locs)
		return nil, ErrIteratorInvalidated
	}
	loc := l.locs[l.next]
	l.next++
	r := &t.lr
	r.init()
	r.val = nil
	err := t.low.ReadAt(l.order, l.key, loc, r.pieceFn)
	v := r.val
	r.val = nil
	if err != nil {
		l.next = len(l.locs)
		return nil, err
	}
	return v, nil
}

// lowMapChunk is the number of live entries of a map's lower tier that a map iteration holds
// at once (MapIter): it walks the tier in chunks of about this many.
const lowMapChunk = 1024

// lowEntry is a live map entry of the lower tier, copied out of it (into lowMap's arena).
type lowEntry struct{ uk, val []byte }

// stagedEntry is a lowEntry while its chunk is read: offsets into lowMap.stage.
type stagedEntry struct{ off, ukLen, valLen uint32 }

// lowMap walks the live entries of one map in the lower tier in chunks (MapIter's lower
// phase): each fill asks the tier for the map's versions from the resume point on, resolves
// them with the merge rules (base.Resolver, fed as a compaction at the bottom: newest wins, the
// map's clear hides older entries, tombstones go; one stream across the fills, so a clear seen
// in the first chunk still hides in the last) and stops before the first user key past
// lowMapChunk live entries. It holds O(lowMapChunk) entries, not the map. A fill stages the
// chunk in a reused buffer, then copies it into one new arena of its exact size, so the
// entries of earlier chunks a caller still holds stay intact (valid until the next write, as
// MapIter promises, and beyond). The Engine keeps one lowMap for reuse (Engine.lowMapFree).
type lowMap struct {
	res    base.Resolver
	ents   []lowEntry
	staged []stagedEntry
	stage  []byte
	from   []byte // the first user key the next fill reads (nil: the map's start)
	last   []byte // the last user key fed in this fill
	next   []byte // where the fill stopped (more)
	more   bool   // the tier has entries past the chunk
	chunk  int    // live entries per chunk (Engine.mapChunk)
	visit  func(*base.Entry) bool
}

// fill reads the next chunk into m.ents; more reports whether a later fill has entries.
func (m *lowMap) fill(low LowerTier, order uint64, mapKey []byte) error {
	if m.visit == nil {
		m.res = base.Resolver{Bottom: true, DropTombstones: true, Emit: m.emit}
		m.visit = m.feed
	}
	m.staged, m.stage, m.more, m.last = m.staged[:0], m.stage[:0], false, m.last[:0]
	err := low.MapRange(order, mapKey, m.from, m.visit)
	if err == nil && !m.more {
		err = m.res.Finish()
	}
	clear(m.ents) // drop the last chunk's arena
	m.ents = m.ents[:0]
	if err != nil {
		return err
	}
	if m.more {
		m.from = append(m.from[:0], m.next...)
	}
	if len(m.staged) == 0 {
		return nil
	}
	arena := append([]byte(nil), m.stage...)
	for _, s := range m.staged {
		k, v := s.off+s.ukLen, s.off+s.ukLen+s.valLen
		m.ents = append(m.ents, lowEntry{uk: arena[s.off:k:k], val: arena[k:v:v]})
	}
	return nil
}

// start readies m for a new iteration (a reused lowMap forgets the last one).
func (m *lowMap) start(chunk int) {
	m.res.Reset()
	clear(m.ents)
	m.ents, m.staged, m.stage = m.ents[:0], m.staged[:0], m.stage[:0]
	m.from, m.more, m.chunk = m.from[:0], false, chunk
}

func (m *lowMap) feed(e *base.Entry) bool {
	if len(m.staged) >= m.chunk && !bytes.Equal(e.UserKey, m.last) {
		// A full chunk ends before a new user key: the next fill starts there.
		m.next, m.more = append(m.next[:0], e.UserKey...), true
		return false
	}
	m.last = append(m.last[:0], e.UserKey...)
	if err := m.res.Add(e); err != nil {
		panic("strata: invariant: lowMap's Emit failed") // emit returns no error
	}
	return true
}

func (m *lowMap) emit(e *base.Entry) error {
	if e.Kind != base.KindMapEntry {
		return nil // key-level versions of the map key are not entries
	}
	m.staged = append(m.staged, stagedEntry{off: uint32(len(m.stage)), ukLen: uint32(len(e.UserKey)), valLen: uint32(len(e.Value))})
	m.stage = append(append(m.stage, e.UserKey...), e.Value...)
	return nil
}

func reverse[T any](s []T) {
	for i, j := 0, len(s)-1; i < j; i, j = i+1, j-1 {
		s[i], s[j] = s[j], s[i]
	}
}
