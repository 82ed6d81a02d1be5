// Package scheduler will be the only Strata package that starts goroutines:
// bounded workers running background tasks (transform, compaction, eviction,
// uploads) by priority class, with cancellation, pprof labels per task class
// (strata.task=transform, …) and a Close that waits for every task.
//
// Not built yet: it arrives with the SliceTable issue. Until then Strata runs
// no background work at all — every operation completes on the caller's
// goroutine.
package scheduler
