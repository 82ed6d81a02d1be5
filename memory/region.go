package memory

import (
	"fmt"
	"sync/atomic"
)

// Region is one anonymous mapping outside the Go heap, obtained from Budget.Map or Pool.Get.
// Its memory must hold only bytes and offsets, never Go pointers: the garbage collector does
// not scan it, so a Go pointer stored there would not keep its object alive.
//
// A Region is owned by one goroutine at a time. Release (or Pool.Put) must not run concurrently
// with uses of Bytes' slice; concurrent or repeated Release calls are harmless (only the first
// one unmaps).
type Region struct {
	budget   *Budget
	data     []byte // nil once released
	purpose  Purpose
	released atomic.Bool
}

// Bytes returns the region's memory: len and cap are the page-rounded size in bytes. The slice
// is valid until Release or Pool.Put; afterwards Bytes returns nil, but a slice obtained earlier
// still points at unmapped (or reused) memory and must not be touched — doing so faults or
// corrupts another owner's data. Memory from Budget.Map is zeroed; memory from Pool.Get may not be.
func (r *Region) Bytes() []byte { return r.data }

// Purpose returns the purpose the region is accounted to.
func (r *Region) Purpose() Purpose { return r.purpose }

// Release unmaps the region and returns its bytes to the budget. It is idempotent: calls after
// the first (or after Pool.Put) do nothing and return nil. It must not run concurrently with
// uses of the memory. If munmap fails (which means a broken invariant: the mapping is ours) the
// error is returned wrapped, and the bytes stay reserved, since they may still be mapped.
func (r *Region) Release() error {
	data, ok := r.claim()
	if !ok {
		return nil
	}
	if err := unmap(data); err != nil {
		return fmt.Errorf("memory: munmap %d bytes for %s: %w", len(data), r.purpose, err)
	}
	r.budget.unmapped(int64(len(data)), r.purpose)
	return nil
}

// claim marks the region released and hands its mapping to the caller exactly once
// (invariant 2); later calls get ok == false.
func (r *Region) claim() (data []byte, ok bool) {
	if r == nil || !r.released.CompareAndSwap(false, true) {
		return nil, false
	}
	data, r.data = r.data, nil
	return data, true
}

// MapScratch maps n bytes (rounded up to the page size) of zeroed anonymous memory outside the
// Go heap and outside every Budget, for a work buffer whose size the caller bounds by its own
// rule (the engine's sort buffer of the one transform or flush in flight). Outside the heap
// it neither counts toward the garbage collector's pacing nor waits for a collection to be
// returned: UnmapScratch returns it at once. A page costs memory only once touched. Scratch of
// at least 2 MiB is advised huge pages as Budget.Map's mappings are ("Huge pages" in doc.go):
// a sort buffer is written once from start to end, and with 4 KiB pages each of its pages is a
// fault of its own (a bulk changelog replay's 2 × 24 MiB of sort records cost about 130 ms of
// faults on a virtual machine, 2 ms with huge pages). On systems other than Linux it is a Go
// heap slice (the development fallback). Errors: the mmap error.
func MapScratch(n int) ([]byte, error) {
	ps := int(pageSize)
	b, err := mapAnon((max(n, 1) + ps - 1) &^ (ps - 1))
	if err == nil && len(b) >= hugePageSize {
		adviseHuge(b)
	}
	return b, err
}

// UnmapScratch unmaps a slice MapScratch returned (whole, as returned); it must not be used
// afterwards.
func UnmapScratch(b []byte) error { return unmap(b) }
