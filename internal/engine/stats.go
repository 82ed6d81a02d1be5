package engine

import "github.com/strata-db/strata/lsm"

// Stats describes the memory, contents and background work of an engine (mapped onto strata.Stats by the root: stats.go). Sizes are bytes.
// Go heap memory (registrations, scratch buffers) is not included.
type Stats struct {
	States         int   // registered states (filled by the root package)
	OpenScans      int   // key scans open now (NewScan, not yet closed; scan.go)
	Records        int64 // records in the FreshTable (values, list batches, map entries, tombstones)
	Segments       int   // FreshTable data segments held (active and sealed)
	SealedSegments int   // sealed segments waiting for (or in) transform
	SegmentBytes   int64 // bytes of data segments mapped (Segments × SegmentSize)
	DataBytes      int64 // bytes used inside the data segments
	IndexBytes     int64 // bytes mapped for hash indices

	Slices     int   // slices in the SliceTable
	SliceRuns  int   // runs over all buckets' chains
	SliceBytes int64 // memory held by the slices
	MaxChain   int   // longest chain of a bucket, in runs

	Transforms       int64 // sealed segments transformed into slices and dropped
	TransformedBytes int64 // data bytes of those segments
	TransformFails   int64 // transforms that failed (for memory they are retried)
	Compactions      int64 // memory compactions installed
	Evictions        int64 // evictions to the lower tier installed (none without a lower tier)
	Relocations      int64 // relocations installed: allocator segments emptied into fuller ones
	EvictedBytes     int64 // slice bytes evicted

	// BackpressureWaits counts writes refused for memory that waited for background work;
	// BackpressureNanos is the time they waited in total, BackpressureFailures how many of
	// them still failed with ErrMemoryBudget.
	BackpressureWaits    int64
	BackpressureNanos    int64
	BackpressureFailures int64
	// ChangelogWaits and ChangelogWaitNanos are the part of BackpressureWaits and
	// BackpressureNanos whose write the changelog's Log.Reserve refused (its buffer full).
	ChangelogWaits, ChangelogWaitNanos int64

	BudgetUsed    int64 // bytes reserved in the budget (shared budgets: all stores together)
	BudgetLimit   int64 // the budget's limit
	BudgetReserve int64 // bytes of the budget only background work may take (all stores)
	// EvictionRoom is Options.EvictionRoom: slices are evicted while the writers' room is
	// below it (0: no such trigger; doc.go "Fixed costs").
	EvictionRoom int64

	// The LsmStore (all zero for a Store in memory only). Evictions above count its L0
	// installs during operation; Close adds PersistFiles more.
	LSMFiles int   // table files in all levels
	LSMBytes int64 // bytes of those files
	// LSMLevelBytes are the bytes of each level, L0 first (a fixed array: Stats allocates
	// nothing); the levels above the deepest non-empty one over it is the LsmStore's space
	// amplification (lsm.Options.MaxSpaceAmplification bounds it).
	LSMLevelBytes  [lsm.MaxLevels]int64
	L0Files        int   // files in L0
	LSMCompactions int64 // LSM compactions installed since Open
	// Flushes counts sealed segments written straight to the LsmStore as L0 files (a budget too
	// small for a transform's slices beside the FreshTable; counted in Transforms too).
	Flushes int64
	// LSMIngestedBytes is the bytes of keys and values evicted into the LsmStore since Open;
	// LSMWrittenBytes the table bytes written for them (L0 files and compaction outputs);
	// WriteAmplification their ratio (lsm.Metrics: bytes written per byte of state).
	LSMIngestedBytes   int64
	LSMWrittenBytes    int64
	WriteAmplification float64
	BlockCacheBytes    int64 // memory of the block cache (inside the budget)
	BlockCacheHits     int64 // LSM block reads served by the cache
	BlockCacheMisses   int64 // LSM block reads that went to a file
	RowCacheBytes      int64 // memory of the row cache (inside the budget; Options.RowCacheSize)
	RowCacheHits       int64 // value reads of the lower tier served by the row cache
	RowCacheMisses     int64 // value reads that went to the lower tier (LsmStore)
	// RowCacheSets and RowCacheEntries are the row cache's sets (rowSet bytes each; 0 without a
	// row cache, or before it is mapped) and the entries it holds now.
	RowCacheSets, RowCacheEntries int
	// RowCacheTooLarge counts values read from the lower tier that the row cache did not take
	// because key and value together exceed engine.RowCacheMaxData (508) bytes.
	RowCacheTooLarge int64
	// L0Stalls counts writes that waited because L0 had Options.L0StopWrites files or more;
	// L0StallNanos is the time they waited in total.
	L0Stalls     int64
	L0StallNanos int64
	// TransformStalls counts writes that waited because more than two sealed segments were
	// queued for their transform (writers are paced at the rate the one transform at a time
	// sustains); TransformStallNanos is the time they waited in total.
	TransformStalls     int64
	TransformStallNanos int64
	// CompactionStalls counts writes that waited because the SliceTable held more than six
	// runs per bucket on average (writers are paced at the rate compactions merge them);
	// CompactionStallNanos is the time they waited in total.
	CompactionStalls     int64
	CompactionStallNanos int64
	PersistFiles         int64 // L0 files Close wrote (tests: see flush)
	PersistNanos         int64 // time Close spent moving the tiers into the LsmStore

	// Background failures (internal/engine doc.go, "Failures"). BackgroundErrors counts the
	// background jobs — transforms, flushes, slice compactions, relocations, evictions, LSM
	// compactions — that failed since Open, not counting budget shortages and cancellations
	// (retried as part of normal operation); BackgroundRetries counts those whose failure may
	// pass (EMFILE, EIO, ENOSPC, …) and which were therefore scheduled again after a backoff
	// of 10 ms doubling to 1 s (1 s for a full disk). The difference is the failure, if any,
	// that stopped the Store (damage or a broken invariant; writes report it).
	// BackgroundRetrying is the number of kinds of background work whose last attempt failed
	// and which wait for (or run) their retry now. LastBackgroundError is the text of the last
	// failure, "" if none.
	BackgroundErrors    int64
	BackgroundRetries   int64
	BackgroundRetrying  int
	LastBackgroundError string

	// The LsmStore's table cache (lsm doc.go, "Table cache"; Options.MaxOpenFiles): table
	// files open now, and table reads that found their file open (hits) or opened it
	// (misses, table opens at install and at Open included). OutOfFiles counts the LsmStore's
	// file opens and creates refused for want of descriptors (EMFILE, ENFILE), after each of
	// which the cache closed its idle files and the open was tried once more.
	OpenTables       int
	TableCacheHits   int64
	TableCacheMisses int64
	OutOfFiles       int64

	// TTL cleanup (doc.go, "TTL"): values, map entries and list elements of states with a
	// TTL that slice and LSM compactions (TTLCompactionEntries, with their value bytes
	// TTLCompactionBytes) and checkpoints' memory tables (TTLSnapshotEntries,
	// TTLSnapshotBytes) removed since Open because they had expired — dropped, or replaced
	// by a tombstone that keeps only the key. Reads and incremental cleanup remove expired
	// data by writes, which are not counted here.
	TTLCompactionEntries int64
	TTLCompactionBytes   int64
	TTLSnapshotEntries   int64
	TTLSnapshotBytes     int64

	// The TTL sweep (doc.go, "TTL sweep"). TTLSweepTicks counts its ticks (a look at every
	// tier, at most once per period), TTLSweepSeals the FreshTable segments it sealed,
	// TTLSweepJobs its compactions installed (slice runs and LSM files rewritten), which read
	// TTLSweepReadBytes (slice memory, table file bytes) and removed TTLSweepEntries values,
	// map entries and list elements (TTLSweepBytes of values), not counted in
	// TTLCompaction*; TTLSweepNanos is the time its jobs ran on background workers (they
	// compute in memory and write files; no wait for locks), the sweep's CPU cost.
	// At the clock now: TTLSweepDueUnits slices and table files hold expired data
	// (TTLSweepDueBytes their memory and file bytes: what the sweep rewrites, slices at the
	// next tick, table files three periods after their earliest expiry: doc.go), and
	// TTLExpiredPendingBytes estimates the expired TTL bytes in them — an estimate: each
	// unit knows only the earliest and latest expiry of its data and the bytes, and is
	// taken to expire evenly in between (base.Expiry.Estimate); a table file found at Open
	// counts whole once its bound passed. Computed by Stats in O(slices + files).
	TTLSweepTicks          int64
	TTLSweepSeals          int64
	TTLSweepJobs           int64
	TTLSweepReadBytes      int64
	TTLSweepEntries        int64
	TTLSweepBytes          int64
	TTLSweepNanos          int64
	TTLSweepDueUnits       int
	TTLSweepDueBytes       int64
	TTLExpiredPendingBytes int64

	// Checkpoints (doc.go, "Checkpoints"): made durable and failed since Open; the one
	// running (0 or 1); PinnedBytes is the memory the running checkpoint keeps from being
	// reused (slices and sealed segments freed since its cut, still counted in BudgetUsed).
	// CheckpointGCRuns, CheckpointGCFailures and CheckpointGCDeleted count the garbage
	// collections run after completions and aborts and the objects they deleted.
	Checkpoints          int64
	CheckpointFailures   int64
	CheckpointsRunning   int
	PinnedBytes          int64
	CheckpointGCRuns     int64
	CheckpointGCFailures int64
	CheckpointGCDeleted  int64

	// The changelog (doc.go, "Changelog"; all zero when it is off), as Flink's changelog
	// metrics. ChangelogAppendedRecords/Bytes count the change records logged since Open and
	// their encoded bytes; ChangelogPersistedRecords/Bytes those stored in checkpoint storage
	// (segment bytes); ChangelogTruncatedRecords/Bytes the persisted ones a completed
	// materialization made unneeded (their generations closed; the objects go by GC).
	// Materializations counts the durable materializations, MaterializationFailures the ones
	// that failed (to start or to upload); LastMaterializationError is the last failure's
	// text, "" if none.
	ChangelogAppendedRecords  int64
	ChangelogAppendedBytes    int64
	ChangelogPersistedRecords int64
	ChangelogPersistedBytes   int64
	ChangelogTruncatedRecords int64
	ChangelogTruncatedBytes   int64
	Materializations          int64
	MaterializationFailures   int64
	LastMaterializationError  string
	// Cost accounting (cost.go; doc.go, "Cost accounting"): the jobs, CPU and bytes of each
	// background class, indexed by BackgroundClass, and the task side's CPU by part.
	Background [NumBackgroundClasses]ClassCost
	Task       TaskCost
}

// Stats returns a snapshot of the engine's statistics (States is the caller's to fill).
// O(buckets + segments). Owner goroutine only.
func (t *Engine) Stats() Stats {
	st := Stats{
		OpenScans:     len(t.scans),
		BudgetUsed:    t.budget.Used(),
		BudgetLimit:   t.budget.Limit(),
		BudgetReserve: t.budget.Reserve(),
		EvictionRoom:  t.evictRoom,
	}
	ts := t.f.Stats()
	st.Records = int64(ts.Records)
	st.Segments = int(ts.Segments)
	st.SealedSegments = int(ts.Sealed)
	st.SegmentBytes = int64(ts.Segments) * int64(t.segSize)
	st.DataBytes = int64(ts.DataBytes)
	st.IndexBytes = int64(ts.IndexBytes)
	ss := t.sl.Stats()
	st.Slices, st.SliceRuns, st.SliceBytes, st.MaxChain = ss.Slices, ss.Runs, ss.MemBytes, ss.MaxChain
	st.Transforms, st.TransformedBytes, st.TransformFails = t.transforms, t.transformedBytes, t.transformFails
	st.Compactions, st.Evictions, st.EvictedBytes = ss.Compactions, ss.Evictions, ss.EvictedBytes
	st.BackpressureWaits, st.BackpressureNanos, st.BackpressureFailures = t.bpWaits, t.bpNanos, t.bpFailures
	st.ChangelogWaits, st.ChangelogWaitNanos = t.clWaits, t.clNanos
	st.L0Stalls, st.L0StallNanos, st.Flushes, st.Relocations = t.l0Stalls, t.l0StallNanos, t.flushes, t.relocations
	st.TransformStalls, st.TransformStallNanos = t.sealedStalls, t.sealedStallNanos
	st.CompactionStalls, st.CompactionStallNanos = t.runStalls, t.runStallNanos
	st.PersistFiles, st.PersistNanos = t.persistFiles, t.persistNanos
	st.BackgroundErrors, st.BackgroundRetries, st.BackgroundRetrying = t.bgErrors, t.bgRetries, t.retrying
	if t.lastBgErr != nil {
		st.LastBackgroundError = t.lastBgErr.Error()
	}
	t.costStats(&st)
	if t.db != nil {
		m := t.db.Metrics()
		for i, l := range m.Levels {
			st.LSMFiles += l.Files
			st.LSMBytes += l.Bytes
			st.LSMLevelBytes[i] = l.Bytes
		}
		st.L0Files = m.Levels[0].Files
		st.LSMCompactions = m.Compactions
		st.LSMIngestedBytes = m.BytesIngested
		st.LSMWrittenBytes = m.BytesFlushed + m.BytesCompacted
		st.WriteAmplification = m.WriteAmplification
		st.OpenTables, st.TableCacheHits, st.TableCacheMisses = m.OpenTables, m.TableCacheHits, m.TableCacheMisses
		st.OutOfFiles = m.OutOfFiles
		st.Background[BgEviction].BytesOut += m.BytesFlushed // L0 files: evictions and flushes
		st.Background[BgLSMCompaction].BytesOut += m.BytesCompacted
	}
	if lt, ok := t.low.(*lsmTier); ok && lt.cache != nil {
		cs := lt.cache.Stats()
		st.BlockCacheBytes, st.BlockCacheHits, st.BlockCacheMisses = cs.Bytes, cs.Hits, cs.Misses
	}
	if rc := t.rc; rc != nil {
		st.RowCacheBytes, st.RowCacheHits, st.RowCacheMisses = int64(len(rc.mem)), t.rcHits, t.rcMisses
		st.RowCacheTooLarge = rc.tooLarge
		st.RowCacheSets, st.RowCacheEntries = int(rc.sets), rc.n
	}
	st.Checkpoints, st.CheckpointFailures, st.CheckpointsRunning = t.ck.checkpoints, t.ck.failures, len(t.ck.running)
	st.PinnedBytes = ts.PinnedBytes + ss.PinnedBytes
	st.CheckpointGCRuns, st.CheckpointGCFailures, st.CheckpointGCDeleted = t.ck.gcRuns, t.ck.gcFails, t.ck.gcDel
	st.TTLCompactionEntries, st.TTLCompactionBytes = t.ttl.compaction.Entries.Load(), t.ttl.compaction.Bytes.Load()
	st.TTLSnapshotEntries, st.TTLSnapshotBytes = t.ttl.snapshot.Entries.Load(), t.ttl.snapshot.Bytes.Load()
	t.sweepStats(&st)
	t.changelogStats(&st)
	return st
}
