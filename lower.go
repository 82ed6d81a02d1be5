package strata

import (
	"github.com/strata-db/strata/internal/entry"
)

// lowerTier is the tier below the SliceTable, where the SliceTable's eviction sends its coldest
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
type lowerTier interface {
	// Evict writes one sorted run (entry.Iterator order: Order, Key, UserKey ascending, Seq
	// descending; every version kept) and returns a handle to it, invisible to reads until
	// Install. The entries are valid only during the call.
	Evict(it entry.Iterator) (pending any, err error)
	// Install makes an evicted run visible to reads, as the newest data of the tier (every
	// evicted run is newer than the runs evicted before it). lastSeq is the store's sequence
	// number at install, for the tier to continue numbering after a restart.
	Install(pending any, lastSeq uint64) error
	// Discard drops an evicted run that will not be installed.
	Discard(pending any)
	// Get visits the versions of (key, userKey) held by the tier, newest first, until visit
	// returns false; userKey is nil for key-level entries. The entry is valid only during
	// visit.
	Get(order uint64, key, userKey []byte, visit func(*entry.Entry) bool) error
	// MapRange visits every entry of the map (order, mapKey): its key-level tombstones first
	// (empty user key), then user keys ascending, each user key's versions newest first.
	MapRange(order uint64, mapKey []byte, visit func(*entry.Entry) bool) error
	// Close releases the tier (the Store closes it after its own tiers).
	Close() error
}

// evictSink adapts a lowerTier to the entry.Sink that slice.Eviction.Run feeds, keeping the
// pending run for the owner's install. One per eviction job; used by that job's task only
// until the job is done.
type evictSink struct {
	low     lowerTier
	pending any
}

func (e *evictSink) Evict(it entry.Iterator) error {
	p, err := e.low.Evict(it)
	if err != nil {
		return err
	}
	e.pending = p
	return nil
}

// lowGet resolves the newest key-level version of key in the lower tier: Found with a copy of
// the value (a value, or a list's base batch), Deleted for a tombstone, Absent when the tier
// holds nothing. The copy is the caller's (valid until the next write, as the upper tiers'
// values): the tier's bytes are only valid during the visit.
func lowGet(low lowerTier, order uint64, key []byte) ([]byte, status, error) {
	var val []byte
	st := absent
	err := low.Get(order, key, nil, func(e *entry.Entry) bool {
		switch e.Kind {
		case entry.KindValue, entry.KindListBase, entry.KindListAppend:
			val, st = append([]byte(nil), e.Value...), found
		case entry.KindTombstone:
			st = deleted
		default:
			return true // a map entry with an empty user key: not key-level
		}
		return false
	})
	return val, st, err
}

// lowListGet appends the lower tier's batches of a list (copies), oldest first, stopping at a
// base or tombstone, to dst.
func lowListGet(low lowerTier, order uint64, key []byte, dst [][]byte) ([][]byte, error) {
	start := len(dst)
	err := low.Get(order, key, nil, func(e *entry.Entry) bool {
		switch e.Kind {
		case entry.KindListAppend:
			dst = append(dst, append([]byte(nil), e.Value...))
			return true
		case entry.KindListBase, entry.KindValue:
			dst = append(dst, append([]byte(nil), e.Value...))
			return false
		case entry.KindTombstone:
			return false
		}
		return true
	})
	reverse(dst[start:])
	return dst, err
}

// lowMapGet resolves user key uk of the map mapKey in the lower tier: the newest version of the
// entry against the newest key-level tombstone (a clear or delete of the map).
func lowMapGet(low lowerTier, order uint64, mapKey, uk []byte) ([]byte, status, error) {
	var (
		val       []byte
		seq, tomb uint64
		st        = absent
		hasTomb   bool
	)
	err := low.Get(order, mapKey, uk, func(e *entry.Entry) bool {
		switch e.Kind {
		case entry.KindMapEntry:
			val, seq, st = append([]byte(nil), e.Value...), e.Seq, found
		case entry.KindMapEntryTombstone:
			seq, st = e.Seq, deleted
		default:
			return true
		}
		return false
	})
	if err != nil {
		return nil, absent, err
	}
	err = low.Get(order, mapKey, nil, func(e *entry.Entry) bool {
		if e.Kind == entry.KindTombstone {
			tomb, hasTomb = e.Seq, true
			return false
		}
		return true
	})
	if err != nil {
		return nil, absent, err
	}
	if hasTomb && (st == absent || tomb > seq) {
		return nil, deleted, nil
	}
	return val, st, nil
}

// lowEntry is a live map entry of the lower tier, copied out of it.
type lowEntry struct{ uk, val []byte }

// lowMapEntries returns the live entries of the map mapKey in the lower tier (copies), in user
// key order.
func lowMapEntries(low lowerTier, order uint64, mapKey []byte) ([]lowEntry, error) {
	var (
		out     []lowEntry
		tomb    uint64
		hasTomb bool
		last    []byte
		seen    bool
	)
	err := low.MapRange(order, mapKey, func(e *entry.Entry) bool {
		switch {
		case e.Kind == entry.KindTombstone && len(e.UserKey) == 0:
			if !hasTomb || e.Seq > tomb {
				tomb, hasTomb = e.Seq, true
			}
			return true
		case e.Kind != entry.KindMapEntry && e.Kind != entry.KindMapEntryTombstone:
			return true
		}
		if seen && string(last) == string(e.UserKey) {
			return true // an older version
		}
		seen, last = true, append(last[:0], e.UserKey...)
		if e.Kind == entry.KindMapEntry && (!hasTomb || e.Seq > tomb) {
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
