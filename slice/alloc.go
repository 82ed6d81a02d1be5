package slice

import (
	"fmt"
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
// An Allocator is safe for concurrent use: builds in background jobs
// allocate while the owner frees. It takes a mutex once per slice (16 KiB
// of entries), never per entry. Several Tables may share one.
type Allocator struct {
	pool      *memory.Pool
	blockSize int
	perSeg    int32

	mu        sync.Mutex
	segs      []*aseg // segments with at least one block in use, in mapping order
	blocks    int     // blocks in use
	large     int     // oversized regions in use
	largeSize int64   // bytes of oversized regions in use
}

// aseg is one Pool segment carved into blocks.
type aseg struct {
	r    *memory.Region
	mem  []byte
	free []int32 // free block indices (a stack)
	used int32
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
	return &Allocator{pool: pool, blockSize: blockSize, perSeg: int32(pool.SegmentSize() / blockSize)}, nil
}

// BlockSize returns the slice (block) size in bytes.
func (a *Allocator) BlockSize() int { return a.blockSize }

// alloc returns zero-length memory for a slice of n bytes: a block when n
// fits one, else a region of its own. The memory is 8-byte aligned and not
// zeroed. Errors: memory.ErrMemoryBudget (wrapped).
func (a *Allocator) alloc(n int) ([]byte, blockRef, error) {
	if n > a.blockSize {
		r, err := a.pool.Budget().Map(n, memory.PurposeSlice)
		if err != nil {
			return nil, blockRef{}, fmt.Errorf("slice: oversized slice of %d bytes: %w", n, err)
		}
		a.mu.Lock()
		a.large++
		a.largeSize += int64(len(r.Bytes()))
		a.mu.Unlock()
		return r.Bytes(), blockRef{large: r}, nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	// Fill the fullest segment first, so that lightly used segments drain
	// and go back to the Pool.
	var best *aseg
	for _, s := range a.segs {
		if len(s.free) > 0 && (best == nil || len(s.free) < len(best.free)) {
			best = s
		}
	}
	if best == nil {
		r, err := a.pool.Get(memory.PurposeSlice)
		if err != nil {
			return nil, blockRef{}, fmt.Errorf("slice: new segment for blocks: %w", err)
		}
		best = &aseg{r: r, mem: r.Bytes(), free: make([]int32, a.perSeg)}
		for i := range best.free {
			best.free[i] = a.perSeg - 1 - int32(i) // pop 0 first
		}
		a.segs = append(a.segs, best)
	}
	idx := best.free[len(best.free)-1]
	best.free = best.free[:len(best.free)-1]
	best.used++
	a.blocks++
	off := int(idx) * a.blockSize
	return best.mem[off : off+a.blockSize], blockRef{seg: best, idx: idx}, nil
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
	s.free = append(s.free, ref.idx)
	s.used--
	a.blocks--
	if s.used == 0 {
		for i, x := range a.segs {
			if x == s {
				a.segs = append(a.segs[:i], a.segs[i+1:]...)
				break
			}
		}
		a.pool.Put(s.r)
	}
}

// AllocStats is a snapshot of an Allocator's use.
type AllocStats struct {
	BlockSize     int   // bytes per block (the slice size)
	Segments      int   // Pool segments holding blocks
	Blocks        int   // blocks in use
	FreeBlocks    int   // free blocks inside those segments
	Oversized     int   // regions of oversized slices in use
	OversizedSize int64 // bytes of those regions
}

// Stats returns a snapshot of the allocator's use. Safe for concurrent use.
func (a *Allocator) Stats() AllocStats {
	a.mu.Lock()
	defer a.mu.Unlock()
	st := AllocStats{BlockSize: a.blockSize, Segments: len(a.segs), Blocks: a.blocks,
		Oversized: a.large, OversizedSize: a.largeSize}
	for _, s := range a.segs {
		st.FreeBlocks += len(s.free)
	}
	return st
}
