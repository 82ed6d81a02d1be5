package strata

import (
	"github.com/strata-db/strata/internal/engine"
	"github.com/strata-db/strata/memory"
)

// Stats describes the memory, contents, background work and cost of a Store, nested by
// component as Pebble's Metrics: the tiers (Fresh, Slices, LSM), Caches, the Budget, Stalls
// (writers that waited), Background work by class, the Task side's CPU, TTL cleanup,
// Checkpoints, the Changelog, and the bytes Written to each tier. Sizes are bytes, times
// nanoseconds, counts since Open. Go heap memory (registrations, scratch buffers) is not
// included. Store.Stats fills it in O(buckets + segments + slices + table files).
type Stats struct {
	States int // registered states
	// HotTier is the hot tier's figures (Options.HotTierSize; zero when it is off).
	HotTier HotTierStats
	// OpenKeyScans is the number of key iterations (Store.Keys, KeysAndNamespaces,
	// ApplyToAllKeys, NumEntries) open now: each holds a scan of the tiers until its loop
	// ends, by break too; a count that grows points at iterators pulled (iter.Pull) and
	// never stopped.
	OpenKeyScans int
	Fresh        FreshStats
	Slices       SliceStats
	LSM          LSMStats
	Caches       CacheStats
	Budget       BudgetStats
	Stalls       StallStats
	Background   BackgroundStats
	Task         TaskStats
	TTL          TTLStats
	Checkpoints  CheckpointsStats
	Changelog    ChangelogCost
	Written      WrittenStats
	LazyRestore  LazyRestoreStats
}

// FreshStats describe the FreshTable (the newest tier, mmap'd segments with a hash index).
type FreshStats struct {
	Records        int64 // records held (values, list batches, map entries, tombstones)
	Segments       int   // data segments held (active and sealed)
	SealedSegments int   // sealed segments waiting for (or in) transform
	SegmentBytes   int64 // bytes of data segments mapped (Segments × SegmentSize)
	DataBytes      int64 // bytes used inside the data segments
	IndexBytes     int64 // bytes mapped for hash indices
}

// SliceStats describe the SliceTable and the memory-side background work that feeds and
// drains it.
type SliceStats struct {
	Count    int   // slices held
	Runs     int   // runs over all buckets' chains
	Bytes    int64 // memory held by the slices
	MaxChain int   // longest chain of a bucket, in runs

	Transforms       int64 // sealed segments transformed into slices (or flushed) and dropped
	TransformedBytes int64 // data bytes of those segments
	TransformFails   int64 // transforms that failed (for memory they are retried)
	Compactions      int64 // slice compactions installed
	Evictions        int64 // evictions to the LsmStore installed
	EvictedBytes     int64 // slice bytes evicted
	Relocations      int64 // relocations installed (allocator segments emptied into fuller ones)
}

// LSMStats describe the LsmStore (all zero for a Store in memory only).
type LSMStats struct {
	Files int   // table files in all levels
	Bytes int64 // bytes of those files
	// LevelBytes are the bytes of each level, L0 first; the levels above the deepest
	// non-empty one over it is the LsmStore's space amplification.
	LevelBytes  [engine.LSMMaxLevels]int64
	L0Files     int   // files in L0
	Compactions int64 // LSM compactions installed
	// Flushes counts sealed segments written straight to L0 (a budget too small for a
	// transform's slices beside the FreshTable; counted in Slices.Transforms too).
	Flushes int64
	// IngestedBytes is the key and value bytes evicted into the LsmStore, WrittenBytes the
	// table bytes written for them (L0 files and compaction outputs), WriteAmplification
	// their ratio.
	IngestedBytes      int64
	WrittenBytes       int64
	WriteAmplification float64
	PersistFiles       int64 // L0 files Close wrote
	PersistNanos       int64 // time Close spent moving the tiers into the LsmStore
	// The table cache (Options.MaxOpenFiles): files open now, reads that found their file
	// open (hits) or opened it (misses), and opens refused for want of descriptors.
	OpenTables       int
	TableCacheHits   int64
	TableCacheMisses int64
	OutOfFiles       int64
}

// CacheStats describe the block cache and the row cache (both inside the budget).
type CacheStats struct {
	BlockBytes  int64 // memory of the block cache
	BlockHits   int64 // LSM block reads served by the cache
	BlockMisses int64 // LSM block reads that went to a file
	RowBytes    int64 // memory of the row cache (Options.RowCacheSize)
	RowHits     int64 // value reads of the lower tier served by the row cache
	RowMisses   int64 // value reads that went to the lower tier
	// RowTooLarge counts values the row cache did not take: key and value together exceed
	// 508 bytes.
	RowTooLarge int64
	// RowSets is the number of the row cache's sets of 1 KiB (0 without a row cache: a Store
	// in memory only, RowCacheSize < 0, or before the cache is mapped); RowEntries the
	// values it holds now, at most 16 a set (Store.Check walks them).
	RowSets, RowEntries int
}

// BudgetStats describe the memory budget (shared budgets: all stores together).
//
// ByPurpose and Pooled say where Used goes (memory.Budget.Stats): the FreshTable's data
// segments and indices, slices, the block cache, the changelog's buffer, operator state,
// timers, other mappings (the transforms' sort buffers among them), and the FreshTable's free
// segments kept for reuse (Pooled, in no purpose). Read without a lock while background work
// maps and frees, so the parts may not add up to Used exactly.
//
// Fixed is the budget's fixed costs (internal/engine/doc.go, "Fixed costs"; issue 22: at
// most an eighth of a budget of 64 MiB or more at the default segment size while the
// transforms' slices fit in a segment): the memory that holds no state the Store could keep
// instead — the FreshTable's segments with their indices (the active one and the sealed ones
// in flight), the transform reserve, EvictionRoom, and the block and row caches once mapped.
// State beyond Limit − Fixed (slices, timers, the changelog's buffer, operator state) is
// evicted; free segments kept for reuse (Pooled) are part of EvictionRoom's room, not added
// to it. With a shared budget every store's segments, caches and reserve count, and this
// Store's EvictionRoom.
type BudgetStats struct {
	Used      int64                     // bytes reserved
	Limit     int64                     // the limit
	Reserve   int64                     // bytes only background work may take
	ByPurpose [memory.NumPurposes]int64 // bytes per purpose, indexed by memory.Purpose
	Pooled    int64                     // free FreshTable segments kept for reuse
	// EvictionRoom is the room, in bytes, the Store keeps free for writers (the FreshTable's
	// next segment with its index): slices are evicted while the writers have less. 0 for a
	// Store in memory only (it never evicts) and a closed one.
	EvictionRoom int64
	Fixed        int64 // the fixed costs above, bytes: FreshTable data and index + caches + Reserve + EvictionRoom
}

// budgetStats returns BudgetStats of b for a Store that keeps room bytes free for writers
// (engine.Stats.EvictionRoom).
func budgetStats(b *memory.Budget, room int64) BudgetStats {
	m := b.Stats()
	fixed := m.ByPurpose[memory.PurposeFreshData] + m.ByPurpose[memory.PurposeFreshIndex] +
		m.ByPurpose[memory.PurposeBlockCache] + m.Reserve + room
	return BudgetStats{Used: m.Used, Limit: m.Limit, Reserve: m.Reserve, ByPurpose: m.ByPurpose, Pooled: m.Pooled,
		EvictionRoom: room, Fixed: fixed}
}

// StallStats count the writes that waited for background work, and the time they waited:
// for memory (backpressure: BackpressureFailures of them still failed with
// ErrMemoryBudget), for L0 (Options.L0StopWrites files or more), for transforms (more than
// two sealed segments queued) and for slice compactions (more than six runs per bucket on
// average). ChangelogWaits and ChangelogWaitNanos are the part of the memory waits whose
// write the changelog refused (its buffer full: Threshold or the budget), waiting for a
// persist.
type StallStats struct {
	BackpressureWaits, BackpressureNanos, BackpressureFailures int64
	ChangelogWaits, ChangelogWaitNanos                         int64
	L0, L0Nanos                                                int64
	Transform, TransformNanos                                  int64
	Compaction, CompactionNanos                                int64
}

// Waits returns the writes that waited, of every kind, and the time they waited.
func (s StallStats) Waits() (count, nanos int64) {
	return s.BackpressureWaits + s.L0 + s.Transform + s.Compaction,
		s.BackpressureNanos + s.L0Nanos + s.TransformNanos + s.CompactionNanos
}

// ClassCost is the cost of one class of background work since Open: the scheduler tasks
// that ran, the CPU time of their worker threads (each worker is locked to its OS thread and
// reads its thread CPU clock around every task; 0 on systems without one), their wall-clock
// running time, and the bytes they read and wrote (see each class in BackgroundStats).
type ClassCost struct {
	Jobs               int64
	CPUNanos, RunNanos int64
	BytesIn, BytesOut  int64
}

// BackgroundStats describe the background work: failures, and the cost of each class.
type BackgroundStats struct {
	// Errors counts background jobs that failed (not for memory, not cancelled); Retries
	// those whose failure may pass and which were scheduled again after a backoff; Retrying
	// the kinds of work waiting for (or running) their retry now; LastError the text of the
	// last failure ("" if none).
	Errors, Retries int64
	Retrying        int
	LastError       string

	// Transform: FreshTable segments into slices, and flushes to L0 (in: segment data
	// bytes; out: slice bytes built).
	Transform ClassCost
	// Compaction: slice compactions and relocations (in: input slice bytes).
	Compaction ClassCost
	// Eviction: cold slices to the LsmStore (in: slice bytes; out: L0 table bytes, flushes
	// included).
	Eviction ClassCost
	// LSMCompaction: LSM compactions (out: table bytes written).
	LSMCompaction ClassCost
	// TTLSweep: the TTL sweep's rewrites of slices and table files (in: slice bytes).
	TTLSweep ClassCost
	// Materialization: uploads of the tiers that let the changelog be truncated (out: bytes
	// stored in checkpoint storage).
	Materialization ClassCost
	// Checkpoint: checkpoint uploads and checkpoint GC (out: bytes stored, changelog
	// segments excluded — the ChangelogPersist class counts those).
	Checkpoint ClassCost
	// ChangelogPersist: background persists of the changelog (out: bytes stored).
	ChangelogPersist ClassCost
}

// CPUNanos returns the CPU time of every class together.
func (b BackgroundStats) CPUNanos() int64 {
	var n int64
	for _, c := range b.classes() {
		n += c.CPUNanos
	}
	return n
}

func (b *BackgroundStats) classes() [engine.NumBackgroundClasses]*ClassCost {
	return [...]*ClassCost{engine.BgTransform: &b.Transform, engine.BgCompaction: &b.Compaction,
		engine.BgEviction: &b.Eviction, engine.BgLSMCompaction: &b.LSMCompaction,
		engine.BgTTLSweep: &b.TTLSweep, engine.BgMaterialization: &b.Materialization,
		engine.BgCheckpoint: &b.Checkpoint, engine.BgChangelogPersist: &b.ChangelogPersist}
}

// TaskStats describe the cost of the task side: the goroutine that owns the Store and calls
// its states. CPUNanos is measured: the process's CPU time since Open minus every background
// class's (so it holds the caller's own code and the Go runtime's GC too: exact for a
// process that runs one Store's job). The parts are estimated by sampling: one API call in
// 64 (SampledOps of Ops) is timed with the monotonic clock, split into the engine's point
// reads, its write path, the changelog append and timer calls, and scaled by
// Ops/SampledOps; the time writers waited (Stalls) is taken out and reported exactly. The
// parts are wall time: where the task's thread waits for a core inside its calls (a busy
// machine), they add up to more than CPUNanos — compare them then as shares of OpNanos. A
// sampled call also carries its own clock reads (2–4 of 25–60 ns on a virtual machine), which
// over-estimates the parts of calls that take a few hundred nanoseconds.
// APINanos is the rest of the API calls' time: keys, codecs, TTL stamps, iteration.
type TaskStats struct {
	CPUNanos                        int64
	Ops, SampledOps                 int64
	OpNanos                         int64 // all API calls, waits excluded
	APINanos, ReadNanos, WriteNanos int64
	ChangelogNanos, TimerNanos      int64
	Waits, WaitNanos                int64 // writes that waited (Stalls.Waits)
	Changes                         int64 // state changes applied
}

// TTLStats describe TTL cleanup: what slice and LSM compactions and checkpoints removed
// because it had expired, and the TTL sweep (internal/engine doc.go, "TTL sweep"), whose
// Due*/ExpiredPendingBytes are an estimate at the clock now.
type TTLStats struct {
	CompactionEntries, CompactionBytes int64
	SnapshotEntries, SnapshotBytes     int64
	SweepTicks, SweepSeals, SweepJobs  int64
	SweepReadBytes                     int64
	SweepEntries, SweepBytes           int64
	SweepNanos                         int64
	SweepDueUnits                      int
	SweepDueBytes                      int64
	ExpiredPendingBytes                int64
}

// CheckpointsStats describe checkpoints: made durable and failed since Open, the one
// running (0 or 1), the memory it keeps from being reused (PinnedBytes, still counted in
// Budget.Used), and the garbage collections run and the objects they deleted.
type CheckpointsStats struct {
	Completed, Failures           int64
	Running                       int
	PinnedBytes                   int64
	GCRuns, GCFailures, GCDeleted int64
}

// ChangelogCost is the changelog's traffic since Open, all zero when it is off, as Flink's
// changelog metrics (Store.ChangelogStats has its state: generations, pending bytes); the
// task's time appending records is in TaskStats.ChangelogNanos, the persists' CPU in
// BackgroundStats.ChangelogPersist.
type ChangelogCost struct {
	// AppendedRecords and AppendedBytes count the change records logged and their encoded
	// bytes; PersistedRecords and PersistedBytes those stored in checkpoint storage (segment
	// bytes); TruncatedRecords and TruncatedBytes the persisted ones a completed
	// materialization made unneeded (their generations closed; the objects go by GC).
	AppendedRecords, AppendedBytes   int64
	PersistedRecords, PersistedBytes int64
	TruncatedRecords, TruncatedBytes int64
	// Materializations counts the durable materializations, MaterializationFailures the ones
	// that failed to start or to upload; LastMaterializationError is the last failure's
	// text, "" if none.
	Materializations, MaterializationFailures int64
	LastMaterializationError                  string
}

// WrittenStats are the bytes written since Open to each tier and to checkpoint storage,
// against Changed, the logical bytes of the state changes applied (keys, map user keys and
// values of every put, append, remove …; records replayed at restore excluded). Each
// field ÷ Changed is that tier's write amplification.
type WrittenStats struct {
	Changed int64
	// Slices is the bytes of slices built by transforms; LSM the table bytes written (L0
	// files and compactions).
	Slices, LSM int64
	// Changelog is the bytes of changelog persisted by the background; CheckpointStorage
	// every byte stored in checkpoint storage (persists, materializations, checkpoints).
	Changelog, CheckpointStorage int64
}

// statsOf maps the engine's flat statistics onto Stats: the one place that knows both.
func statsOf(e *engine.Stats) Stats {
	st := Stats{
		States: e.States, OpenKeyScans: e.OpenScans,
		Fresh: FreshStats{Records: e.Records, Segments: e.Segments, SealedSegments: e.SealedSegments,
			SegmentBytes: e.SegmentBytes, DataBytes: e.DataBytes, IndexBytes: e.IndexBytes},
		Slices: SliceStats{Count: e.Slices, Runs: e.SliceRuns, Bytes: e.SliceBytes, MaxChain: e.MaxChain,
			Transforms: e.Transforms, TransformedBytes: e.TransformedBytes, TransformFails: e.TransformFails,
			Compactions: e.Compactions, Evictions: e.Evictions, EvictedBytes: e.EvictedBytes,
			Relocations: e.Relocations},
		LSM: LSMStats{Files: e.LSMFiles, Bytes: e.LSMBytes, LevelBytes: e.LSMLevelBytes, L0Files: e.L0Files,
			Compactions: e.LSMCompactions, Flushes: e.Flushes, IngestedBytes: e.LSMIngestedBytes,
			WrittenBytes: e.LSMWrittenBytes, WriteAmplification: e.WriteAmplification,
			PersistFiles: e.PersistFiles, PersistNanos: e.PersistNanos, OpenTables: e.OpenTables,
			TableCacheHits: e.TableCacheHits, TableCacheMisses: e.TableCacheMisses, OutOfFiles: e.OutOfFiles},
		Caches: CacheStats{BlockBytes: e.BlockCacheBytes, BlockHits: e.BlockCacheHits, BlockMisses: e.BlockCacheMisses,
			RowBytes: e.RowCacheBytes, RowHits: e.RowCacheHits, RowMisses: e.RowCacheMisses, RowTooLarge: e.RowCacheTooLarge,
			RowSets: e.RowCacheSets, RowEntries: e.RowCacheEntries},
		Stalls: StallStats{BackpressureWaits: e.BackpressureWaits, BackpressureNanos: e.BackpressureNanos,
			BackpressureFailures: e.BackpressureFailures, L0: e.L0Stalls, L0Nanos: e.L0StallNanos,
			ChangelogWaits: e.ChangelogWaits, ChangelogWaitNanos: e.ChangelogWaitNanos,
			Transform: e.TransformStalls, TransformNanos: e.TransformStallNanos,
			Compaction: e.CompactionStalls, CompactionNanos: e.CompactionStallNanos},
		Background: BackgroundStats{Errors: e.BackgroundErrors, Retries: e.BackgroundRetries,
			Retrying: e.BackgroundRetrying, LastError: e.LastBackgroundError},
		TTL: TTLStats{CompactionEntries: e.TTLCompactionEntries, CompactionBytes: e.TTLCompactionBytes,
			SnapshotEntries: e.TTLSnapshotEntries, SnapshotBytes: e.TTLSnapshotBytes,
			SweepTicks: e.TTLSweepTicks, SweepSeals: e.TTLSweepSeals, SweepJobs: e.TTLSweepJobs,
			SweepReadBytes: e.TTLSweepReadBytes, SweepEntries: e.TTLSweepEntries, SweepBytes: e.TTLSweepBytes,
			SweepNanos: e.TTLSweepNanos, SweepDueUnits: e.TTLSweepDueUnits, SweepDueBytes: e.TTLSweepDueBytes,
			ExpiredPendingBytes: e.TTLExpiredPendingBytes},
		Checkpoints: CheckpointsStats{Completed: e.Checkpoints, Failures: e.CheckpointFailures,
			Running: e.CheckpointsRunning, PinnedBytes: e.PinnedBytes, GCRuns: e.CheckpointGCRuns,
			GCFailures: e.CheckpointGCFailures, GCDeleted: e.CheckpointGCDeleted},
	}
	cls := st.Background.classes()
	for c, bc := range e.Background {
		*cls[c] = ClassCost(bc)
	}
	b := &st.Background
	st.Changelog = ChangelogCost{AppendedRecords: e.ChangelogAppendedRecords, AppendedBytes: e.ChangelogAppendedBytes,
		PersistedRecords: e.ChangelogPersistedRecords, PersistedBytes: e.ChangelogPersistedBytes,
		TruncatedRecords: e.ChangelogTruncatedRecords, TruncatedBytes: e.ChangelogTruncatedBytes,
		Materializations: e.Materializations, MaterializationFailures: e.MaterializationFailures,
		LastMaterializationError: e.LastMaterializationError}
	st.Written = WrittenStats{Changed: e.Task.AppliedBytes, Slices: b.Transform.BytesOut, LSM: e.LSMWrittenBytes,
		Changelog:         b.ChangelogPersist.BytesOut,
		CheckpointStorage: b.ChangelogPersist.BytesOut + b.Materialization.BytesOut + b.Checkpoint.BytesOut}
	st.Task = TaskStats{CPUNanos: e.Task.CPUNanos, Changes: e.Task.Applies}
	st.Task.Waits, st.Task.WaitNanos = st.Stalls.Waits()
	return st
}
