// Package slice will hold the SliceTable, Strata's second tier: a
// power-of-two number of buckets by hash range, each a chain of immutable,
// L1-sized sorted slices (newest first) searched by SIMD fingerprint kernels,
// with background memory compaction and a hot/cold evictor that spills to the
// LSM store.
//
// Not built yet: it is the subject of the SliceTable issue. Until it lands,
// sealed FreshTable segments stay in memory and the store's memory budget is a
// hard limit (writers get ErrMemoryBudget).
package slice
