// Package lsm will hold the LsmStore, Strata's third tier: immutable files of
// CRC32C-checksummed blocks with per-block hash indices, a manifest of
// versions, leveled compaction with a compaction filter (tombstones, TTL), and
// a block cache inside the memory budget.
//
// Not built yet: it is the subject of the LsmStore issue. Until it lands, a
// store keeps all state in memory and persists nothing on Close.
package lsm
