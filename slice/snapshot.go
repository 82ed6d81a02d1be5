package slice

import (
	"fmt"
	"sync/atomic"

	"github.com/strata-db/strata/internal/base"
)

// Snapshot is an immutable view of every slice installed in a Table when
// Table.Snapshot took it (doc.go, invariant 16): a checkpoint pins the
// in-memory tier on the owner goroutine in O(slices) and reads it on a
// background goroutine while the owner keeps installing, compacting,
// evicting and relocating.
//
// The snapshot holds private copies of the slices' read-only views (the
// encoded bytes, fingerprints, offsets, count and ranges), which the owner
// never writes, and while it is open the Table defers every release of a
// block or oversized region back to the Allocator, so the bytes it reads
// are neither changed nor reused. Iter, Bytes and Slices may be called from
// any goroutine until Table.ReleaseSnapshot; the owner must not release
// the snapshot (nor Close the table) while another goroutine still reads
// it or entries read from it.
type Snapshot struct {
	t        *Table     // the table that pinned; owner goroutine only
	depths   [][]*Slice // depths[d]: run d of every chain that has one, in bucket order
	slices   int
	bytes    int64
	released atomic.Bool // set by ReleaseSnapshot or Close (owner); read by Iter
}

// Snapshot pins the table and returns a view of every installed slice of
// every chain, busy and moving ones included. From now until the last
// open snapshot is released (ReleaseSnapshot), freed slices, relocated
// slices' old blocks and relocations' unused copies stay allocated —
// counted by the Allocator and the Budget, reported in Stats.PinnedBytes —
// instead of going back to the Allocator; reads and writes of the table
// are unaffected. O(slices + buckets): one *Slice-sized copy per slice,
// in two allocations. After Close it returns an empty snapshot that is
// already released. Owner goroutine only.
func (t *Table) Snapshot() *Snapshot {
	s := &Snapshot{t: t}
	if t.closed {
		s.released.Store(true)
		return s
	}
	var perDepth []int
	for b := range t.buckets {
		runs := t.buckets[b].runs
		for len(perDepth) < len(runs) {
			perDepth = append(perDepth, 0)
		}
		for d := range runs {
			perDepth[d] += len(runs[d].slices)
			s.slices += len(runs[d].slices)
		}
	}
	views := make([]Slice, s.slices)
	ptrs := make([]*Slice, s.slices)
	s.depths = make([][]*Slice, len(perDepth))
	at := 0
	for d, n := range perDepth {
		s.depths[d] = ptrs[at : at : at+n]
		at += n
	}
	i := 0
	for b := range t.buckets {
		for d, r := range t.buckets[b].runs {
			for _, x := range r.slices {
				v := &views[i]
				i++
				// The fields a reader needs, and no allocator handle: a view
				// cannot free anything, and the owner never writes it.
				*v = Slice{buf: x.buf, fps: x.fps, offs: x.offs, count: x.count,
					minOrder: x.minOrder, maxOrder: x.maxOrder, scale: x.scale, minSeq: x.minSeq, maxSeq: x.maxSeq,
					mem: x.mem, bucket: x.bucket}
				s.depths[d] = append(s.depths[d], v)
				s.bytes += int64(x.mem)
			}
		}
	}
	t.snaps = append(t.snaps, s)
	return s
}

// ReleaseSnapshot closes s; when it was the last open snapshot of t, the
// releases deferred since the first one was taken are performed (blocks
// go back to the Allocator, segments to the Pool). The caller must make
// sure no goroutine still reads s or entries from it. Idempotent, and a
// no-op after Close (which released everything). Panics on a snapshot of
// another table. Owner goroutine only; O(open snapshots + deferred
// releases).
func (t *Table) ReleaseSnapshot(s *Snapshot) {
	if s == nil {
		return
	}
	if s.t != t {
		panic("strata: invariant: a snapshot released on a table that did not take it")
	}
	if s.released.Load() {
		return
	}
	s.released.Store(true)
	for i, x := range t.snaps {
		if x == s {
			t.snaps = append(t.snaps[:i], t.snaps[i+1:]...)
			break
		}
	}
	if len(t.snaps) == 0 {
		t.releaseDeferred()
	}
}

// release gives a block (or oversized region) back to the Allocator, or,
// while a snapshot is open, defers it (invariant 16). The owner's free
// and relocation paths call it; only background paths whose memory no
// snapshot can see (Build's abort, a failed Relocation.Run's copies) call
// Allocator.release directly.
func (t *Table) release(ref blockRef) {
	if len(t.snaps) == 0 {
		t.a.release(ref)
		return
	}
	switch {
	case ref.large != nil:
		t.pinnedBytes += int64(len(ref.large.Bytes()))
	case ref.seg != nil:
		t.pinnedBytes += int64(t.a.blockSize)
	default:
		return // decoded slice: not ours
	}
	t.deferred = append(t.deferred, ref)
}

// releaseDeferred performs the releases deferred while snapshots were open.
func (t *Table) releaseDeferred() {
	for _, ref := range t.deferred {
		t.a.release(ref)
	}
	clear(t.deferred)
	t.deferred = t.deferred[:0]
	t.pinnedBytes = 0
}

// closeSnapshots releases every open snapshot (Close): their memory goes
// back with everything else, so a reader still using one reads freed
// memory — the engine releases its snapshots before it closes.
func (t *Table) closeSnapshots() {
	for _, s := range t.snaps {
		s.released.Store(true)
	}
	clear(t.snaps)
	t.snaps = t.snaps[:0]
	t.releaseDeferred()
}

// Iter returns an iterator over every entry of the snapshot in entry order
// (Order, Key, UserKey ascending, Seq descending), every version kept, as
// Eviction.Run hands to a sink. It merges one source per chain depth: run
// d of every bucket, in bucket order, is one sorted sequence (buckets are
// order-hash ranges), so the merge has max-chain-length sources, not one
// per run. Entries' bytes alias the pinned blocks: valid until
// ReleaseSnapshot. Safe to call and use from any goroutine, concurrently
// with any owner operation on the table (each iterator by one goroutine);
// after ReleaseSnapshot (or Close) it yields nothing and Err returns
// ErrSnapshotReleased.
func (s *Snapshot) Iter() base.Iterator {
	if s.released.Load() {
		return &releasedIter{err: fmt.Errorf("%w: iterator of a snapshot of %d slices", ErrSnapshotReleased, s.slices)}
	}
	return newMergeIter(s.depths, false)
}

// Bytes returns the memory held by the snapshot's slices, in bytes (block
// sizes and oversized regions'). Safe from any goroutine.
func (s *Snapshot) Bytes() int64 { return s.bytes }

// Slices returns the number of slices in the snapshot. Safe from any
// goroutine.
func (s *Snapshot) Slices() int { return s.slices }

// releasedIter is the empty iterator of a released snapshot.
type releasedIter struct{ err error }

func (r *releasedIter) Next() bool         { return false }
func (r *releasedIter) Entry() *base.Entry { return nil }
func (r *releasedIter) Err() error         { return r.err }
