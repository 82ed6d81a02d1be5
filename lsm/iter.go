package lsm

import (
	"slices"

	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/lsm/sstable"
)

// Iter walks every entry the DB holds with an order hash in a range, merged
// across all levels in entry order (Order, Key, UserKey ascending, Seq
// descending), every version kept and nothing resolved: the engine's key
// scan (Flink's getKeys) merges it with the tiers above and resolves
// itself. Each table is read through its clip range (doc.go, "Clipping"),
// so entries outside a table's manifest range never appear.
//
// Reset pins the DB's current version (as a Snapshot: no file of it is
// removed until Release) and positions the Iter on it; Release unpins it,
// keeping the read buffers — one sstable.Iter (a 256 KiB read buffer) per
// L0 file and one per deeper level — which the next Reset reuses for the
// tables it reads again, so a scan in many steps, with installs between
// them, neither pins files between its steps nor allocates per step.
// Close releases the pin and the buffers. Next may be called only between
// a Reset and the next Release or Close. Entries alias the read buffers and
// are valid until the next Next, Reset, Release or Close. Owner goroutine
// only (as Get).
type Iter struct {
	d      *DB
	v      *version // pinned; nil before the first Reset and after Close
	l0     []*tableIter
	levels []*levelScan
	srcs   []base.Iterator
	m      base.MergingIter
	err    error
}

// tableIter is one table read through its clip range narrowed to the
// walk's range.
type tableIter struct {
	t      *tableFile
	it     sstable.Iter
	lo, hi uint64
	seek   bool
	done   bool
}

func (c *tableIter) reset(t *tableFile, lo, hi uint64, keep bool) {
	if !keep || c.t != t || c.it.Err() != nil {
		c.it.Reset(t.r)
	}
	c.t = t
	c.lo, c.hi = max(lo, t.meta.MinOrder), min(hi, t.meta.MaxOrder)
	c.seek, c.done = true, c.lo > c.hi
}

func (c *tableIter) Next() bool {
	if c.done {
		return false
	}
	if c.seek {
		c.it.SeekGE(c.lo)
		c.seek = false
	}
	if !c.it.Next() || c.it.Entry().Order > c.hi {
		c.done = true
		return false
	}
	return true
}

func (c *tableIter) Entry() *base.Entry { return c.it.Entry() }
func (c *tableIter) Err() error         { return c.it.Err() }

// levelScan walks the sorted, disjoint files of one level L1+ that meet
// [lo, hi], one file at a time through one tableIter.
type levelScan struct {
	files  []*tableFile
	i      int
	lo, hi uint64
	cur    tableIter
	open   bool
}

func (l *levelScan) reset(files []*tableFile, lo, hi uint64) {
	l.files, l.lo, l.hi, l.open = files, lo, hi, false
	l.i, _ = slices.BinarySearchFunc(files, lo, func(t *tableFile, o uint64) int {
		if t.meta.MaxOrder < o {
			return -1
		}
		return 1
	})
}

func (l *levelScan) Next() bool {
	for {
		if !l.open {
			if l.i == len(l.files) || l.files[l.i].meta.MinOrder > l.hi {
				return false
			}
			// The same tableIter for every file: its buffer is reused.
			l.cur.reset(l.files[l.i], l.lo, l.hi, false)
			l.i++
			l.open = true
		}
		if l.cur.Next() {
			return true
		}
		if l.cur.Err() != nil {
			return false
		}
		l.open = false
	}
}

func (l *levelScan) Entry() *base.Entry { return l.cur.Entry() }
func (l *levelScan) Err() error         { return l.cur.it.Err() }

// NewIter returns an Iter that reads nothing until Reset. Owner only.
func (d *DB) NewIter() *Iter { return &Iter{d: d} }

// Reset positions it before the first entry of the DB's current version
// with an order hash in [lo, hi], pinning that version (and unpinning the
// one it read before). Errors: base.ErrClosed (it then yields nothing).
// Owner only.
func (it *Iter) Reset(lo, hi uint64) error {
	d := it.d
	it.err = nil
	if d.closed {
		it.release()
		it.err = base.ErrClosed
		it.srcs = it.srcs[:0]
		it.m.Init(it.srcs)
		return it.err
	}
	v := d.current
	if v != it.v {
		v.refs++
		it.release()
		it.v = v
	}
	// L0 newest first (install order): the merge puts the newer of two equal versions first.
	old := it.l0
	it.l0 = it.l0[:0:0]
	for _, t := range v.levels[0] {
		if t.meta.MaxOrder < lo || t.meta.MinOrder > hi {
			continue
		}
		var c *tableIter
		for i, o := range old { // reuse the table's buffer when it was read before
			if o != nil && o.t == t {
				c, old[i] = o, nil
				break
			}
		}
		if c == nil {
			for i, o := range old { // else any buffer
				if o != nil {
					c, old[i] = o, nil
					break
				}
			}
		}
		if c == nil {
			c = new(tableIter)
		}
		c.reset(t, lo, hi, true)
		it.l0 = append(it.l0, c)
	}
	for len(it.levels) < len(v.levels) {
		it.levels = append(it.levels, new(levelScan))
	}
	it.srcs = it.srcs[:0]
	for _, c := range it.l0 {
		it.srcs = append(it.srcs, c)
	}
	for l := 1; l < len(v.levels); l++ {
		if len(v.levels[l]) == 0 {
			continue
		}
		ls := it.levels[l]
		ls.reset(v.levels[l], lo, hi)
		it.srcs = append(it.srcs, ls)
	}
	it.m.Init(it.srcs)
	return nil
}

// Release unpins the version read since Reset, keeping the buffers for the next Reset.
func (it *Iter) Release() {
	it.release()
	it.srcs = it.srcs[:0]
	it.m.Init(it.srcs)
}

// release unpins the version read.
func (it *Iter) release() {
	if it.v != nil && it.d.current != nil { // nil after Close, which released everything
		it.d.unrefVersion(it.v)
	}
	it.v = nil
}

// Next advances to the next entry and reports whether there is one.
func (it *Iter) Next() bool {
	if it.err != nil {
		return false
	}
	if it.m.Next() {
		return true
	}
	it.err = it.m.Err()
	return false
}

// Entry returns the current entry (valid until the next Next, Reset or Close).
func (it *Iter) Entry() *base.Entry { return it.m.Entry() }

// Err returns the error that ended the walk: base.ErrClosed, base.ErrCorruption (a
// *base.CorruptionError naming the table and offset) or an I/O error; nil at a clean end.
func (it *Iter) Err() error { return it.err }

// Close unpins the version and drops the read buffers. The Iter may be Reset again.
func (it *Iter) Close() error {
	it.release()
	clear(it.l0)
	it.l0, it.levels, it.srcs = nil, nil, nil
	it.m.Init(nil)
	return nil
}
