package slice

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/strata-db/strata/internal/base"
)

// Relocation is one memory-compaction job at the allocator level (doc.go,
// "Memory compaction"): it copies the table's slices out of a sparsely
// used segment into free blocks of fuller ones, so that the segment
// empties and goes back to the Pool. PickRelocation creates it and marks
// its slices moving; Run copies (any goroutine); InstallRelocation or
// CancelRelocation ends it on the owner goroutine.
type Relocation struct {
	t      *Table
	segs   []*aseg  // the segments being emptied, in ascending use at the pick
	slices []*Slice // the inputs, moving; each in a segment of segs
	src    []*aseg  // src[i] is the segment slices[i] is in
	bytes  int64
	moved  []blockCopy // Run's copies of slices[:len(moved)]
	nmoved int         // len(moved) when Run returned
	ran    bool
	ok     bool
	done   bool
}

// blockCopy is a copy of a slice's bytes in another block.
type blockCopy struct {
	buf []byte
	ref blockRef
}

// Slices returns the number of slices the job may move.
func (r *Relocation) Slices() int { return len(r.slices) }

// Segments returns the number of allocator segments the job empties: each
// goes back to the Pool at the install if all its slices moved (Moved ==
// Slices) and no other job holds one of them.
func (r *Relocation) Segments() int { return len(r.segs) }

// Bytes returns the memory of those slices, in bytes.
func (r *Relocation) Bytes() int64 { return r.bytes }

// Moved returns the number of slices Run copied (the others stay where
// they are: the receiving segments filled up meanwhile). Install moves
// those still installed and in no other job (Stats.RelocatedSlices).
func (r *Relocation) Moved() int { return r.nmoved }

// relocSegs is the number of segments one relocation may empty. One per
// job did not keep up with slice compactions freeing blocks all over the
// held segments (doc.go, "Memory compaction").
const relocSegs = 4

// PickRelocation proposes a relocation when the free blocks inside the
// allocator's partly used segments (not counting segments already being
// emptied) exceed one segment's worth, or reports false. It takes the
// least used segments holding slices of t that are not busy, up to
// relocSegs, each only if its slices fit the free blocks of the segments
// at least as used (the only ones Run fills) less those the segments
// picked before it claim, marks those slices moving and the segments
// draining: until the job ends, allocations avoid the segments (a block
// of them is handed out only when no other held segment has a free one)
// and relocations never fill them. Moving slices stay available to everything else: reads,
// compactions and evictions may take them (a relocation never delays a
// compaction); a slice that leaves the table meanwhile keeps its block
// until the relocation ends. At most one relocation per table is pending;
// false while one is. Owner goroutine only; O(segments held) plus
// O(slices of the segments considered).
func (t *Table) PickRelocation() (*Relocation, bool) {
	if t.closed || t.reloc != nil || len(t.bySeg) == 0 || t.a.slack() <= int(t.a.perSeg) {
		return nil, false // the common case costs a lock and a load
	}
	segs := make([]*aseg, 0, len(t.bySeg))
	for g := range t.bySeg {
		segs = append(segs, g)
	}
	use, listed := t.a.useOf(segs)
	per := t.a.perSeg
	total := 0
	for _, u := range listed {
		total += int(u.free)
	}
	if total <= int(per) {
		return nil, false
	}
	// room(u): free blocks of listed segments with at least u in use.
	suffix := make([]int, len(listed)+1)
	for i := len(listed) - 1; i >= 0; i-- {
		suffix[i] = suffix[i+1] + int(listed[i].free)
	}
	room := func(u int32) int {
		i, _ := slices.BinarySearchFunc(listed, u, func(x segUse, u int32) int { return cmp.Compare(x.used, u) })
		return suffix[i]
	}
	cand := make([]int, 0, len(segs))
	for i, u := range use {
		if !u.draining && u.used < per {
			cand = append(cand, i)
		}
	}
	slices.SortFunc(cand, func(i, j int) int {
		if c := cmp.Compare(use[i].used, use[j].used); c != 0 {
			return c
		}
		return cmp.Compare(segs[i].id, segs[j].id)
	})
	var job *Relocation
	claimed := 0 // blocks the segments picked so far will take
	var picked []int
	for _, i := range cand {
		if len(picked) == t.relocSegs {
			break
		}
		g := segs[i]
		n := 0
		for _, s := range t.bySeg[g] {
			if !s.busy && !s.moving {
				n++
			}
		}
		avail := room(use[i].used) - int(use[i].free) - claimed
		for _, j := range picked { // picked segments as used as this one are no target
			if use[j].used >= use[i].used {
				avail -= int(use[j].free)
			}
		}
		if n == 0 || avail < n {
			continue
		}
		if job == nil {
			job = &Relocation{t: t}
		}
		for _, s := range t.bySeg[g] {
			if !s.busy && !s.moving {
				s.moving = true
				job.slices = append(job.slices, s)
				job.src = append(job.src, g)
				job.bytes += int64(s.mem)
			}
		}
		job.segs = append(job.segs, g)
		t.a.startDrain(g)
		claimed += n
		picked = append(picked, i)
	}
	if job == nil {
		return nil, false
	}
	t.reloc = job
	return job, true
}

// Run copies the job's slices, byte for byte, into blocks of the fullest
// segments that have free ones — never into new memory, a segment being
// emptied or one less used than the slice's own — and when no such block is
// left it stops: the remaining slices stay where they are (Moved says how
// many moved). It reads only the moving slices' immutable bytes, which
// stay valid until the job ends, and allocates through the thread-safe
// allocator, so a background job runs it; it checks ctx before each
// slice. Errors: ctx.Err() (the job then holds no copies;
// cancel it), ErrJob if run twice.
func (r *Relocation) Run(ctx context.Context) error {
	if r.ran {
		return fmt.Errorf("%w: relocation already ran", ErrJob)
	}
	r.ran = true
	a := r.t.a
	for i, s := range r.slices {
		if err := ctx.Err(); err != nil {
			r.releaseCopies()
			return err
		}
		mem, ref, ok := a.allocMove(r.src[i])
		if !ok {
			break
		}
		buf := mem[:len(s.buf)]
		copy(buf, s.buf)
		r.moved = append(r.moved, blockCopy{buf: buf, ref: ref})
	}
	r.nmoved, r.ok = len(r.moved), true
	return nil
}

func (r *Relocation) releaseCopies() {
	for _, c := range r.moved {
		r.t.a.release(c.ref)
	}
	r.moved = nil
}

// InstallRelocation points each moved slice at its copy and frees the old
// block; the slices stay where they are in their chains (same *Slice, same
// heat and age), only their memory changes, so the values and map
// iterations that alias it end as after a compaction. A slice a
// compaction or eviction took meanwhile keeps its block (that job reads
// it; the copy is freed), and one that left the table meanwhile is freed
// now. The segment is no longer draining and goes back to the Pool once
// its last block is free. Errors: ErrJob if the job is not pending on t
// or Run did not succeed (the job stays pending; cancel it); base.ErrClosed
// after Close (copies and slices are freed). Owner goroutine only.
func (t *Table) InstallRelocation(r *Relocation) error {
	if r.t != t || r.done || !r.ok {
		return fmt.Errorf("%w: relocation of %d slices", ErrJob, len(r.slices))
	}
	r.end(!t.closed)
	if t.closed {
		return base.ErrClosed
	}
	return nil
}

// CancelRelocation ends a job without installing it: its slices stay
// where they are (those that left the table meanwhile are freed), its
// copies are freed. Call it only when Run has returned or will never be
// called (after scheduler.Handle.Wait, not merely Cancel): a Run still in
// flight would read blocks the owner may free from then on, and its copies
// would leak. Errors: ErrJob if the job is not pending on t. Owner
// goroutine only.
func (t *Table) CancelRelocation(r *Relocation) error {
	if r.t != t || r.done {
		return fmt.Errorf("%w: relocation of %d slices", ErrJob, len(r.slices))
	}
	r.end(false)
	return nil
}

// end ends the job: with swap, each moved slice that is still installed
// and in no other job takes its copy; every other copy is freed, as are
// the slices that left the table meanwhile. The segment stops draining
// first, so that it goes back to the Pool when its last block is freed.
func (r *Relocation) end(swap bool) {
	t := r.t
	r.done = true
	t.reloc = nil
	for _, g := range r.segs {
		t.a.endDrain(g)
	}
	swapped := 0
	for i, s := range r.slices {
		s.moving = false
		var cp *blockCopy
		if i < len(r.moved) {
			cp = &r.moved[i]
		}
		switch {
		case s.dropped:
			s.dropped = false
			t.free(s)
		case swap && cp != nil && !s.busy && s.table == t:
			old := s.ref
			t.unindex(s)
			s.rebase(cp.buf, cp.ref)
			t.index(s)
			t.release(old)
			swapped++
			continue
		}
		if cp != nil {
			t.release(cp.ref)
		}
	}
	r.moved = nil
	if swap {
		if swapped > 0 {
			t.gen++
		}
		t.relocations++
		t.relocatedSlices += int64(swapped)
	}
}
