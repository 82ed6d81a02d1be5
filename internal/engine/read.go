package engine

import (
	"bytes"

	"github.com/strata-db/strata/fresh"
	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/slice"
)

// ---- reads ----

// Get returns the newest value of key (hash h) across the tiers.
func (t *Engine) Get(h uint64, key []byte) ([]byte, status) {
	if t.cost.on {
		return t.sampledGet(h, key)
	}
	if t.tail != nil && (!t.tailServes() || t.tailWritten()) {
		if err := t.awaitTail(); err != nil { // a lazy restore's tail (doc.go, invariants 33 and 39)
			return nil, t.lowFailed(err)
		}
	}
	if v, st := t.f.Get(h, key); st != absent {
		return v, st
	}
	order := t.orderOf(key, h)
	if v, st := t.sl.Get(order, key); st != slice.Absent {
		return v, status(st)
	}
	if t.tail != nil { // still pending: the tail lies between the tiers above and the lower tier (invariant 39)
		if v, st, ok := t.tailGet(h, key); ok {
			return v, st
		}
	}
	if t.low != nil {
		v, st, err := t.lowGet(order, key)
		if err != nil {
			return nil, t.lowFailed(err)
		}
		return v, st
	}
	return nil, absent
}

// ListGet appends the batches of the list key (hash h) to dst, oldest first, across the tiers:
// the lower tiers' batches go below the FreshTable's operands until a tier reaches a base or a
// tombstone. The status is found when a batch was returned; complete is always true below the
// lowest tier.
//
// When the list's part in the lower tier (the LsmStore) is longer than lowListEager bytes and
// ll is not nil, that part is not copied: ll gets the places of its pieces and the list is
// ll's pieces (LowerList.Next, oldest first) followed by dst's batches. With ll nil the whole
// list is copied into dst. ll is reset by every call.
func (t *Engine) ListGet(h uint64, key []byte, dst [][]byte, ll *LowerList) ([][]byte, status, bool) {
	if t.cost.on {
		return t.sampledListGet(h, key, dst, ll)
	}
	if t.tail != nil {
		if err := t.awaitTail(); err != nil { // invariant 33
			if ll != nil {
				ll.locs = ll.locs[:0]
			}
			return dst, t.lowFailed(err), true
		}
	}
	if ll != nil {
		ll.t, ll.locs, ll.next, ll.epoch = t, ll.locs[:0], 0, t.epoch
	}
	start := len(dst)
	dst, st, complete := t.f.ListGet(h, key, dst)
	if complete {
		return dst, st, true
	}
	// The FreshTable holds append operands only (or nothing): the older tiers' list goes first.
	// Collect newest tier first after the fresh batches, then rotate the blocks into age order
	// in place (reverse all, then each block), allocation-free.
	nf := len(dst) - start
	order := t.orderOf(key, h)
	dst, complete = t.sl.ListGet(order, key, dst)
	ns := len(dst) - start - nf
	if !complete && t.low != nil {
		var err error
		if dst, err = t.lr.listGet(t.low, order, key, dst, ll); err != nil {
			if ll != nil {
				ll.locs = ll.locs[:0]
			}
			return dst[:start], t.lowFailed(err), true
		}
	}
	nl := len(dst) - start - nf - ns
	if ns+nl > 0 {
		all := dst[start:]
		reverse(all)
		reverse(all[:nl])
		reverse(all[nl : nl+ns])
		reverse(all[nl+ns:])
	}
	if len(dst) > start || (ll != nil && ll.Pending()) {
		return dst, found, true
	}
	return dst, st, true
}

// MapGet returns the value of userKey (hash hu) in the map mapKey (hash hm) across the tiers.
func (t *Engine) MapGet(hm uint64, mapKey []byte, hu uint64, userKey []byte) ([]byte, status) {
	if t.cost.on {
		return t.sampledMapGet(hm, mapKey, hu, userKey)
	}
	if t.tail != nil {
		if err := t.awaitTail(); err != nil { // invariant 33
			return nil, t.lowFailed(err)
		}
	}
	if v, st := t.f.MapGet(hm, mapKey, hu, userKey); st != absent {
		return v, st
	}
	order := t.orderOf(mapKey, hm)
	if v, st := t.sl.MapGet(order, mapKey, userKey); st != slice.Absent {
		return v, status(st)
	}
	if t.low != nil {
		v, st, err := t.lr.mapGet(t.low, order, mapKey, userKey)
		if err != nil {
			return nil, t.lowFailed(err)
		}
		return v, st
	}
	return nil, absent
}

// lowFailed records a lower-tier read error for takeErr and returns the failed status. The
// error is already mapped to the Store's sentinels (lsmTier: ErrCorruption with its cause,
// ErrNoSpace, I/O errors as they are).
//
//go:noinline
func (t *Engine) lowFailed(err error) status {
	t.readErr = err
	return failed
}

// TakeErr returns (and forgets) the error of the read that returned Failed: ErrCorruption
// (with its cause, file and offset), ErrNoSpace, ErrClosed or an I/O error. Panics when no read
// failed (a broken invariant).
//
//go:noinline
func (t *Engine) TakeErr() error {
	err := t.readErr
	t.readErr = nil
	if err == nil {
		panic("strata: invariant: a read failed without an error")
	}
	return err
}

// MapIter iterates one map across the tiers: the FreshTable's entries first (as fresh.MapIter
// yields them); then, unless the FreshTable held a clear or delete of the map, the SliceTable's
// entries whose user key the FreshTable holds no record of; then, likewise, the lower tier's
// entries whose user key neither upper tier holds a record of. Each user key is decided by the
// newest tier that has a record for it, so it is yielded at most once.
//
// The lower phase is one merged pass: the lower tier's entries come in user-key order, and so
// do the user keys the SliceTable decides (slice.Table.MapShadow), which the phase walks beside
// them to skip the shadowed ones — a SliceTable lookup per entry searched every slice of the
// map again, so that a map spread over many slices iterated in O(entries × slices) (issue 21,
// item 8: 3 M entries over 840 slices took 6 min). The FreshTable is asked per entry (a hash
// probe, whatever the map's size).
//
// The lower phase merges lazily: it walks the lower tier's versions of the map in chunks of
// about lowMapChunk live entries (lowMap, resolved with base.Resolver), resuming each chunk at
// the user key where the last one stopped, so an iteration holds one chunk, not the map. An
// entry a chunk yielded stays valid until the next write (each chunk has its own arena).
//
// A user key of a lower tier written in the FreshTable during the iteration, before the
// iteration reaches it, is not yielded (the FreshTable's iteration covers the map as it was
// when it began, and the lower phases skip user keys the FreshTable now holds).
type MapIter struct {
	t     *Engine
	hm    uint64
	mk    []byte
	order uint64
	phase uint8 // 0 FreshTable, 1 SliceTable, 2 lower tier, 3 done
	open  bool  // counted in t.openIters
	epoch uint64
	fi    fresh.MapIter
	si    slice.MapIter
	sk    slice.MapIter // the SliceTable's decided user keys, beside the lower tier (phase 2)
	skOK  bool          // sk is on a user key
	low   *lowMap       // the lower tier's current chunk (phase 2)
	li    int
	uk    []byte
	val   []byte
	err   error
}

// MapIter returns an iterator over the map mapKey (hash hm); mapKey must stay unchanged while
// it is used. It does not defer installs: call Hold for an iteration that spans writes, and Close
// when done with it.
func (t *Engine) MapIter(hm uint64, mapKey []byte) MapIter {
	if t.tail != nil {
		if err := t.awaitTail(); err != nil { // invariant 33
			return MapIter{t: t, hm: hm, mk: mapKey, phase: 3, epoch: t.epoch, err: err}
		}
	}
	return MapIter{t: t, hm: hm, mk: mapKey, epoch: t.epoch, fi: t.f.MapIter(hm, mapKey)}
}

// Hold counts the iteration as open, deferring installs until it ends (doc.go, install protocol
// item 4).
func (it *MapIter) Hold() {
	if !it.open && it.phase != 3 && it.err == nil {
		it.open = true
		it.t.openIters++
	}
}

// Close ends the iteration's deferral of installs.
func (it *MapIter) Close() {
	if it.low != nil {
		if it.t.lowMapFree == nil {
			it.t.lowMapFree = it.low // the entries it yielded live on in their own arena
		}
		it.low = nil
	}
	if it.open {
		it.open = false
		if it.epoch == it.t.epoch { // else an install reset the count already
			it.t.openIters--
		}
	}
	it.phase = 3
}

// Valid reports whether the tiers the iteration walks are unchanged since it began; when not,
// it records ErrIteratorInvalidated.
func (it *MapIter) Valid() bool {
	if it.epoch == it.t.epoch {
		return true
	}
	if it.err == nil {
		it.err = ErrIteratorInvalidated
	}
	it.Close()
	return false
}

// Next moves to the next live entry of the map, merged across the tiers in user-key order,
// and reports whether there is one; false at the end, after Close, or once an install
// invalidated the iteration (Err then returns ErrIteratorInvalidated). Owner only.
func (it *MapIter) Next() bool {
	if it.err != nil || it.phase == 3 || !it.Valid() {
		return false
	}
	t := it.t
	for {
		switch it.phase {
		case 0:
			if it.fi.Next() {
				it.uk, it.val = it.fi.UserKey(), it.fi.Value()
				return true
			}
			if err := it.fi.Err(); err != nil {
				it.err = err
				it.Close()
				return false
			}
			if it.fi.Complete() {
				it.Close()
				return false
			}
			it.order = t.orderOf(it.mk, it.hm)
			it.si = t.sl.MapIter(it.order, it.mk)
			it.phase = 1
		case 1:
			for it.si.Next() {
				uk := it.si.UserKey()
				if _, st := t.f.MapGet(it.hm, it.mk, base.HashUserKey(uk), uk); st != absent {
					continue
				}
				it.uk, it.val = uk, it.si.Value()
				return true
			}
			if err := it.si.Err(); err != nil {
				it.err = err
				it.Close()
				return false
			}
			if it.si.Complete() || t.low == nil {
				it.Close()
				return false
			}
			it.low = t.lowMapFree
			if it.low == nil {
				it.low = new(lowMap)
			}
			t.lowMapFree = nil
			it.low.start(t.mapChunk)
			if err := it.low.fill(t.low, it.order, it.mk); err != nil {
				it.err = err
				it.Close()
				return false
			}
			it.sk = t.sl.MapShadow(it.order, it.mk)
			it.skOK = it.sk.Next()
			it.li, it.phase = 0, 2
		case 2:
			for {
				if it.li == len(it.low.ents) {
					if !it.low.more {
						break
					}
					if err := it.low.fill(t.low, it.order, it.mk); err != nil {
						it.err = err
						it.Close()
						return false
					}
					it.li = 0
					continue
				}
				e := it.low.ents[it.li]
				it.li++
				if _, st := t.f.MapGet(it.hm, it.mk, base.HashUserKey(e.uk), e.uk); st != absent {
					continue
				}
				if it.shadowed(e.uk) {
					continue
				}
				if err := it.sk.Err(); err != nil {
					it.err = err
					it.Close()
					return false
				}
				it.uk, it.val = e.uk, e.val
				return true
			}
			it.Close()
			return false
		default:
			return false
		}
	}
}

// shadowed reports whether the SliceTable decides user key uk (holds an entry or an entry
// tombstone of it): it moves sk up to uk. Calls come in ascending uk order (the lower tier's).
func (it *MapIter) shadowed(uk []byte) bool {
	for it.skOK && bytes.Compare(it.sk.UserKey(), uk) < 0 {
		it.skOK = it.sk.Next()
	}
	return it.skOK && bytes.Equal(it.sk.UserKey(), uk)
}

// UserKey and Value return the current entry (valid until the next write).
func (it *MapIter) UserKey() []byte { return it.uk }

// Value returns the current entry's value (valid until the next write).
func (it *MapIter) Value() []byte { return it.val }

// Err returns the error that ended the iteration: ErrIteratorInvalidated (an install moved
// what the iteration walks), ErrCorruption or an I/O error of the lower tier; nil at a clean
// end.
func (it *MapIter) Err() error { return it.err }
