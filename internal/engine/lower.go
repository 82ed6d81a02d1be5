package engine

import (
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
// memory only has none and never evicts. Tests also plug in an in-memory one (lower_test.go).
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
	// MapRange visits every entry of the map (order, mapKey): its key-level tombstones first
	// (empty user key), then user keys ascending, each user key's versions newest first.
	MapRange(order uint64, mapKey []byte, visit func(*base.Entry) bool) error
	// Close releases the tier (the Store closes it after its own tiers).
	Close() error
}

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
	val          []byte
	st           status
	kind         base.Kind     // kind of the version get returned (found only)
	res          base.Resolver // the merge rules of the read in progress
	getFn, mapFn func(*base.Entry) bool
	tombFn       func(*base.Entry) bool
	listFn       func(*base.Entry) bool
	dst          [][]byte // listGet's output while it runs
	bound        bool
}

// lowArenaMax bounds the chunks of the arena: reads with no write between them take a new
// chunk once one is full (the old one lives on in the values handed out).
const lowArenaMax = 1 << 20

func (r *lowReader) init() {
	if !r.bound {
		r.getFn, r.mapFn, r.tombFn, r.listFn, r.bound = r.visitGet, r.visitMap, r.visitTomb, r.visitList, true
	}
}

// reset makes the arena reusable (at a write: the copies handed out before it are dead).
func (r *lowReader) reset() { r.buf = r.buf[:0] }

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

// listGet appends the lower tier's batches of a list (copies in the arena, valid until the
// next write), oldest first, stopping at a base or tombstone (which it includes or not). The
// visit function is bound once, so a read allocates nothing beyond the arena.
func (r *lowReader) listGet(low LowerTier, order uint64, key []byte, dst [][]byte) ([][]byte, error) {
	r.init()
	start := len(dst)
	r.dst = dst
	r.res.StartRead()
	err := low.Get(order, key, nil, r.listFn)
	dst, r.dst = r.dst, nil
	reverse(dst[start:])
	return dst, err
}

func (r *lowReader) visitList(e *base.Entry) bool {
	switch r.res.ReadKey(e) {
	case base.StepOperand:
		r.dst = append(r.dst, r.copy(e.Value))
	case base.StepBase:
		r.dst = append(r.dst, r.copy(e.Value))
		return false
	case base.StepDelete:
		return false
	}
	return true
}

// lowEntry is a live map entry of the lower tier, copied out of it.
type lowEntry struct{ uk, val []byte }

// lowMapEntries returns the live entries of the map mapKey in the lower tier (copies), in user
// key order.
func lowMapEntries(low LowerTier, order uint64, mapKey []byte) ([]lowEntry, error) {
	var (
		out     []lowEntry
		tomb    uint64
		hasTomb bool
		last    []byte
		seen    bool
	)
	err := low.MapRange(order, mapKey, func(e *base.Entry) bool {
		switch {
		case e.Kind == base.KindTombstone && len(e.UserKey) == 0:
			if !hasTomb || e.Seq > tomb {
				tomb, hasTomb = e.Seq, true
			}
			return true
		case e.Kind != base.KindMapEntry && e.Kind != base.KindMapEntryTombstone:
			return true
		}
		if seen && string(last) == string(e.UserKey) {
			return true // an older version
		}
		seen, last = true, append(last[:0], e.UserKey...)
		if e.Kind == base.KindMapEntry && (!hasTomb || e.Seq > tomb) {
			out = append(out, lowEntry{uk: append([]byte(nil), e.UserKey...), val: append([]byte(nil), e.Value...)})
		}
		return true
	})
	return out, err
}

func reverse[T any](s []T) {
	for i, j := 0, len(s)-1; i < j; i, j = i+1, j-1 {
		s[i], s[j] = s[j], s[i]
	}
}
