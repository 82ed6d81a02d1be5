package engine

import (
	"bytes"
	"fmt"

	"github.com/strata-db/strata/internal/base"
)

// Hooks for the root package's tests: they reach states of the engine no API shows (forcing an
// eviction, walking the row cache). Not for production use; each runs on the owner goroutine.

// EvictNow starts an eviction of the coldest slices if none is in flight and reports whether one
// is running now.
func (t *Engine) EvictNow() bool { return t.evict() || t.eviction != nil }

// BackgroundErr returns the sticky background failure, if any.
func (t *Engine) BackgroundErr() error { return t.bgErr }

// Busy reports whether background work is queued or in flight (LSM compactions included).
func (t *Engine) Busy() bool { return t.inFlight() || len(t.lsmJobs) != 0 }

// RowCacheSets returns the number of sets of the row cache; -1 when there is none.
func (t *Engine) RowCacheSets() int {
	if t.rc == nil {
		return -1
	}
	return int(t.rc.sets)
}

// CheckRowCache walks every used slot of the row cache, checks its structure (lengths, the tag
// and set of the key's order hash, the count of used slots) and calls visit with each cached
// composite key and value (valid during the call). It returns the first error found, by the
// walk or by visit.
func (t *Engine) CheckRowCache(visit func(key, value []byte) error) error {
	c := t.rc
	if c == nil {
		return nil
	}
	used := 0
	for si := uint64(0); si < c.sets; si++ {
		for w := 0; w < rowWays; w++ {
			off := (si*rowWays + uint64(w)) * rowSlot
			sl := c.mem[off : off+rowSlot]
			tag := uint32(sl[0]) | uint32(sl[1])<<8 | uint32(sl[2])<<16 | uint32(sl[3])<<24
			if tag == 0 {
				continue
			}
			used++
			kl, vl := int(sl[4]), int(sl[5])
			if kl+vl > rowMaxData {
				return fmt.Errorf("row cache slot %d/%d: key %d + value %d bytes > %d", si, w, kl, vl, rowMaxData)
			}
			ck, cv := sl[rowHdr:rowHdr+kl], sl[rowHdr+kl:rowHdr+kl+vl]
			h, _, ok := base.HashCompositeKey(ck)
			if !ok {
				return fmt.Errorf("row cache slot %d/%d: malformed key %x", si, w, ck)
			}
			order := t.orderOf(ck, h)
			if rowTag(order) != tag {
				return fmt.Errorf("row cache slot %d/%d of %x: tag %#x, want %#x", si, w, ck, tag, rowTag(order))
			}
			if set := c.set(order); &set[0] != &c.mem[si*rowWays*rowSlot] {
				return fmt.Errorf("row cache: %x cached in set %d, not in its set", ck, si)
			}
			if err := visit(bytes.Clone(ck), cv); err != nil {
				return err
			}
		}
	}
	if used != c.n {
		return fmt.Errorf("row cache: %d slots used, n = %d", used, c.n)
	}
	return nil
}

// RowCacheLen returns the number of used slots of the row cache (0 without one).
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

// Finished reports whether background work has finished that the next install would take.
func (t *Engine) Finished() bool { return t.ready.Load() > 0 }

// OpenScans returns the number of key scans open (not closed).
func (t *Engine) OpenScans() int { return len(t.scans) }
