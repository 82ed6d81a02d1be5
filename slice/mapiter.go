package slice

import (
	"bytes"

	"github.com/strata-db/strata/internal/base"
)

// inlineCursors is the number of runs a MapIter merges without
// allocating; longer chains (rare once compaction keeps up) allocate.
const inlineCursors = 8

// mapCursor walks one run's part of a map: the map entries of (order,
// mapKey) in user-key order, across the run's slices.
type mapCursor struct {
	slices []*Slice // the run's candidate slices, from the first that may hold the map
	si, i  int
	uk     []byte // current user key; nil when done
	done   bool
	tomb   uint64 // the run's newest key-level tombstone (clear) of the map
	hasTmb bool
}

// MapIter iterates the live entries of one map in the SliceTable, in user
// key order, merging the map's run in every run of the chain newest first:
// for each user key the newest version decides, an entry tombstone hides
// it, and a key-level tombstone (the map cleared or deleted) hides every
// entry older than it — its run is the last one visited. It is a value;
// creating and using it allocates nothing for chains of up to 8 runs.
//
// Entries alias slice memory. The Table's owner may read during the
// iteration but must not install a compaction, eviction or relocation (or
// Close): the iterator notices — Next returns false and Err returns
// ErrInvalidated — and never reads freed memory. Owner goroutine only.
type MapIter struct {
	t        *Table
	gen      uint64
	order    uint64
	key      []byte
	inline   [inlineCursors]mapCursor
	extra    []mapCursor
	n        int
	complete bool
	shadow   bool // MapShadow: entry tombstones are yielded too
	err      error
	uk, val  []byte
}

// MapIter returns an iterator over the map mapKey (order hash order).
func (t *Table) MapIter(order uint64, mapKey []byte) MapIter {
	return t.mapIter(order, mapKey, false)
}

// MapShadow returns an iterator over the user keys the chain decides in
// the map mapKey: each whose newest version in the chain is an entry or
// an entry tombstone (Value nil), in user-key order — the keys MapGet
// finds Found or Deleted while the chain holds no clear of the map (with
// one, Complete reports true and the chain decides every user key). The
// engine's map iteration walks it beside the lower tier's entries, which
// come in the same order, to skip the ones the SliceTable shadows: one
// merged pass, where a MapGet per entry searched every slice of the map
// again (O(entries × slices)). Same rules as MapIter otherwise.
func (t *Table) MapShadow(order uint64, mapKey []byte) MapIter {
	return t.mapIter(order, mapKey, true)
}

func (t *Table) mapIter(order uint64, mapKey []byte, shadow bool) MapIter {
	it := MapIter{t: t, gen: t.gen, order: order, key: mapKey, shadow: shadow}
	c := &t.buckets[order>>t.shift]
	if len(c.runs) > inlineCursors {
		it.extra = make([]mapCursor, 0, len(c.runs))
	}
	for ri := range c.runs {
		r := &c.runs[ri]
		si := r.first(order)
		cur := mapCursor{slices: r.slices[si:]}
		// Clears of the map in this run (key-level region, user key ""). The
		// region sorts first among the map's records, so the search stops at
		// the slice where it ends: searching every slice made each
		// iteration O(slices) before its first entry.
		for k := range cur.slices {
			s := cur.slices[k]
			if s.minOrder > order {
				cur.slices = cur.slices[:k]
				break
			}
			t.mapSearches++
			i := s.seek(order, mapKey, nil)
			for ; i < s.count && s.fps[i] == order; i++ {
				kk, u := s.keyAt(i)
				if len(u) > 0 || !bytes.Equal(kk, mapKey) {
					break
				}
				if rc := s.rec(i); rc.kind == base.KindTombstone && (!cur.hasTmb || rc.seq > cur.tomb) {
					cur.tomb, cur.hasTmb = rc.seq, true
				}
			}
			if i < s.count {
				break // the region ends inside this slice
			}
		}
		if len(cur.slices) == 0 {
			continue
		}
		cur.i = cur.slices[0].seek(order, mapKey, nil)
		it.settle(&cur)
		if !cur.done || cur.hasTmb {
			cur.slices[0].hits++
			if it.extra != nil {
				it.extra = append(it.extra, cur)
			} else {
				it.inline[it.n] = cur
			}
			it.n++
		}
		if cur.hasTmb {
			it.complete = true
			break
		}
	}
	return it
}

func (it *MapIter) cursors() []mapCursor {
	if it.extra != nil {
		return it.extra
	}
	return it.inline[:it.n]
}

// settle moves c to the next map entry of the map at or after its
// position (skipping key-level records), or marks it done.
func (it *MapIter) settle(c *mapCursor) {
	for c.si < len(c.slices) {
		s := c.slices[c.si]
		if c.i >= s.count {
			c.si++
			if c.si < len(c.slices) {
				it.t.mapSearches++
				c.i = c.slices[c.si].seek(it.order, it.key, nil)
			}
			continue
		}
		if s.fps[c.i] != it.order {
			break
		}
		k, u := s.keyAt(c.i)
		if !bytes.Equal(k, it.key) {
			break
		}
		if isMapKind(s.kindAt(c.i)) {
			c.uk = u
			return
		}
		c.i++
	}
	c.done, c.uk = true, nil
}

// Next advances to the next live entry and reports whether there is one.
func (it *MapIter) Next() bool {
	if it.err != nil {
		return false
	}
	if it.t == nil || it.gen != it.t.gen {
		it.err = ErrInvalidated
		return false
	}
	cs := it.cursors()
	for {
		w := -1
		for k := range cs {
			if !cs[k].done && (w < 0 || bytes.Compare(cs[k].uk, cs[w].uk) < 0) {
				w = k // ties keep the lower index: the newer run
			}
		}
		if w < 0 {
			return false
		}
		win := &cs[w]
		s := win.slices[win.si]
		rc := s.rec(win.i)
		uk := win.uk
		// Step every cursor past all versions of this user key.
		for k := range cs {
			c := &cs[k]
			for !c.done && bytes.Equal(c.uk, uk) {
				c.i++
				it.settle(c)
			}
		}
		if win.hasTmb && rc.seq < win.tomb {
			continue
		}
		if rc.kind == base.KindMapEntryTombstone {
			if it.shadow {
				it.uk, it.val = uk, nil
				return true
			}
			continue
		}
		it.uk, it.val = uk, rc.val
		return true
	}
}

// UserKey returns the current entry's user key (valid as Get's values).
func (it *MapIter) UserKey() []byte { return it.uk }

// Value returns the current entry's value (valid as Get's values).
func (it *MapIter) Value() []byte { return it.val }

// Complete reports whether the chain held a clear or delete of the map:
// then the iteration is the whole map below the FreshTable and lower
// tiers must not be consulted.
func (it *MapIter) Complete() bool { return it.complete }

// Err returns ErrInvalidated if the Table freed slices during the
// iteration, else nil.
func (it *MapIter) Err() error { return it.err }
