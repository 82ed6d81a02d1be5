package slice

import (
	"fmt"
	"math/bits"
	"sync"

	"github.com/strata-db/strata/memory"
)

// Slice sizes. DefaultSliceSize is the one measured best (doc.go, "Slice
// size"); NewAllocator accepts any multiple of 4 KiB in
// [MinSliceSize, MaxSliceSize] so the benchmarks can compare.
const (
	DefaultSliceSize = 16 << 10
	MinSliceSize     = 4 << 10
	MaxSliceSize     = 256 << 10
)

// Allocator hands out fixed-size blocks for slices, carved from
// memory.Pool segments accounted to memory.PurposeSlice, and page-rounded
// regions (Budget.Map) for slices too large for a block. A segment whose
// blocks are all free goes back to the Pool.
//
// Placement (doc.go, "Memory compaction"): a block comes from the most
// used segment that has a free one, so lightly used segments drain as
// their slices are compacted, evicted or relocated; a new segment is taken
// from the Pool only when no held segment has a free block. Finding that
// segment is O(1): held segments sit in lists by blocks in use, with a
// two-level bitmap of the non-empty lists.
//
// An Allocator is safe for concurrent use: builds in background jobs
// allocate while the owner frees. It takes a mutex once per slice (16 KiB
// of entries), never per entry. Several Tables may share one.
type Allocator struct {
	pool      *memory.Pool
	blockSize int
	perSeg    int32 // blocks per segment

	mu        sync.Mutex
	lv        levels  // partly used segments that are not draining, by blocks in use
	draining  []*aseg // segments a pending relocation empties (any use)
	segs      int     // segments held (partly used, full or draining)
	segID     uint64  // ids of segments taken so far
	blocks    int     // blocks in use
	large     int     // oversized regions in use
	largeSize int64   // bytes of oversized regions in use
}

// aseg is one Pool segment carved into blocks.
type aseg struct {
	r          *memory.Region
	id         uint64 // order of taking, to break ties deterministically
	mem        []byte
	free       []int32 // free block indices (a stack)
	used       int32
	drain      int32 // pending relocations emptying this segment
	prev, next *aseg // list of segments with the same use (Allocator.lv)
	listed     bool  // in a list of Allocator.lv (partly used, not draining)
}

// blockRef says where a slice's memory came from: a block of a segment, or
// its own region.
type blockRef struct {
	seg   *aseg
	idx   int32
	large *memory.Region
}

// NewAllocator returns an allocator of blockSize-byte blocks (a multiple of
// 4 KiB in [MinSliceSize, MaxSliceSize]; DefaultSliceSize unless measuring)
// over pool, whose Budget also maps the oversized regions. Errors:
// ErrOptions for a bad size or a nil pool.
func NewAllocator(pool *memory.Pool, blockSize int) (*Allocator, error) {
	if pool == nil {
		return nil, fmt.Errorf("%w: NewAllocator: pool is nil", ErrOptions)
	}
	if blockSize < MinSliceSize || blockSize > MaxSliceSize || blockSize%4096 != 0 {
		return nil, fmt.Errorf("%w: slice size %d bytes: want a multiple of 4096 in [%d, %d]",
			ErrOptions, blockSize, MinSliceSize, MaxSliceSize)
	}
	return newAllocator(pool, blockSize, pool.SegmentSize()/blockSize), nil
}

// newAllocator uses only the first perSeg blocks of each segment: tests
// use a few blocks per segment to exercise many segments cheaply.
func newAllocator(pool *memory.Pool, blockSize, perSeg int) *Allocator {
	a := &Allocator{pool: pool, blockSize: blockSize, perSeg: int32(perSeg)}
	a.lv.init(perSeg)
	return a
}

// BlockSize returns the slice (block) size in bytes.
func (a *Allocator) BlockSize() int { return a.blockSize }

// BlocksPerSegment returns the number of blocks one Pool segment holds.
func (a *Allocator) BlocksPerSegment() int { return int(a.perSeg) }

// alloc returns zero-length memory for a slice of n bytes: a block when n
// fits one, else a region of its own. The memory is 8-byte aligned and not
// zeroed. Errors: memory.ErrMemoryBudget (wrapped).
func (a *Allocator) alloc(n int) ([]byte, blockRef, error) {
	if n > a.blockSize {
		r, err := a.pool.Budget().Map(n, memory.PurposeSlice)
		if err != nil {
			return nil, blockRef{}, fmt.Errorf("oversized slice of %d bytes: %w", n, err)
		}
		a.mu.Lock()
		a.large++
		a.largeSize += int64(len(r.Bytes()))
		a.mu.Unlock()
		return r.Bytes(), blockRef{large: r}, nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.lv.fullest()
	if s == nil {
		// A draining segment's free block before a new segment: a
		// relocation then empties it less, but no memory is mapped while
		// a held block is free.
		for _, d := range a.draining {
			if len(d.free) > 0 {
				s = d
				break
			}
		}
	}
	if s == nil {
		r, err := a.pool.Get(memory.PurposeSlice)
		if err != nil {
			return nil, blockRef{}, fmt.Errorf("new segment for slice blocks: %w", err)
		}
		a.segID++
		s = &aseg{r: r, id: a.segID, mem: r.Bytes(), free: make([]int32, a.perSeg)}
		for i := range s.free {
			s.free[i] = a.perSeg - 1 - int32(i) // pop 0 first
		}
		a.segs++
	}
	mem, ref := a.take(s)
	return mem, ref, nil
}

// allocMove returns a block for a slice relocated out of src from the
// fullest segment that is held, not draining, has a free block and has at
// least as many blocks in use as src, or ok false: a relocation never maps
// memory, never fills a segment being emptied, and never moves a block to
// a sparser segment (so relocations converge: each move raises the sum of
// the squares of the segments' use).
func (a *Allocator) allocMove(src *aseg) ([]byte, blockRef, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.lv.fullest()
	if s == nil || s.used < src.used {
		return nil, blockRef{}, false
	}
	mem, ref := a.take(s)
	return mem, ref, true
}

// take pops a free block of s and files s under its new use. a.mu held.
func (a *Allocator) take(s *aseg) ([]byte, blockRef) {
	if s.listed {
		a.lv.remove(s)
	}
	idx := s.free[len(s.free)-1]
	s.free = s.free[:len(s.free)-1]
	s.used++
	a.blocks++
	a.file(s)
	off := int(idx) * a.blockSize
	return s.mem[off : off+a.blockSize], blockRef{seg: s, idx: idx}
}

// file puts s, unlisted, where its use says: a list of a.lv when partly
// used and not draining; nowhere when full or draining; back to the Pool
// when no block is in use and no relocation holds it. a.mu held.
func (a *Allocator) file(s *aseg) {
	switch {
	case s.drain > 0:
	case s.used == 0:
		a.segs--
		a.pool.Put(s.r)
		s.r, s.mem, s.free = nil, nil, nil
	case s.used < a.perSeg:
		a.lv.add(s)
	}
}

// release returns a slice's memory. The owner calls it only once no reader
// can hold the slice (doc.go, "Concurrency").
func (a *Allocator) release(ref blockRef) {
	if ref.large != nil {
		n := int64(len(ref.large.Bytes()))
		if err := ref.large.Release(); err != nil {
			panic("strata: invariant: releasing an oversized slice region: " + err.Error())
		}
		a.mu.Lock()
		a.large--
		a.largeSize -= n
		a.mu.Unlock()
		return
	}
	if ref.seg == nil {
		return // decoded slice: not ours
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	s := ref.seg
	if s.listed {
		a.lv.remove(s)
	}
	s.free = append(s.free, ref.idx)
	s.used--
	a.blocks--
	a.file(s)
}

// startDrain marks s as being emptied by a relocation: no block of s is
// handed out while another held segment has one free (alloc), and none
// to a relocation (allocMove).
func (a *Allocator) startDrain(s *aseg) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if s.listed {
		a.lv.remove(s)
	}
	if s.drain == 0 {
		a.draining = append(a.draining, s)
	}
	s.drain++
}

// endDrain undoes startDrain once the relocation has ended.
func (a *Allocator) endDrain(s *aseg) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if s.drain <= 0 {
		panic("strata: invariant: ending a drain that was not started")
	}
	s.drain--
	if s.drain > 0 {
		return
	}
	for i, d := range a.draining {
		if d == s {
			a.draining = append(a.draining[:i], a.draining[i+1:]...)
			break
		}
	}
	a.file(s)
}

// slack returns the free blocks of the listed segments (held, partly
// used, not draining).
func (a *Allocator) slack() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.lv.free
}

// segUse is a snapshot of one segment's use.
type segUse struct {
	used, free int32
	draining   bool
}

// useOf returns a snapshot of segs' use, and of every listed segment
// (held, partly used, not draining: those relocations may fill) in
// ascending order of use. O(segments held + blocks per segment / 64).
func (a *Allocator) useOf(segs []*aseg) (use, listed []segUse) {
	a.mu.Lock()
	defer a.mu.Unlock()
	use = make([]segUse, 0, len(segs))
	for _, s := range segs {
		use = append(use, segUse{used: s.used, free: int32(len(s.free)), draining: s.drain > 0})
	}
	for wi, w := range a.lv.bits {
		for ; w != 0; w &= w - 1 {
			for s := a.lv.head[wi*64+bits.TrailingZeros64(w)]; s != nil; s = s.next {
				listed = append(listed, segUse{used: s.used, free: int32(len(s.free))})
			}
		}
	}
	return use, listed
}

// AllocStats is a snapshot of an Allocator's use.
type AllocStats struct {
	BlockSize     int   // bytes per block (the slice size)
	Segments      int   // Pool segments holding blocks
	Blocks        int   // blocks in use
	FreeBlocks    int   // free blocks inside those segments
	Oversized     int   // regions of oversized slices in use
	OversizedSize int64 // bytes of those regions
	// BlocksPerSegment is the number of blocks one segment holds.
	BlocksPerSegment int
	// Draining counts segments a pending relocation is emptying.
	Draining int
}

// Stats returns a snapshot of the allocator's use. O(1); safe for
// concurrent use.
func (a *Allocator) Stats() AllocStats {
	a.mu.Lock()
	defer a.mu.Unlock()
	return AllocStats{BlockSize: a.blockSize, Segments: a.segs, Blocks: a.blocks,
		FreeBlocks: a.segs*int(a.perSeg) - a.blocks, Oversized: a.large, OversizedSize: a.largeSize,
		BlocksPerSegment: int(a.perSeg), Draining: len(a.draining)}
}

// levels files the partly used segments that are not draining by blocks
// in use: head[u] lists those with u blocks in use (1 <= u < perSeg), bit
// u of word u/64 of bits says head[u] is non-empty, and bit w of word
// w/64 of sum says bits[w] is non-zero. fullest reads at most
// len(sum)+1 words (len(sum) <= 4 for 16,384 blocks per segment).
type levels struct {
	head []*aseg
	bits []uint64
	sum  []uint64
	free int // free blocks of the listed segments
}

func (l *levels) init(perSeg int) {
	l.head = make([]*aseg, perSeg)
	l.bits = make([]uint64, (perSeg+63)/64)
	l.sum = make([]uint64, (len(l.bits)+63)/64)
}

func (l *levels) add(s *aseg) {
	u := s.used
	s.prev, s.next, s.listed = nil, l.head[u], true
	if s.next != nil {
		s.next.prev = s
	}
	l.head[u] = s
	l.bits[u>>6] |= 1 << (u & 63)
	l.sum[u>>12] |= 1 << ((u >> 6) & 63)
	l.free += len(s.free)
}

func (l *levels) remove(s *aseg) {
	u := s.used
	if s.prev != nil {
		s.prev.next = s.next
	} else {
		l.head[u] = s.next
	}
	if s.next != nil {
		s.next.prev = s.prev
	}
	s.prev, s.next, s.listed = nil, nil, false
	l.free -= len(s.free)
	if l.head[u] == nil {
		l.bits[u>>6] &^= 1 << (u & 63)
		if l.bits[u>>6] == 0 {
			l.sum[u>>12] &^= 1 << ((u >> 6) & 63)
		}
	}
}

// fullest returns a listed segment with the most blocks in use, or nil.
func (l *levels) fullest() *aseg {
	for i := len(l.sum) - 1; i >= 0; i-- {
		if w := l.sum[i]; w != 0 {
			wi := i*64 + 63 - bits.LeadingZeros64(w)
			return l.head[wi*64+63-bits.LeadingZeros64(l.bits[wi])]
		}
	}
	return nil
}
