package memory

import (
	"fmt"
	"os"
	"sync/atomic"
)

// pageSize is the OS page size in bytes; every mapping is a whole number of pages.
var pageSize = uint64(os.Getpagesize())

// hugePageSize is the transparent huge page size (2 MiB on amd64 and on arm64 with 4 KiB base
// pages). Mappings of at least this size get MADV_HUGEPAGE advice.
const hugePageSize = 2 << 20

// Budget is a hard limit, in bytes, on the memory mapped through it. Several stores (one per
// operator subtask, or all stores of a slot) share one Budget, so that together they never map
// more than the limit; a request that would exceed it fails with ErrMemoryBudget instead of
// driving the process out of memory (callers turn that into backpressure).
//
// A Budget is safe for concurrent use by any number of goroutines: the counters are atomics and
// the limit is checked with a compare-and-swap before anything is mapped (invariant 1 in the
// package documentation). The zero Budget is not usable; create one with NewBudget.
type Budget struct {
	limit int64 // bytes; > 0; immutable

	used      atomic.Int64 // bytes reserved: mapped, being mapped, or on a Pool's free list
	byPurpose [NumPurposes]atomic.Int64
	pooled    atomic.Int64 // bytes on Pool free lists (part of used, of no purpose)
	mappings  atomic.Int64 // live mappings, pooled ones included
	denied    atomic.Int64 // reservations refused with ErrMemoryBudget
	reserved  atomic.Int64 // the reserve: bytes writers' purposes may not take (AddReserve)
}

// NewBudget returns a Budget that allows at most limit bytes to be mapped through it at once.
// limit must be positive; NewBudget panics otherwise (a programming error: the root package's
// Options.Validate rejects such limits first).
func NewBudget(limit int64) *Budget {
	if limit <= 0 {
		panic(fmt.Sprintf("strata: invariant: memory budget limit must be > 0, got %d", limit))
	}
	return &Budget{limit: limit}
}

// Limit returns the budget's limit in bytes, as given to NewBudget.
func (b *Budget) Limit() int64 { return b.limit }

// AddReserve changes the reserve by delta bytes and returns the new reserve. The reserve is the
// part of the limit that the writers' purposes (PurposeFreshData, PurposeFreshIndex, and the
// heap charges of PurposeChangelog and PurposeOperatorState, and PurposeTimers) may not take: a mapping or free-list segment for them is refused with ErrMemoryBudget once it would
// take the budget's committed bytes above Limit − Reserve, while the background tiers'
// purposes (PurposeSlice, PurposeBlockCache, PurposeOther) may use the whole limit. A store adds
// the memory one transform of a sealed segment needs when it opens (and subtracts it when it
// closes), so that moving data down a tier can always allocate its output before it frees its
// input: without it, writers could fill the budget to the last page and nothing could ever free
// memory again. The reserve is clamped to [0, Limit]. Safe for concurrent use; it does not
// take back memory already mapped.
func (b *Budget) AddReserve(delta int64) int64 {
	for {
		r := b.reserved.Load()
		n := min(max(r+delta, 0), b.limit)
		if b.reserved.CompareAndSwap(r, n) {
			return n
		}
	}
}

// Reserve returns the current reserve in bytes (see AddReserve).
func (b *Budget) Reserve() int64 { return b.reserved.Load() }

// WriterRoom returns the bytes the writers' purposes (PurposeFreshData, PurposeFreshIndex, …)
// may still commit: Limit − Reserve − (Used − Pooled), as Map and a Pool's Get judge them
// (segments on a Pool's free list are room: a Get reuses them); never negative. Safe for
// concurrent use; the value may be stale by the time it is read.
func (b *Budget) WriterRoom() int64 {
	return max(b.limit-b.reserved.Load()-(b.used.Load()-b.pooled.Load()), 0)
}

// writerLimit returns the bytes purpose p may commit: the limit, less the reserve for the
// writers' purposes.
func (b *Budget) writerLimit(p Purpose) int64 {
	if p.usesReserve() {
		return b.limit
	}
	return b.limit - b.reserved.Load()
}

// Used returns the bytes currently mapped through this budget (page-rounded sizes), including
// segments parked on the free list of a Pool and reservations whose mmap is in flight. It never
// exceeds Limit. Safe for concurrent use; the value may be stale by the time it is read.
func (b *Budget) Used() int64 { return b.used.Load() }

// UsedBy returns the bytes currently mapped for purpose p, or 0 for an invalid purpose. Free-list
// segments of a Pool belong to no purpose (see Stats.Pooled). Safe for concurrent use.
func (b *Budget) UsedBy(p Purpose) int64 {
	if !p.valid() {
		return 0
	}
	return b.byPurpose[p].Load()
}

// Stats is a snapshot of a Budget's accounting, in bytes unless stated otherwise. The counters
// are read one by one without a lock, so under concurrent Map/Release/Get/Put the snapshot may be
// momentarily inconsistent (for example Used != sum(ByPurpose) + Pooled); once quiescent it is
// exact.
type Stats struct {
	Limit     int64              // the budget's limit
	Used      int64              // reserved bytes, as Budget.Used
	ByPurpose [NumPurposes]int64 // bytes per purpose, as Budget.UsedBy
	Pooled    int64              // bytes on Pool free lists (counted in Used, in no purpose)
	Mappings  int64              // live mappings (count), pooled segments included
	Denied    int64              // reservations refused with ErrMemoryBudget since NewBudget (count)
	Reserve   int64              // bytes the writers' purposes may not take (AddReserve)
}

// Stats returns a snapshot of the budget's accounting. Safe for concurrent use.
func (b *Budget) Stats() Stats {
	s := Stats{
		Limit:    b.limit,
		Used:     b.used.Load(),
		Pooled:   b.pooled.Load(),
		Mappings: b.mappings.Load(),
		Denied:   b.denied.Load(),
		Reserve:  b.reserved.Load(),
	}
	for i := range s.ByPurpose {
		s.ByPurpose[i] = b.byPurpose[i].Load()
	}
	return s
}

// Map maps size bytes of anonymous, private, zeroed memory outside the Go heap, accounted to
// purpose p. size is rounded up to a whole number of pages (os.Getpagesize); the Region's Bytes
// has the rounded length and the rounded size is what counts against the budget.
//
// The budget is reserved first, with a compare-and-swap, and only then is memory mapped, so
// concurrent callers can never map more than the limit together. Map fails with ErrMemoryBudget
// (wrapped with the size, purpose, limit and usage) if the reservation would exceed the limit,
// (for PurposeFreshData and PurposeFreshIndex: above Limit − Reserve, see AddReserve),
// with ErrInvalidSize if size <= 0, with ErrInvalidPurpose if p >= NumPurposes, and with the
// wrapped OS error if mmap itself fails (the reservation is then returned). Mappings of at least
// 2 MiB are advised MADV_HUGEPAGE; the advice is best effort and its errors are ignored.
//
// Safe for concurrent use. Map makes syscalls: it is for segments and indices, not per-record
// allocation.
func (b *Budget) Map(size int, p Purpose) (*Region, error) {
	if !p.valid() {
		return nil, fmt.Errorf("%w: %d (mapping %d bytes)", ErrInvalidPurpose, p, size)
	}
	if size <= 0 {
		return nil, fmt.Errorf("%w: %d bytes for %s", ErrInvalidSize, size, p)
	}
	// Rounding in uint64 cannot overflow: size <= MaxInt64 and pageSize is small.
	rounded := (uint64(size) + pageSize - 1) &^ (pageSize - 1)
	if rounded > uint64(b.limit) {
		b.denied.Add(1)
		return nil, b.budgetError(size, rounded, p)
	}
	n := int64(rounded)
	if !b.reserve(n, p) {
		return nil, b.budgetError(size, rounded, p)
	}
	data, err := mapAnon(int(n))
	if err != nil {
		b.used.Add(-n)
		return nil, fmt.Errorf("memory: mmap %d bytes for %s: %w", n, p, err)
	}
	if n >= hugePageSize {
		adviseHuge(data)
	}
	b.byPurpose[p].Add(n)
	b.mappings.Add(1)
	return &Region{budget: b, data: data, purpose: p}, nil
}

// reserve adds n > 0 bytes to used unless that would exceed the limit (invariant 1) or, for a
// writer's purpose, take the committed bytes (used less the free-list segments, which the
// background tiers can take) into the reserve (invariant 8).
func (b *Budget) reserve(n int64, p Purpose) bool {
	for {
		u := b.used.Load()
		if n > b.limit-u { // u <= limit, so limit-u does not overflow
			b.denied.Add(1)
			return false
		}
		if !p.usesReserve() && n > b.writerLimit(p)-(u-b.pooled.Load()) {
			b.denied.Add(1)
			return false
		}
		if b.used.CompareAndSwap(u, u+n) {
			return true
		}
	}
}

// unmapped returns the n bytes of a mapping that was accounted to purpose p and is now unmapped.
func (b *Budget) unmapped(n int64, p Purpose) {
	b.byPurpose[p].Add(-n)
	b.mappings.Add(-1)
	b.used.Add(-n)
}

func (b *Budget) budgetError(size int, rounded uint64, p Purpose) error {
	return fmt.Errorf("%w: cannot map %d bytes (%d requested) for %s: %d of %d bytes in use",
		ErrMemoryBudget, rounded, size, p, b.used.Load(), b.limit)
}
