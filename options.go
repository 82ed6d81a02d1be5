package strata

import (
	"fmt"
	"time"

	"github.com/strata-db/strata/checkpoint"

	"github.com/strata-db/strata/internal/engine"
)

// Defaults applied by Open to zero Options fields.
const (
	// DefaultMemoryBudget is the memory budget of a Store with its own budget: 1 GiB.
	DefaultMemoryBudget = 1 << 30
	// DefaultSegmentSize is the largest default size of a FreshTable data segment: 64 MiB,
	// from a 2 GiB budget. A smaller budget gets smaller segments by default
	// (Options.SegmentSize: 1/32 of the budget's limit, 2 MiB at least; 32 MiB with the
	// default budget).
	DefaultSegmentSize = 64 << 20
	// DefaultBackpressureTimeout is how long a write refused for memory waits at most.
	DefaultBackpressureTimeout = 10 * time.Second
	// DefaultBlockCacheDivisor: the block cache takes 1/32 of the memory budget by default, and
	// the row cache 3/32 (DefaultRowCacheShare): the caches of the LsmStore share 1/8 of the
	// budget, three quarters of it for rows, which serve a skewed point-read load about a
	// hundred times better per byte than 16 KiB blocks (bench: LargerThanMemory, Zipf 0.99).
	DefaultBlockCacheDivisor = 32
	// DefaultRowCacheShare: the row cache takes DefaultRowCacheShare/DefaultBlockCacheDivisor
	// (3/32) of the memory budget by default.
	DefaultRowCacheShare = 3
	// DefaultL0StopWrites is the number of L0 files of the LsmStore at which writers wait for
	// an L0 compaction (three times the LSM's L0 compaction trigger of 4).
	DefaultL0StopWrites = 12
)

// Options configure a Store. The zero value is valid: every zero field takes its default.
// Options are read once by Open and not retained by reference (except SharedBudget).
type Options struct {
	// MaxParallelism is the number of key groups, Flink's max parallelism: 1..32768
	// (UpperBoundMaxParallelism). Default 128 (DefaultMaxParallelism). It must be the same
	// for every Store of a job so that keys land in the same key groups everywhere.
	MaxParallelism int

	// KeyGroups is the range of key groups this Store owns, usually
	// ComputeKeyGroupRangeForOperatorIndex(MaxParallelism, parallelism, subtaskIndex).
	// nil means that range for Parallelism and SubtaskIndex — all key groups
	// [0, MaxParallelism-1] when Parallelism is 0 or 1. Both ends must lie in
	// [0, MaxParallelism-1] with Start <= End. A pointer, because KeyGroupRange{0, 0} (only
	// key group 0) is a valid range and cannot double as "unset".
	KeyGroups *KeyGroupRange

	// SubtaskIndex and Parallelism are the Store's operator subtask and the number of
	// subtasks of its operator (Flink's RuntimeContext getIndexOfThisSubtask and
	// getNumberOfParallelSubtasks): 0 <= SubtaskIndex < Parallelism <= MaxParallelism.
	// Defaults 0 and 1 (a job of one subtask). They place the Store's operator state: its
	// checkpoints record them, and Restore gives the Store its share of the old subtasks'
	// even-split lists, the union of their union lists and one copy of their broadcast
	// state by them (operator.go). Keyed state goes by KeyGroups alone. A Store reopened with
	// Open must keep them (ErrIncompatibleStore), as its key groups; rescaling is a Restore.
	SubtaskIndex int
	Parallelism  int

	// MemoryBudget is the hard limit, in bytes, on the memory the Store maps outside the Go
	// heap. Default 1 GiB (DefaultMemoryBudget). Must be at least MinMemoryBudget(SegmentSize)
	// (a segment with its hash index), plus BlockCacheSize and RowCacheSize when they are set;
	// the default cache sizes shrink to fit. A Store in memory only needs its whole state to fit
	// besides; a Store with a directory moves the rest to disk.
	// Must be 0 when SharedBudget is set.
	//
	// Inside the budget: the FreshTable's segments and hash indices, the SliceTable's slices
	// (and the reserve that lets one transform build its slices), the LsmStore's block cache
	// and the row cache, the timers (about 75 to 85 bytes per timer with 8-byte keys and
	// namespaces, at least a page per key group with timers: timers.go).
	// When it is full, writers wait for background work (backpressure) and then fail with
	// ErrMemoryBudget; the budget is never exceeded.
	//
	// Outside it, bounded whatever the shape of the state (one huge list or map, millions of
	// namespaces): on the Go heap, the LsmStore's table indexes and bloom filters (about 0.1%
	// of the data on disk) and the buffers of its reads and compactions (a block, at most one
	// list piece of 1 MiB per read); one list piece (up to 1 MiB) per open ListIterator of a
	// long list in the LsmStore, which streams piece by piece; one chunk of about 1024 entries
	// per open map iteration reaching the LsmStore; a few hundred bytes per key group per
	// timer service (its queues' bookkeeping); mapped outside the heap and reused, the
	// sort buffer of the one transform or flush in flight (about 80 bytes per entry of a
	// segment, records and scratch); and the Go runtime itself. Reads
	// of state that is all in memory allocate nothing. The process's peak resident memory
	// (VmHWM) stays within MemoryBudget + 96 MiB with 16 MiB segments: TestMemoryShapes (one
	// 1 GiB list under 128 MiB, a 5 M-entry map and 2 M namespaces under 64 MiB) and
	// TestBoundedMemory (state 10× a 64 MiB budget) assert it; part of that allowance is heap
	// the garbage collector has not returned yet (GOGC). Larger segments need a larger
	// allowance (the sort buffer grows with the segment).
	MemoryBudget int64

	// SharedBudget, when not nil, is a budget created with NewBudget and shared with other
	// stores of the process (or slot); MemoryBudget is then ignored and must be 0. The Store
	// does not release the shared budget on Close.
	SharedBudget *Budget

	// SegmentSize is the size of a FreshTable data segment in bytes: 2, 4, 8, 16, 32 or 64 MiB
	// (2<<20, 4<<20, …, 64<<20). 0 means the default, chosen from the budget's limit
	// (MemoryBudget, or SharedBudget's limit): the largest of the six sizes that is at most
	// 1/32 of it, 2 MiB at least — 64 MiB (DefaultSegmentSize) from 2 GiB, 32 MiB from 1 GiB
	// (the default budget), 16 MiB from 512 MiB, 8 MiB from 256 MiB, 4 MiB from 128 MiB,
	// 2 MiB below. Segments cost the budget about 3.5 times their size besides the state (the
	// active one with its index, 9/8 to 5/4; the room kept for the next, 5/4; the reserve for
	// a transform's output, one segment while a transform's slices fit in one:
	// Stats.Budget.Fixed), so that at 1/32 of the limit these fixed costs stay within an
	// eighth of a budget of 64 MiB or more (internal/engine/doc.go, "Fixed costs"); larger
	// segments seal and transform less often. A value or list batch may take a quarter of a
	// segment (ErrValueTooLarge): set SegmentSize for values above 512 KiB under a budget
	// below 128 MiB (1 MiB below 256 MiB).
	SegmentSize int

	// BackgroundWorkers is the number of goroutines the Store runs background work on
	// (transforms of sealed segments into slices, compactions, evictions, uploads). 0 means
	// the default, max(GOMAXPROCS/2, 1) (scheduler.DefaultWorkers). Must not be negative. A
	// Store with checkpoint storage (Checkpoint.Storage) has one more goroutine that runs only
	// uploads — checkpoint and materialization uploads, checkpoint GC — so that a checkpoint
	// does not wait behind the compactions queued before it (they come first by priority):
	// its duration stays that of its own upload whatever the state's size; with the changelog
	// on (Checkpoint.Changelog), one more that runs only changelog persists, so that a write
	// waiting for a persist does not wait behind an upload.
	BackgroundWorkers int

	// BackpressureTimeout bounds how long a write refused for memory waits for background work
	// to free some before it fails with ErrMemoryBudget. Default 10 s
	// (DefaultBackpressureTimeout). Must not be negative.
	BackpressureTimeout time.Duration

	// BlockCacheSize is the size in bytes of the LsmStore's block cache, mapped through the
	// memory budget (memory.PurposeBlockCache) at Open, or, while the LsmStore is empty, once
	// it first holds data, so it is part of MemoryBudget, not added to it. 0 means the default, 1/32 of the budget's limit (DefaultBlockCacheDivisor; with a
	// SharedBudget, 1/32 of the shared limit per Store), less when the budget has too little room
	// left for a segment beside it (see MemoryBudget); negative means no cache (every LSM
	// read goes to its file). Ignored by a Store in memory only (dir ""). At least one block
	// (16 KiB) when positive.
	BlockCacheSize int64

	// RowCacheSize is the size in bytes of the row cache: values of value, reducing and
	// aggregating state that point reads found in the LsmStore, kept in sets of 1 KiB whose
	// entries take runs of 32-byte units (composite key and value up to 508 bytes together,
	// engine.RowCacheMaxData; longer ones are not cached and are counted in
	// Stats.Caches.RowTooLarge), so that the hot keys
	// of a skewed read load over state larger than memory are served from memory, as
	// RocksDB's row cache does. Mapped through the memory budget with the block cache (and
	// counted with it, memory.PurposeBlockCache), so it is part of MemoryBudget. A write to a cached
	// key refreshes its copy (write-through), a clear drops it; lists and maps are not cached. 0 means the default, 3/32 of
	// the budget's limit (DefaultRowCacheShare); negative means none. Ignored by a Store in
	// memory only (dir ""). At least 1024 bytes (one set) when positive.
	RowCacheSize int64

	// EvictionWatermark is the memory in bytes held by the SliceTable's slices above which the
	// Store evicts its coldest slices to the LsmStore (L0 files), in batches, in the
	// background. Whatever it is, the Store also evicts while the budget has less room left
	// for writers than the FreshTable's next segment needs (MinMemoryBudget(SegmentSize)), and
	// writers that wait for memory start an eviction. 0 means the default: no watermark, only
	// that room, so that state that fits the budget stays in memory (nothing is evicted while
	// the next segment fits) and eviction starts just before a writer would wait. Ignored by a
	// Store in memory only (dir ""), which never evicts. Must not be negative.
	EvictionWatermark int64

	// L0StopWrites is the number of L0 files of the LsmStore at which writes wait for an L0
	// compaction to finish (at most BackpressureTimeout; counted in Stats.Stalls.L0), so that
	// evictions cannot outrun compaction and leave reads with many overlapping files.
	// Default 12 (DefaultL0StopWrites). Must not be negative.
	L0StopWrites int

	// MaxOpenFiles is the number of LsmStore table files the Store keeps open at most (file
	// descriptors): a table's index and filter stay in memory, and its file is closed, least
	// recently used first, while more are open, and opened again by the next read that misses
	// the block cache — RocksDB's max_open_files, Pebble's table cache. Reads in flight keep
	// their files open, so the count may briefly pass it. 0 means the default: half the
	// process's soft RLIMIT_NOFILE at Open, between 16 and 1000 (lsm.DefaultMaxOpenFiles). A
	// table open refused for want of descriptors (EMFILE) first closes the idle ones and
	// tries again; background work that still fails for it is retried (see Store). Counted in
	// Stats.LSM (OpenTables, TableCacheHits, TableCacheMisses, OutOfFiles). Ignored by a Store in memory only.
	// Must not be negative.
	MaxOpenFiles int

	// Clock is the processing time that TTL states (TTLConfig) stamp values with and judge
	// expiry by: milliseconds since the epoch, as Flink's TtlTimeProvider. nil means the
	// default, a coarse clock: the wall clock read once per process, advanced by the monotonic
	// clock (it never goes back) and published every millisecond by one process-wide ticker
	// goroutine (scheduler.AcquireClock) that runs while some open Store has a TTL state. A
	// read costs one atomic load (a clock read per TTL operation would cost as much as the
	// operation) and lags the wall clock by up to a millisecond — tens of milliseconds when
	// every P is busy. Set Clock to func() int64 { return time.Now().UnixMilli() } for the
	// exact wall clock at ~25–60 ns per TTL operation. Tests drive it. It is called on the Store's goroutine and on its background workers
	// (compactions and checkpoints clean up expired data by it), so it must be safe for
	// concurrent use, and it should never go back (TTLConfig). Read per TTL operation only;
	// besides, a Clock that is set is read once at Open and by each checkpoint garbage
	// collection (the age of unreachable objects: CheckpointOptions.Grace), so a Store without
	// TTL states calls it only then.
	Clock func() int64

	// HotTierSize bounds, in bytes, the hot tier: a write-back cache on the Go heap in front of
	// the tiers, as Flink's heap state backend in front of its snapshots (root doc.go, "Hot tier";
	// hot.go). Point operations — value, reducing and aggregating Get, Put/Add, Clear and
	// MergeNamespaces; list Add, AddAll, Update, Clear and Get (lists up to 64 KiB); map Get,
	// Contains, Put and Remove — read and write the state's entries there, and the tiers (and the
	// changelog) see one net change per dirty entry at the next cut (a checkpoint, savepoint,
	// materialization, Close) or call that reads across keys (iterators, scans, batches), instead
	// of one per call. The tier is charged to the memory budget (memory.PurposeHotTier) and
	// counted in Stats.HotTier; at the bound it drops its clean entries when they hold a quarter
	// of its bytes or more, else it writes everything back and drops all its entries. List
	// and map states with a TTL, and value-like ones with TTLOnReadAndWrite,
	// TTLReturnExpiredIfNotCleanedUp or incremental cleanup, bypass it (hot.go, H6). A call that
	// reads across keys writes the tier back first, which ends the validity of values and list
	// iterators read before it (Bytes codec) as a write does. A point operation never fails for
	// the tier; a call that reads across keys fails while a write-back fails (a full disk's retry
	// window, a checkpoint storage outage that filled the changelog buffer), where without the
	// tier only writes would. A state whose table's lookups find fewer entries than it makes
	// (keys written or read once between cuts, or read across keys after each write) has the
	// table turned off for the Store's life (hot.go, H9; HotTierStats.TablesOff). 0 means
	// off (the default in this version); it must be at most a quarter of the budget's limit
	// (ErrInvalidOptions) and not negative. A typical setting is MemoryBudget / 8.
	HotTierSize int64

	// Checkpoint configures checkpoints: where they go (Storage), the lineage's name (Owner),
	// retention (Retain) and the restore mode (see CheckpointOptions). The zero value has no
	// storage: the Store cannot checkpoint, but works otherwise.
	Checkpoint CheckpointOptions

	// fs is the file system the Store's files go through: engine.DefaultFS() unless a test sets
	// MemFS or FaultFS (package-internal).
	fs engine.FS
	// adjust, when not nil, changes the engine's options last, per Store (engineOptions: Open
	// and Restore): package-internal, for tests that set the engine's knobs (a lower tier,
	// eviction settings, the bulk replay's and the lazy tail's; engine.Options, "Test knobs")
	// without a process-wide switch. Nil for every user.
	adjust func(*engine.Options)
}

// Validate reports whether the options are valid, returning an error that wraps
// ErrInvalidOptions and names the bad field. Zero fields are valid (they take defaults).
func (o Options) Validate() error {
	d := o.withDefaults() // defaults have one home; zero fields are checked as their defaults
	maxP := d.MaxParallelism
	if c := o.Checkpoint; c.Owner != "" {
		if err := checkpoint.ValidateOwner(c.Owner); err != nil {
			return fmt.Errorf("%w: Options.Checkpoint.Owner = %q: %w", ErrInvalidOptions, c.Owner, err)
		}
	}
	if c := o.Checkpoint; c.Retain < 0 || (c.Grace < 0 && c.Grace != checkpoint.NoGrace) || c.RestoreMode > Claim {
		return fmt.Errorf("%w: Options.Checkpoint: Retain %d, Grace %v, RestoreMode %d: Retain and Grace must not be negative (Grace may be checkpoint.NoGrace), RestoreMode NoClaim or Claim",
			ErrInvalidOptions, c.Retain, c.Grace, c.RestoreMode)
	}
	if c := o.Checkpoint.Changelog; c != nil {
		if err := c.validate(); err != nil {
			return err
		}
	}
	if maxP < 1 || maxP > UpperBoundMaxParallelism {
		return fmt.Errorf("%w: Options.MaxParallelism = %d: must be in [1, %d] (0 for the default %d)",
			ErrInvalidOptions, o.MaxParallelism, UpperBoundMaxParallelism, DefaultMaxParallelism)
	}
	if p := d.Parallelism; p < 1 || p > maxP || o.SubtaskIndex < 0 || o.SubtaskIndex >= p {
		return fmt.Errorf("%w: Options.Parallelism = %d, Options.SubtaskIndex = %d: must satisfy 0 <= SubtaskIndex < Parallelism <= MaxParallelism (%d) (Parallelism 0 for the default 1)",
			ErrInvalidOptions, o.Parallelism, o.SubtaskIndex, maxP)
	}
	if r := o.KeyGroups; r != nil {
		if r.Start < 0 || r.End >= maxP || r.Start > r.End {
			return fmt.Errorf("%w: Options.KeyGroups = %v: must satisfy 0 <= Start <= End < MaxParallelism (%d)",
				ErrInvalidOptions, *r, maxP)
		}
	}
	if lim := d.budgetLimit(); o.HotTierSize < 0 || o.HotTierSize > lim/4 {
		return fmt.Errorf("%w: Options.HotTierSize = %d: must be in [0, %d] (a quarter of the memory budget)",
			ErrInvalidOptions, o.HotTierSize, lim/4)
	}
	if o.BackgroundWorkers < 0 {
		return fmt.Errorf("%w: Options.BackgroundWorkers = %d: must not be negative (0 for the default)",
			ErrInvalidOptions, o.BackgroundWorkers)
	}
	if o.BackpressureTimeout < 0 {
		return fmt.Errorf("%w: Options.BackpressureTimeout = %v: must not be negative (0 for the default 10s)",
			ErrInvalidOptions, o.BackpressureTimeout)
	}
	if o.EvictionWatermark < 0 {
		return fmt.Errorf("%w: Options.EvictionWatermark = %d: must not be negative (0 for the default)",
			ErrInvalidOptions, o.EvictionWatermark)
	}
	if o.L0StopWrites < 0 {
		return fmt.Errorf("%w: Options.L0StopWrites = %d: must not be negative (0 for the default %d)",
			ErrInvalidOptions, o.L0StopWrites, DefaultL0StopWrites)
	}
	if o.MaxOpenFiles < 0 {
		return fmt.Errorf("%w: Options.MaxOpenFiles = %d: must not be negative (0 for the default)",
			ErrInvalidOptions, o.MaxOpenFiles)
	}
	if o.RowCacheSize > 0 && o.RowCacheSize < engine.MinRowCacheSize {
		return fmt.Errorf("%w: Options.RowCacheSize = %d: below one set of %d bytes (0 for the default, negative for none)",
			ErrInvalidOptions, o.RowCacheSize, engine.MinRowCacheSize)
	}
	if o.BlockCacheSize > 0 && o.BlockCacheSize < 16<<10 {
		return fmt.Errorf("%w: Options.BlockCacheSize = %d: below one 16 KiB block (0 for the default, negative for none)",
			ErrInvalidOptions, o.BlockCacheSize)
	}
	seg := d.SegmentSize
	if seg != 2<<20 && seg != 4<<20 && seg != 8<<20 && seg != 16<<20 && seg != 32<<20 && seg != 64<<20 {
		return fmt.Errorf("%w: Options.SegmentSize = %d: must be 2, 4, 8, 16, 32 or 64 MiB (0 for the default, from the budget)",
			ErrInvalidOptions, o.SegmentSize)
	}
	if o.SharedBudget != nil {
		if o.MemoryBudget != 0 {
			return fmt.Errorf("%w: Options.MemoryBudget = %d: must be 0 when Options.SharedBudget is set",
				ErrInvalidOptions, o.MemoryBudget)
		}
		if l, min := o.SharedBudget.Limit(), MinMemoryBudget(seg); l < min {
			return fmt.Errorf("%w: Options.SharedBudget: limit %d bytes is below the minimum %d for %d-byte segments (MinMemoryBudget)",
				ErrInvalidOptions, l, min, seg)
		}
		return o.checkCaches(o.SharedBudget.Limit(), "Options.SharedBudget's limit")
	}
	if o.MemoryBudget < 0 {
		return fmt.Errorf("%w: Options.MemoryBudget = %d: must not be negative (0 for the default 1 GiB)",
			ErrInvalidOptions, o.MemoryBudget)
	}
	if min := MinMemoryBudget(seg); d.MemoryBudget < min {
		return fmt.Errorf("%w: Options.MemoryBudget = %d: below the minimum %d for %d-byte segments (MinMemoryBudget)",
			ErrInvalidOptions, o.MemoryBudget, min, seg)
	}
	return o.checkCaches(d.MemoryBudget, "Options.MemoryBudget")
}

// MinMemoryBudget returns the smallest memory budget, in bytes, a Store with segments of
// segmentSize bytes accepts (Options.MemoryBudget, a SharedBudget's limit, beside explicit
// cache sizes): a segment and its hash index at their largest (an eighth of the segment, plus
// the old index while it grows): 1.25 × segmentSize. Open maps the first segment, so a Store
// Open returns never fails its first write for memory; with a directory it moves full segments
// to disk and goes on within this budget.
func MinMemoryBudget(segmentSize int) int64 { return int64(segmentSize) + int64(segmentSize)/4 }

// defaultSegmentSize returns the default Options.SegmentSize for a budget of limit bytes: the
// largest of 2, 4, 8, 16, 32 and 64 MiB that is at most limit/32, and 2 MiB when none is.
// At 1/32 the budget's fixed costs (about 3.5 segments: Options.SegmentSize) take about 7/64
// of it, below the eighth of internal/engine/doc.go's "Fixed costs".
func defaultSegmentSize(limit int64) int {
	seg := DefaultSegmentSize
	for seg > 2<<20 && int64(seg) > limit/32 {
		seg >>= 1
	}
	return seg
}

// checkCaches refuses explicit cache sizes that leave the budget (limit bytes, named what)
// below MinMemoryBudget for the FreshTable.
func (o Options) checkCaches(limit int64, what string) error {
	caches := max(o.BlockCacheSize, 0) + max(o.RowCacheSize, 0)
	if min := MinMemoryBudget(o.withDefaults().SegmentSize); caches > 0 && limit-caches < min {
		return fmt.Errorf("%w: Options.BlockCacheSize + Options.RowCacheSize = %d: %s of %d bytes must keep at least %d (MinMemoryBudget) beside the caches",
			ErrInvalidOptions, caches, what, limit, min)
	}
	return nil
}

// withDefaults returns o with every zero field set to its default (the one place defaults are
// applied; Validate checks the result). Invalid fields stay as they are.
func (o Options) withDefaults() Options {
	if o.MaxParallelism == 0 {
		o.MaxParallelism = DefaultMaxParallelism
	}
	if o.Parallelism == 0 {
		o.Parallelism = 1
	}
	if o.KeyGroups == nil {
		o.KeyGroups = &KeyGroupRange{Start: 0, End: o.MaxParallelism - 1}
		if p, i, maxP := o.Parallelism, o.SubtaskIndex, o.MaxParallelism; maxP >= 1 && maxP <= UpperBoundMaxParallelism &&
			p >= 1 && p <= maxP && i >= 0 && i < p {
			r := ComputeKeyGroupRangeForOperatorIndex(maxP, p, i)
			o.KeyGroups = &r
		}
	} else {
		r := *o.KeyGroups
		o.KeyGroups = &r
	}
	if o.SharedBudget == nil && o.MemoryBudget == 0 { // Validate checks the default as any value
		o.MemoryBudget = DefaultMemoryBudget
	}
	if o.SegmentSize == 0 {
		limit := o.MemoryBudget
		if o.SharedBudget != nil {
			limit = o.SharedBudget.Limit()
		}
		o.SegmentSize = defaultSegmentSize(limit)
	}
	if o.BackpressureTimeout == 0 {
		o.BackpressureTimeout = DefaultBackpressureTimeout
	}
	if o.L0StopWrites == 0 {
		o.L0StopWrites = DefaultL0StopWrites
	}
	if o.fs == nil {
		o.fs = engine.DefaultFS()
	}
	return o
}

// budgetDefaults returns the block cache size, row cache size, eviction watermark and eviction
// room (engine.Options) for a budget of limit bytes of which free are neither used nor reserved
// now (Options.BlockCacheSize, RowCacheSize and EvictionWatermark after defaults; a cache is 0
// when there is none, the watermark 0 when there is none). Default
// cache sizes shrink so that free keeps room for a segment and its index beside them (a budget
// near MinMemoryBudget, or a shared budget other stores hold much of); explicit sizes are as
// given (Validate checked them against the limit).
func (o Options) budgetDefaults(limit, free int64) (cache, rows, water, room int64) {
	seg := int64(o.SegmentSize)
	spare := max(free-seg-seg/4, 0) // what default caches may take
	cache = o.BlockCacheSize
	if cache == 0 {
		cache = min(limit/DefaultBlockCacheDivisor, spare/(1+DefaultRowCacheShare))
		if cache < 16<<10 {
			cache = 0 // below one block: no cache
		}
	}
	cache = max(cache, 0)
	rows = o.RowCacheSize
	if rows == 0 {
		rows = min(limit/DefaultBlockCacheDivisor*DefaultRowCacheShare, spare/(1+DefaultRowCacheShare)*DefaultRowCacheShare)
		if rows < engine.MinRowCacheSize {
			rows = 0
		}
	}
	rows = max(rows, 0)
	return cache, rows, max(o.EvictionWatermark, 0), MinMemoryBudget(o.SegmentSize)
}

// budgetLimit is the limit of the budget the options give a Store (defaults applied):
// SharedBudget's, or MemoryBudget.
func (o Options) budgetLimit() int64 {
	if o.SharedBudget != nil {
		return o.SharedBudget.Limit()
	}
	return o.MemoryBudget
}
