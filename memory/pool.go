package memory

import (
	"errors"
	"fmt"
	"sync"
)

// Segment sizes accepted by NewPool, in bytes.
const (
	SegmentSize2M  = 2 << 20
	SegmentSize4M  = 4 << 20
	SegmentSize8M  = 8 << 20
	SegmentSize16M = 16 << 20
	SegmentSize32M = 32 << 20
	SegmentSize64M = 64 << 20
)

// MaxFree is the number of segments a Pool keeps on its free list; Put releases segments beyond
// it. Two lets a table seal a segment and start the next without an mmap, while bounding the
// memory that is reserved but unused.
const MaxFree = 2

// Pool hands out fixed-size segments mapped through one Budget and keeps up to MaxFree returned
// segments on a free list for reuse, so that sealing and recycling segments does not cost an
// mmap/munmap pair each time. Segments on the free list still count toward Budget.Used (under
// Stats.Pooled, not under any purpose).
//
// A Pool is safe for concurrent use. It takes a mutex per Get and Put, that is once per segment
// (megabytes of records), never per record. The zero Pool is not usable; create one with NewPool.
type Pool struct {
	budget *Budget
	size   int // bytes; one of the SegmentSize constants

	mu     sync.Mutex
	free   [][]byte // at most MaxFree mappings of size bytes, accounted as pooled
	closed bool
}

// NewPool returns a pool of segmentSize-byte segments mapped through b. segmentSize must be
// SegmentSize2M, SegmentSize4M, SegmentSize8M, SegmentSize16M, SegmentSize32M or SegmentSize64M; otherwise NewPool returns ErrSegmentSize
// wrapped with the size. b must not be nil.
func NewPool(b *Budget, segmentSize int) (*Pool, error) {
	if b == nil {
		return nil, errors.New("memory: NewPool: nil budget")
	}
	switch segmentSize {
	case SegmentSize2M, SegmentSize4M, SegmentSize8M, SegmentSize16M, SegmentSize32M, SegmentSize64M:
	default:
		return nil, fmt.Errorf("%w: %d bytes (want 2, 4, 8, 16, 32 or 64 MiB)", ErrSegmentSize, segmentSize)
	}
	return &Pool{budget: b, size: segmentSize, free: make([][]byte, 0, MaxFree)}, nil
}

// Budget returns the budget the pool maps through; other mappings of the same store (hash
// indices) should be mapped through it too.
func (p *Pool) Budget() *Budget { return p.budget }

// SegmentSize returns the size of the pool's segments in bytes.
func (p *Pool) SegmentSize() int { return p.size }

// Free returns the number of segments on the free list (0..MaxFree). Safe for concurrent use.
func (p *Pool) Free() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.free)
}

// Get returns a segment of SegmentSize bytes accounted to purpose: one from the free list if
// there is one, otherwise a new mapping from Budget.Map. A reused segment is NOT zeroed — it holds
// whatever its previous owner wrote — so callers must not assume zeroed memory from Get (only
// Budget.Map guarantees it). Errors: ErrMemoryBudget (wrapped) when a new mapping would exceed the
// budget, ErrInvalidPurpose, ErrClosed after Close, or a wrapped mmap error. Safe for concurrent
// use. A writer's purpose (PurposeFreshData) is refused a free-list segment too when taking it
// would commit more than Limit − Reserve (see Budget.AddReserve).
func (p *Pool) Get(purpose Purpose) (*Region, error) {
	if !purpose.valid() {
		return nil, fmt.Errorf("%w: %d (pool get)", ErrInvalidPurpose, purpose)
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, ErrClosed
	}
	if n := len(p.free); n > 0 {
		// A writer's purpose may not take a free segment out of the reserve either: the
		// segment then leaves the memory the background tiers could use.
		if !purpose.usesReserve() {
			b := p.budget
			if committed := b.used.Load() - b.pooled.Load(); int64(p.size) > b.writerLimit(purpose)-committed {
				p.mu.Unlock()
				b.denied.Add(1)
				return nil, b.budgetError(p.size, uint64(p.size), purpose)
			}
		}
		data := p.free[n-1]
		p.free[n-1] = nil
		p.free = p.free[:n-1]
		p.mu.Unlock()
		sz := int64(len(data))
		p.budget.byPurpose[purpose].Add(sz)
		p.budget.pooled.Add(-sz)
		return &Region{budget: p.budget, data: data, purpose: purpose}, nil
	}
	p.mu.Unlock()
	return p.budget.Map(p.size, purpose)
}

// Put gives r back to the pool. r's memory goes to the free list if the list holds fewer than
// MaxFree segments and the pool is not closed; otherwise it is unmapped and its bytes return to
// the budget. Either way r is released: r.Bytes returns nil and r.Release does nothing
// afterwards, and r must not be used again. Put(nil) and Put of an already released region do
// nothing; a region of another size or budget is simply released. Safe for concurrent use with
// other Gets and Puts, but not with uses of r itself.
//
// Put panics ("strata: invariant: ...") if munmap fails, which can only happen if the mapping
// was not ours.
func (p *Pool) Put(r *Region) {
	if r == nil {
		return
	}
	if r.budget != p.budget || len(r.data) != p.size {
		if err := r.Release(); err != nil {
			panic("strata: invariant: " + err.Error())
		}
		return
	}
	data, ok := r.claim()
	if !ok {
		return
	}
	sz := int64(len(data))
	p.mu.Lock()
	if !p.closed && len(p.free) < MaxFree {
		// Account before the segment becomes visible to Get, which moves it back.
		p.budget.pooled.Add(sz)
		p.budget.byPurpose[r.purpose].Add(-sz)
		p.free = append(p.free, data)
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	if err := unmap(data); err != nil {
		panic(fmt.Sprintf("strata: invariant: memory: munmap of %d-byte segment: %v", sz, err))
	}
	p.budget.unmapped(sz, r.purpose)
}

// Close unmaps the free list and returns its bytes to the budget. Segments handed out by Get are
// not affected: their owners still Release or Put them (Put after Close releases). Get after
// Close returns ErrClosed. Close is idempotent; it returns the joined munmap errors, if any.
func (p *Pool) Close() error {
	p.mu.Lock()
	free := p.free
	p.free = nil
	p.closed = true
	p.mu.Unlock()
	var errs []error
	for _, data := range free {
		sz := int64(len(data))
		if err := unmap(data); err != nil {
			errs = append(errs, fmt.Errorf("memory: munmap %d-byte pooled segment: %w", sz, err))
			continue
		}
		p.budget.pooled.Add(-sz)
		p.budget.mappings.Add(-1)
		p.budget.used.Add(-sz)
	}
	return errors.Join(errs...)
}
