package slice

import "github.com/strata-db/strata/internal/base"

// Cursor walks the entries of a Table's installed slices with an order
// hash of at least a start, in entry order (Order, Key, UserKey ascending,
// Seq descending), every version kept and nothing resolved: the engine's
// key scan (Flink's getKeys) merges it with the other tiers and resolves
// itself. Buckets are order-hash ranges, so it goes bucket by bucket,
// merging one bucket's runs at a time (newest first: a tie, which a
// correct chain never holds, goes to the newer run); a bucket is set up
// only when the walk reaches it, so a caller that stops early pays for
// the buckets it read.
//
// A Cursor reads the chains in place: it is valid only until the table
// next changes — Install, InstallCompaction, InstallEviction,
// InstallRelocation, Release or Close — and so is every entry it returned
// (whose bytes alias the slices). A scan uses one between two writes of
// its owner and sets it up again with Reset after them. Owner goroutine
// only. The zero Cursor is empty; Reset reuses its memory, so a Cursor
// allocates only while its buffers grow to the longest chain.
type Cursor struct {
	t      *Table
	lo     uint64
	b      int // the bucket being merged; len(buckets) at the end
	runs   []runIter
	srcs   []base.Iterator
	m      base.MergingIter
	active bool // m merges bucket b
}

// Reset positions c before the first entry of t whose Order is at least
// lo. O(1): the first bucket is set up by the first Next.
func (c *Cursor) Reset(t *Table, lo uint64) {
	c.t, c.lo, c.active = t, lo, false
	c.b = len(t.buckets)
	if !t.closed {
		c.b = t.BucketOf(lo)
	}
}

// setup readies the merge of bucket c.b's runs from order c.lo on.
func (c *Cursor) setup() {
	runs := c.t.buckets[c.b].runs
	c.runs, c.srcs = c.runs[:0], c.srcs[:0]
	for ri := range runs {
		r := &runs[ri]
		f := r.first(c.lo)
		if f == len(r.slices) {
			continue
		}
		it := runIter{slices: r.slices[f:]}
		if s := r.slices[f]; s.minOrder < c.lo {
			it.i = s.lowerBoundFP(c.lo)
		}
		c.runs = append(c.runs, it)
	}
	for i := range c.runs {
		c.srcs = append(c.srcs, &c.runs[i])
	}
	c.m.Init(c.srcs)
	c.active = true
}

// Next advances to the next entry and reports whether there is one.
func (c *Cursor) Next() bool {
	if c.t == nil {
		return false
	}
	for c.b < len(c.t.buckets) {
		if !c.active {
			c.setup()
		}
		if c.m.Next() {
			return true
		}
		c.active = false
		c.b++
	}
	return false
}

// Entry returns the current entry: its bytes alias the slice and stay
// valid until the table changes (see Cursor).
func (c *Cursor) Entry() *base.Entry { return c.m.Entry() }

// Err is nil: slices in memory were checked when built.
func (c *Cursor) Err() error { return nil }

var _ base.Iterator = (*Cursor)(nil)
