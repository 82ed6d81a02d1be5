package engine

import (
	"bytes"
	"fmt"

	"github.com/strata-db/strata/internal/base"
)

// Hooks for the root package's tests: they reach states of the engine no API shows (forcing an
// eviction, walking the row cache). Not for production use; each runs on the owner goroutine.
//
// Only hooks the root's tests use live here; those only the engine's own tests use live in
// export_test.go (Busy, Finished). The root's tests that still use these are typed-API tests that need
// to put the engine in a given state under a Store, and no public option does it cleanly:
//
//   - EvictNow: the model test (store_model_test.go: its push-down steps and the row cache
//     configurations), the crash, damage, checkpoint, key-scan, admin, errors and row cache
//     tests put state in the LsmStore at a chosen point. An option that evicts on demand
//     would be an API for tests only.
//   - RowCacheSets, CheckRowCache, RowCacheLen: the model test's checkCache step and the
//     root's row cache tests (rowcache_test.go, ttl_test.go's TestTTLRowCache) check the cache
//     under typed writes (TTL rows, reducing state, MergeNamespaces) against the model.
//   - BackgroundErr: store_fault_test.go's TestAttackNoSpaceEviction names the sticky
//     background failure, if any, when an op still fails once space is back.
//   - BulkReplayFiles, BulkReplayParallel: bulkreplay_test.go and
//     savepoint_canonical_bulk_test.go tell which path a restore took (the model is typed).
//   - SetCheckpointHook: checkpoint_test.go's TestCheckpointPinsMemory holds the memory table
//     of a checkpoint of the typed model.
//   - OpenScans: keys_test.go checks that a typed key iteration left by break closes its
//     scan.

// EvictNow starts an eviction of the coldest slices if none is in flight and reports whether one
// is running now.
func (t *Engine) EvictNow() bool { return t.evict() || t.eviction != nil }

// BackgroundErr returns the sticky background failure, if any.
func (t *Engine) BackgroundErr() error { return t.bgErr }

// BulkReplayFiles returns the number of L0 files bulk changelog replays installed (bulk.go):
// tests tell by it which path a restore took.
func (t *Engine) BulkReplayFiles() int64 { return t.bulkFiles }

// BulkReplayParallel returns the number of batches bulk changelog replays split into parts by
// key-group range and wrote at once (bulk.go, invariant 30): tests tell by it that the
// parallel path ran.
func (t *Engine) BulkReplayParallel() int64 { return t.bulkParallel }

// RowCacheSets returns the number of sets of the row cache; -1 when there is none.
func (t *Engine) RowCacheSets() int {
	if t.rc == nil {
		return -1
	}
	return int(t.rc.sets)
}

// CheckRowCache walks every entry of the row cache, checks its structure (rowcache.go,
// invariant 5: dense words, units inside the set and disjoint, units exactly what key and value
// need, the tag and set of the key's order hash, the count of entries; invariant 6: each set's
// summary) and calls visit with each
// cached composite key and value (valid during the call). It returns the first error found, by
// the walk or by visit.
func (t *Engine) CheckRowCache(visit func(key, value []byte) error) error {
	if t.rc == nil {
		return nil
	}
	return t.rc.check(func(s []byte, tag uint32, ck, cv []byte) error {
		h, _, ok := base.HashCompositeKey(ck)
		if !ok {
			return fmt.Errorf("row cache: malformed key %x", ck)
		}
		order := t.orderOf(ck, h)
		if rowTag(order) != tag {
			return fmt.Errorf("row cache: %x has tag %#x, want %#x", ck, tag, rowTag(order))
		}
		if set := t.rc.set(order); &set[0] != &s[0] {
			return fmt.Errorf("row cache: %x not cached in its set", ck)
		}
		return visit(bytes.Clone(ck), cv)
	})
}

// check walks every entry of c, checks the structure of its set (rowcache.go, invariant 5)
// and calls visit with the entry's set, tag, key and value.
func (c *rowCache) check(visit func(set []byte, tag uint32, key, value []byte) error) error {
	used := 0
	for si := uint64(0); si < c.sets; si++ {
		s := c.mem[si*rowSet : (si+1)*rowSet]
		var mask uint32
		var sum uint64
		for i := range rowWays {
			w := rowWord(s, i)
			if w == 0 {
				for j := i + 1; j < rowWays; j++ {
					if rowWord(s, j) != 0 {
						return fmt.Errorf("row cache set %d: word %d in use after the empty word %d", si, j, i)
					}
				}
				break
			}
			used++
			st, n := rowStart(w), rowLen(w)
			if w>>28 != 0 || w&0xffff == 0 || n == 0 || n > rowMaxUnits || st+n > rowUnits {
				return fmt.Errorf("row cache set %d word %d: %#x (start %d, %d units)", si, i, w, st, n)
			}
			m := uint32(1<<n-1) << st
			if mask&m != 0 {
				return fmt.Errorf("row cache set %d word %d: units %d+%d overlap another entry", si, i, st, n)
			}
			mask |= m
			sum |= rowSumBit(w & 0xffff)
			e := rowEntry(s, w)
			kl, vl := int(e[0])|int(e[1])<<8, int(e[2])|int(e[3])<<8
			if kl+vl > rowMaxData || rowUnitsFor(kl, vl) != n {
				return fmt.Errorf("row cache set %d word %d: key %d + value %d bytes in %d units", si, i, kl, vl, n)
			}
			if err := visit(s, w&0xffff, e[rowEntryHdr:rowEntryHdr+kl], e[rowEntryHdr+kl:rowEntryHdr+kl+vl]); err != nil {
				return err
			}
		}
		if sum != c.sum[si] {
			return fmt.Errorf("row cache set %d: summary %#x, its tags' %#x (invariant 6)", si, c.sum[si], sum)
		}
	}
	if used != c.n {
		return fmt.Errorf("row cache: %d entries, n = %d", used, c.n)
	}
	return nil
}

// RowCacheLen returns the number of entries of the row cache (0 without one).
func (t *Engine) RowCacheLen() int {
	if t.rc == nil {
		return 0
	}
	return t.rc.n
}

// SetCheckpointHook makes every later checkpoint's upload call hook before it writes its
// memory table (tests hold the memory pins with it). nil removes it. Owner goroutine, with no
// checkpoint running.
func (t *Engine) SetCheckpointHook(hook func()) { t.ck.hook = hook }

// OpenScans returns the number of key scans open (not closed).
func (t *Engine) OpenScans() int { return len(t.scans) }
