// Package memory maps the memory that Strata's tiers keep outside the Go heap, and bounds it.
//
// # Terms
//
//   - Budget: a hard limit in bytes shared by several stores (all stores of a process or a slot).
//     Every mapping is reserved against a Budget before it exists.
//   - Region: one anonymous private mapping (mmap via golang.org/x/sys/unix on Linux), accounted
//     to one Purpose. It holds bytes and 32-bit offsets only, never Go pointers, so the garbage
//     collector neither scans it nor keeps anything alive through it.
//   - Purpose: what a region or a Charge is for (FreshTable data, FreshTable index, slices,
//     block and row caches, timers, the changelog's buffers, operator state, other); the
//     Budget keeps one counter per purpose for metrics.
//   - Segment: a Region of a fixed size (2, 4, 8, 16, 32 or 64 MiB) handed out by a Pool; the unit in
//     which the FreshTable fills, seals and recycles memory.
//   - Free list: up to MaxFree returned segments a Pool keeps mapped for the next Get.
//
// # Accounting
//
// A Budget is a handful of atomic counters; no lock is taken on any path:
//
//	Budget
//	+-----------+-------------------------------------------------------------+
//	| limit     | immutable, > 0                                              |
//	| used      | reserved bytes: live regions + free-list segments +         |
//	|           | reservations whose mmap is in flight           (CAS-updated) |
//	| byPurpose | [NumPurposes] bytes of live regions per purpose              |
//	| pooled    | bytes of segments on Pool free lists (no purpose)            |
//	| mappings  | live mappings, free-list segments included                   |
//	| denied    | count of requests refused with ErrMemoryBudget               |
//	+-----------+-------------------------------------------------------------+
//
//	   Budget.Map ──reserve(CAS)──► mmap ──► Region{purpose} ──Release──► munmap, used -= n
//	                                            │      ▲
//	                                       Pool.Put  Pool.Get
//	                                            ▼      │
//	                                     free list (≤ MaxFree, pooled) ──Close/overflow──► munmap
//
// # Invariants
//
//  1. The budget is never exceeded: Used() <= Limit() at every instant. Map reserves the rounded
//     size with a compare-and-swap loop on used first and only then calls mmap; a failed mmap
//     returns the reservation. Concurrent callers therefore cannot overshoot together, and a
//     refused request maps nothing and leaves no reservation behind.
//  2. A Region is released exactly once. Release and Pool.Put claim the mapping with a
//     compare-and-swap on the region's released flag; only the winner unmaps it (or moves it to a
//     free list), every later call is a no-op, and Bytes() returns nil from then on.
//  3. Free-list segments count toward Used: moving a segment between a Region and a free list
//     changes byPurpose and pooled, never used. Only mmap (after reservation) raises used and
//     only a successful munmap lowers it. When no call is in flight,
//     Used == sum(UsedBy(p) for all p) + Stats().Pooled.
//  4. Every mapping is a whole number of pages, and the accounted size is exactly
//     len(Region.Bytes()).
//  5. A Pool's free list holds at most MaxFree segments, each exactly SegmentSize bytes and
//     mapped through the Pool's Budget; a closed Pool holds none and Put after Close unmaps.
//  6. Region memory holds no Go pointers (callers' obligation; the package stores none there).
//  7. Memory from Budget.Map is zeroed (fresh anonymous pages). Memory from Pool.Get is NOT: a
//     reused segment holds its previous owner's bytes, and the FreshTable must initialise what it
//     reads (zeroing 64 MiB per recycle would cost more than the mmap it saves).
//  8. The reserve (AddReserve) is kept for the background tiers: a mapping or free-list segment
//     for a writer's purpose (FreshTable data or index, timer queues; a Charge of the changelog
//     or operator state) is granted only while the committed bytes, Used − Pooled (free-list segments are
//     there for the background tiers to take),
//     stay at or below Limit − Reserve afterwards; the other purposes may go up to Limit, and
//     nobody beyond it (invariant 1). So after a writer is refused, a transform can still map
//     the slices that will free the writer's segment.
//  9. MapScratch is the one mapping outside every Budget: scratch whose size its caller bounds
//     by its own rule and states (the engine's sort buffer of the one transform or flush in
//     flight, part of the fixed allowance root Options.MemoryBudget names). It holds no Go
//     pointers either (invariant 6).
//  10. Charge accounts bytes that are not mapped (Go-heap buffers: the changelog's record
//     buffers) under the same limit and reserve checks as Map, to a purpose, without a
//     mapping; Refund returns them. So invariants 1, 3 and 8 hold with charges counted in
//     Used and UsedBy; invariant 4 is about mappings only.
//
// # Huge pages
//
// Mappings of at least 2 MiB (Budget.Map's and MapScratch's) are advised MADV_HUGEPAGE so that
// a hash index probe or a segment scan does not miss the TLB every 4 KiB page, and a buffer
// written from start to end takes a fault per 2 MiB, not per 4 KiB; such mappings start on a
// 2 MiB boundary (mapAnon over-maps by 2 MiB of address space and trims the ends), because
// the kernel backs only aligned 2 MiB ranges with huge pages and kernels before 6.7 do not
// align anonymous mappings.
// The advice is best effort: with transparent huge pages disabled or "never" madvise fails with
// EINVAL and is ignored. On arm64 kernels with 64 KiB base pages the PMD huge page is 512 MiB,
// larger than any segment, so the advice is then a no-op; it costs nothing.
//
// # Errors and concurrency
//
// ErrMemoryBudget is the backpressure signal: callers (the FreshTable, the scheduler) wait for
// background work to free memory and retry; it is never a crash. Budget and Pool are safe for
// concurrent use; a Region is owned by one goroutine at a time. Map, Release, Get and Put make
// at most one syscall each and run once per segment or index, never per record.
//
// # Platforms
//
// Linux (amd64, arm64) uses mmap/munmap/madvise. Other systems build with a fallback that
// allocates regions with make([]byte) on the Go heap (same rounding and accounting, no huge
// pages); it exists for development only.
package memory
