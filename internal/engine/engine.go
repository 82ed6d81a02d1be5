package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/strata-db/strata/checkpoint"
	"github.com/strata-db/strata/fresh"
	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/internal/vfs"
	"github.com/strata-db/strata/lsm"
	"github.com/strata-db/strata/lsm/sstable"
	"github.com/strata-db/strata/memory"
	"github.com/strata-db/strata/scheduler"
	"github.com/strata-db/strata/slice"
)

// Status is the outcome of a lookup in any tier (fresh.Status values, plus Failed).
type Status = fresh.Status

const (
	// Absent: no tier holds the key.
	Absent = fresh.Absent
	// Found: the newest version is a value (or, for lists, batches were returned).
	Found = fresh.Found
	// Deleted: the newest version is a tombstone.
	Deleted = fresh.Deleted
	// Failed: the lower tier could not be read (a damaged file, an I/O error); TakeErr returns
	// the error. Never returned by the upper tiers.
	Failed Status = 0xff
)

// Short names inside the package.
type status = Status

const (
	absent  = Absent
	found   = Found
	deleted = Deleted
	failed  = Failed
)

// maxDeferredWrites bounds how long an open map iteration holds installs back: an iterator
// abandoned before its end (a loop that breaks early) must not stop the tiers from moving data
// forever.
const maxDeferredWrites = 1 << 16

// compactionThreshold is the chain length (runs) above which a bucket is compacted.
const compactionThreshold = 2

// tiers is the Store's view of its tiers, owner goroutine only (except the fields documented
// as shared with background tasks).
type Engine struct {
	f     *fresh.Table
	sl    *slice.Table
	alloc *slice.Allocator
	low   LowerTier // nil: no lower tier, no eviction
	lr    lowReader // point reads of low (lower.go)
	// mapChunk is the number of the lower tier's live map entries a map iteration holds at once
	// (Options.MapChunk).
	mapChunk int
	// lowMapFree is a lowMap no iteration uses, for the next map iteration that reaches the
	// lower tier (one iteration at a time is the common case).
	lowMapFree *lowMap
	// sb is the sort buffer of the transform or flush in flight (transform.go, recBuf).
	sb sortBufs
	rc *rowCache // values read from low (rowcache.go); nil: none
	// rcHits and rcMisses count value reads of low served by rc and not.
	rcHits, rcMisses int64
	db               *lsm.DB // the LsmStore behind low (nil: in memory only, or a test lower tier)
	pool             *memory.Pool
	segSize          int
	budget           *memory.Budget
	sched            *scheduler.Scheduler
	stride           uint64 // base.Stride(MaxParallelism)

	// reserveOut holds the slice bytes of the last reserveWindow installed transforms
	// (sizeReserve); reserveN counts the transforms recorded; reserveFree is the slice
	// allocator's free bytes the last sizing counted (invariant 31 holds at that moment, not
	// after a compaction has used them).
	reserveOut  [reserveWindow]int64
	reserveN    int
	reserveFree int64

	reserve     int64         // bytes this store added to the budget's reserve
	bpTimeout   time.Duration // Options.BackpressureTimeout
	maxCompact  int           // compactions in flight at most
	evictWater  int64         // evict when the slices hold more bytes (0: only under backpressure)
	evictRoom   int64         // evict when the writers' room in the budget is below it (0: never)
	rowWant     int64         // bytes of the row cache to map once the lower tier holds data (mapCaches)
	l0Stop      int           // writers wait while the LsmStore has this many L0 files
	l0Files     int           // L0 files after the last LSM install
	closing     bool          // Close has begun: no new background work is submitted
	preferFlush int           // sealed segments to flush to the lower tier before trying a transform

	// Shared with background tasks: a task that finishes bumps ready and pokes wake.
	ready atomic.Int32
	wake  chan struct{} // capacity 1

	fifo        []*transformJob // sealed segments not yet dropped, oldest (seal order) first
	compactions []*compactionJob
	eviction    *evictionJob
	relocation  *relocationJob
	lsmJobs     []*lsmJob
	ck          ckState  // checkpoints (checkpoint.go)
	cl          *clState // the changelog (changelog.go); nil: off
	ownWriter   bool     // cl's Writer is the engine's own (closed with it)
	lastFresh   int64    // budget.UsedBy(PurposeFreshData) when the sealed segments were last listed
	bgErr       error    // a sticky background failure (damage, a broken invariant); writes report it
	// Background failures that may pass (retry.go): each kind's backoff, and how many kinds
	// have failures pending (the write preamble's fast path tests it).
	retry     [numBgKinds]backoff
	retrying  int
	lastBgErr error // the last background failure, transient or not (Stats.LastBackgroundError)
	readErr   error // the error of the last read that returned failed (takeErr)
	noCompact bool  // a compaction failed for memory: none until an install frees some

	ttl       *ttlShared // TTL cleanup (ttl.go): the table and counters jobs share
	sw        sweepState // the TTL sweep (sweep.go)
	scans     []*Scan    // key scans open (scan.go): closed with the engine
	spareLow  LowerScan  // a closed scan's lower-tier walk, kept for the next scan's buffers (scan.go)
	openIters int        // map iterations open (deferring installs)
	deferred  int        // writes that deferred installs since the last install
	epoch     uint64     // bumped by every install; an open iteration of an older epoch is invalid

	// Counters for Stats.
	transforms       int64
	transformedBytes int64
	transformFails   int64
	compacted        int64
	evictions        int64
	bpWaits          int64
	bpNanos          int64
	clWaits, clNanos int64 // the part of bpWaits, bpNanos refused by the changelog's Reserve
	bpFailures       int64
	forcedInstalls   int64
	l0Stalls         int64
	l0StallNanos     int64
	sealedStalls     int64
	sealedStallNanos int64
	runStalls        int64
	runStallNanos    int64
	runStop          int // runStopPerBucket × the SliceTable's buckets
	lsmCompactions   int64
	flushes          int64 // sealed segments flushed straight to the lower tier
	bulkFiles        int64 // L0 files a bulk changelog replay installed (bulk.go)
	bulkParallel     int64 // batches a bulk changelog replay wrote in parts (bulk.go, invariant 30)
	relocations      int64 // relocations installed
	persistNanos     int64 // time Persist spent moving the tiers into the LsmStore
	persistFiles     int64 // L0 files Persist wrote
	bgErrors         int64 // background jobs that failed (not for memory, not cancelled)
	bgRetries        int64 // of those, the ones scheduled again after a backoff

	cost costState // cost accounting (cost.go)

	// lazy is the LazyFS of a lazy restore once StartPrefetch ran (nil otherwise): LazyStats.
	lazy atomic.Pointer[LazyFS]

	// tail is a lazy restore's changelog tail not installed yet, or failed (tail.go; nil:
	// none); lazyTail makes ReplayChangelog queue tails for it (Restore); tailStats its figures.
	tail      *tailJob
	lazyTail  bool
	tailStats TailStats
	tailHook  func() // Options.TailHook

	// The bulk replay's and the lazy restore's settings (Options, defaults applied).
	replayByApply   bool // Options.ReplayByApply (bulk.go, canBulkReplay)
	bulkParallelMin int  // Options.BulkParallelMin (bulk.go, bulkWrite)
	remoteLanes     int  // Options.RemotePrefetchLanes (lazy.go, StartPrefetch)

	// tm is the timer services' queues (timers.go).
	tm timers
}

type transformJob struct {
	seg *fresh.SealedSegment
	h   *scheduler.Handle // nil until submitted

	// Written by the task before done is set; read by the owner after.
	out  []*slice.Slice
	err  error
	done atomic.Bool

	failedUsed int64 // budget.Used() when a budget failure was seen; retried once it drops
	failed     bool
	retry      bool // the previous attempt failed for a transient reason (retry.go): resubmitted after its backoff
	flush      bool // a flush: the segment goes to the lower tier as one L0 file (pending)
	pending    any  // the flush's L0 file, written by the task, installed by the owner
}

// compactionJob is a batch of slice compactions, one per bucket, run one after another in one
// scheduler task (submitCompactions): ran of them returned without error, and err is the
// error of the next one, which ended the task (the rest never ran).
type compactionJob struct {
	cs   []*slice.Compaction
	ran  int
	err  error
	done atomic.Bool
}

type relocationJob struct {
	r    *slice.Relocation
	err  error
	done atomic.Bool
}

type evictionJob struct {
	e    *slice.Eviction
	sink evictSink
	err  error
	done atomic.Bool
}

// Options configure an Engine. The root package derives them from strata.Options with every
// default applied (sizes resolved against the budget); tests adjust them before Open. Sizes are
// bytes.
type Options struct {
	// Dir is the directory of the LsmStore (Dir/lsm); "" keeps everything in memory: no lower
	// tier, no eviction, nothing persisted.
	Dir string
	// FS is the file system Dir is reached through (vfs.Default(), or a MemFS/FaultFS in tests).
	FS vfs.FS
	// Budget bounds the memory the engine maps (segments, indices, slices, caches).
	Budget *memory.Budget
	// SegmentSize is the FreshTable's data segment size: 2, 4, 8, 16, 32 or 64 MiB.
	SegmentSize int
	// MaxParallelism is the number of key groups (order hashes are laid out by it).
	MaxParallelism int
	// Workers is the number of background goroutines (0: scheduler.DefaultWorkers).
	Workers int
	// UploadWorkers adds goroutines that run only uploads — checkpoint and materialization
	// uploads, checkpoint GC (scheduler.Options.Reserved[Upload]) — so that a checkpoint's
	// duration does not include the compactions queued before it. With the changelog on and
	// UploadWorkers > 0, one more runs only changelog persists (Reserved[Persist]), so that a
	// persist, which a write waits for when the changelog buffer is full, does not queue
	// behind a materialization's upload (issue 22).
	UploadWorkers int
	// BackpressureTimeout bounds how long a write refused for memory, or stalled by L0, waits.
	BackpressureTimeout time.Duration
	// L0StopWrites: writers wait while the LsmStore has this many L0 files.
	L0StopWrites int
	// BlockCacheSize and RowCacheSize are the LsmStore's caches, mapped through Budget (0: none).
	BlockCacheSize, RowCacheSize int64
	// EvictionWatermark: slices above it are evicted to the lower tier (0: only under
	// backpressure).
	EvictionWatermark int64
	// EvictionRoom: slices are evicted to the lower tier while the writers have less than
	// this room left in the budget (memory.Budget.WriterRoom; 0: no such trigger). The root
	// sets it to what the FreshTable's next segment needs, so that state that fits the budget
	// is never evicted and eviction starts just before a writer would wait for memory.
	EvictionRoom int64
	// EvictionBatch is the SliceTable's eviction batch (0: a quarter of EvictionWatermark or
	// EvictionRoom, whichever is larger, between slice.DefaultEvictionBatch and 64 MiB).
	EvictionBatch int64
	// MaxOpenFiles bounds the LsmStore's open table files (lsm.Options.MaxOpenFiles; 0: the
	// default, lsm.DefaultMaxOpenFiles()).
	MaxOpenFiles int
	// KeyGroups is the Store's key-group range: the range of the timer queues (timers.go).
	KeyGroups checkpoint.KeyGroupRange
	// KeyGroupOfHash returns the key group of a key's 32-bit hash (the root's Flink
	// assignment), to check the timers read from a timer file or a checkpoint (timers.go).
	// Needed only with timers.
	KeyGroupOfHash func(keyHash int32) int

	// Test knobs.

	// Lower replaces the LsmStore by another lower tier (Dir must be ""); LowWater is then the
	// SliceTable's HighWatermark.
	Lower    LowerTier
	LowWater int64
	// BucketBits is the SliceTable's bucket count as a power of two (0: from SegmentSize).
	BucketBits int
	// TableSize is the LsmStore's compaction output size in bytes (lsm.Options.TargetFileSize;
	// 0: lsm.DefaultTargetFileSize): small tables give a small state many files.
	TableSize int64
	// MaxListPiece bounds, in bytes, the list pieces compactions join (base doc, rule 4): the
	// SliceTable's MaxListMerge and the LsmStore's MaxListPiece. 0: base.MaxListPiece (1 MiB).
	// Tests set it small so that lists become chains of pieces.
	MaxListPiece int
	// ListEagerBytes is the most bytes of a list's part in the lower tier that ListGet copies
	// at once; a longer part is read one piece at a time (LowerList). 0: 256 KiB. Tests set
	// it small.
	ListEagerBytes int
	// MapChunk is the number of the lower tier's live entries of a map that a map iteration
	// holds at once (MapIter). 0: 1024. Tests set it small.
	MapChunk int
	// ReplayByApply makes the engine's changelog replays and canonical savepoint loads go
	// through Apply record by record (the path before the bulk replay) instead of in bulk
	// (doc.go, "Bulk changelog replay"): tests and benchmarks compare the two paths. No user
	// wants it: the bulk replay reads the same (invariants 15-18) at a fraction of the cost.
	ReplayByApply bool
	// BulkParallelMin is the fewest records of a batch that a bulk replay splits into parts by
	// key-group range (invariant 30). 0: DefaultBulkParallelMin (32768). Tests set 1 so that
	// their small tails are split.
	BulkParallelMin int
	// LazyTail makes Restore's changelog tail lazy (doc.go, "Lazy tail") — as a lazy
	// restore's (RestoreSpec.Lazy) always is — without the lazy restore's tables: tests and
	// benchmarks compare the lazy tail with the synchronous bulk replay. Read by Restore only.
	LazyTail bool
	// TailHook, when not nil, runs at the start of the lazy tail's driver, on its scheduler
	// task, before it writes anything: tests hold the driver (the hook blocks) to read and
	// write before the tail is installed, or fail it (the hook panics: a task that panicked,
	// invariant 35). It runs once per lazy tail, concurrently with the owner.
	TailHook func()
	// RemotePrefetchLanes is how many files a lazy restore's prefetch has in flight at most
	// when any file is remote (lazy.go, StartPrefetch). 0: DefaultRemotePrefetchLanes (16).
	// Tests set 1 to observe promotion with one lane.
	RemotePrefetchLanes int

	// Changelog, when not nil, turns the changelog on (changelog.go): every write is also
	// logged, checkpoints list the last materialization and the log after it.
	Changelog *ChangelogOptions

	ttl      *ttlShared
	lowWater int64  // SliceTable HighWatermark when there is a lower tier
	startSeq uint64 // the FreshTable's first write gets startSeq+1 (Open: the persisted one)
	db       *lsm.DB
}

// Recovered is what Open found in Dir: the metadata and sequence number of the last persist
// point (Persist). OK is false for a new directory or an engine in memory only.
type Recovered struct {
	Meta []byte
	Seq  uint64
	OK   bool
}

// Open opens an engine: with o.Dir, it creates the directory (and makes it durable in its
// parents), opens the LsmStore under Dir/lsm as of its last persist point and returns that
// point's metadata for the caller to check; the FreshTable numbers new writes after the
// persisted sequence number. Errors: ErrMemoryBudget when the budget cannot hold a segment and
// the caches; ErrCorruption (with its cause and the file) for damaged files; ErrLocked when
// another engine holds Dir; I/O errors. On error nothing is left open and the directory is left
// as it was.
func Open(o Options) (e *Engine, rec Recovered, err error) {
	o.ttl = &ttlShared{}
	pool, err := memory.NewPool(o.Budget, o.SegmentSize)
	if err != nil {
		return nil, rec, err
	}
	if o.Dir != "" {
		lt, r, err := openLSM(o)
		if err != nil {
			return nil, rec, errors.Join(err, pool.Close())
		}
		rec = r
		o.Lower, o.db, o.lowWater, o.startSeq = lt, lt.db, 1, r.Seq
		if o.EvictionBatch == 0 {
			// A quarter of the watermark, or the room of a segment, that eviction keeps: one
			// batch then frees what the next segment needs.
			o.EvictionBatch = min(max(o.EvictionWatermark/4, o.EvictionRoom, slice.DefaultEvictionBatch), 64<<20)
		}
	} else if o.Lower != nil {
		o.lowWater = o.LowWater
	}
	e, err = newEngine(pool, o)
	if err != nil {
		if o.Lower != nil {
			err = errors.Join(err, o.Lower.Close())
		}
		return nil, Recovered{}, errors.Join(err, pool.Close())
	}
	e.pool = pool
	e.initCheckpoints(&o)
	e.initTimers(&o)
	if o.Changelog != nil {
		co := *o.Changelog
		if err := e.initChangelog(&co); err != nil {
			return nil, Recovered{}, errors.Join(err, e.Close())
		}
	}
	e.kick() // LSM compactions due after recovery
	return e, rec, nil
}

// openLSM opens the LsmStore under o.Dir (its block cache first) and reads its persist point.
func openLSM(o Options) (*lsmTier, Recovered, error) {
	fs := o.FS
	if err := fs.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, Recovered{}, lowerError(err)
	}
	if err := syncParents(fs, o.Dir); err != nil {
		return nil, Recovered{}, lowerError(err)
	}
	lt := &lsmTier{}
	if size := o.BlockCacheSize; size > 0 {
		c, err := sstable.NewCache(o.Budget, size, 0)
		if err != nil {
			return nil, Recovered{}, fmt.Errorf("block cache of %d bytes: %w", size, err)
		}
		lt.cache = c
	}
	db, err := lsm.Open(lsm.Options{FS: fs, Dir: filepath.Join(o.Dir, "lsm"), Name: "lsm", Cache: lt.cache,
		MaxOpenFiles: o.MaxOpenFiles, TargetFileSize: o.TableSize, MaxListPiece: o.MaxListPiece,
		NewFilter: o.ttl.lsmFilter, Expiry: o.ttl.note})
	if err != nil {
		if lt.cache != nil {
			lt.cache.Close()
		}
		return nil, Recovered{}, lowerError(err)
	}
	lt.db = db
	if lt.cache != nil && db.Empty() {
		// Nothing to cache yet: the cache takes its room in the budget only once the LsmStore
		// holds data (mapCaches), so that state that fits in memory has the whole budget.
		db.SetCache(nil)
		lt.cache.Close()
		lt.cache, lt.cacheWant = nil, o.BlockCacheSize
	}
	seq, meta, ok := db.PersistedMeta()
	return lt, Recovered{Meta: meta, Seq: seq, OK: ok}, nil
}

// syncParents makes dir's entry durable in its parent, and each parent's in its own, up to
// the root (vfs invariant 2: a new directory survives a crash only once its parent is synced;
// lsm.Open syncs dir itself and the parent of its own subdirectory).
func syncParents(fs vfs.FS, dir string) error {
	for p := filepath.Clean(dir); ; {
		parent := filepath.Dir(p)
		if parent == p {
			return nil
		}
		d, err := fs.OpenDir(parent)
		if err != nil {
			return err
		}
		err = d.Sync()
		if cerr := d.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		p = parent
	}
}

func newEngine(pool *memory.Pool, o Options) (*Engine, error) {
	budget := pool.Budget()
	seg := int64(pool.SegmentSize())
	f, err := fresh.New(fresh.Options{Pool: pool, StartSeq: o.startSeq})
	if err != nil {
		return nil, err
	}
	alloc, err := slice.NewAllocator(pool, slice.DefaultSliceSize)
	if err != nil {
		return nil, errors.Join(err, f.Close())
	}
	bits := o.BucketBits
	if bits == 0 {
		bits = defaultBucketBits(seg)
	}
	// Compact a chain once it has three runs: until then every overwritten key keeps one version
	// per run, and in Phase 1 (no eviction) the whole state must fit the budget, so memory
	// matters more than the write amplification of merging early. (The SliceTable's default,
	// 4, was measured for read latency.)
	if o.ttl == nil {
		o.ttl = &ttlShared{}
	}
	var t *Engine // for LowerHolds, which the owner calls once t is made
	so := slice.Options{Allocator: alloc, BucketBits: bits, CompactionThreshold: compactionThreshold, MaxListMerge: o.MaxListPiece,
		NewFilter: o.ttl.sliceFilter, Expiry: o.ttl.note, LowerHolds: func(lo, hi uint64) bool { return t.lowerHolds(lo, hi) }}
	if o.Lower != nil {
		so.LowerTier, so.HighWatermark, so.EvictionBatch = true, o.lowWater, o.EvictionBatch
	}
	sl, err := slice.New(so)
	if err != nil {
		return nil, errors.Join(err, f.Close())
	}
	sopts := scheduler.Options{Workers: o.Workers}
	sopts.Reserved[scheduler.Upload] = o.UploadWorkers
	if o.Changelog != nil {
		sopts.Reserved[scheduler.Persist] = min(o.UploadWorkers, 1)
	}
	sched, err := scheduler.New(sopts)
	if err != nil {
		return nil, errors.Join(err, sl.Close(), f.Close())
	}
	// The reserve: the slices of one transform, one segment until a transform has measured
	// them (reserveSize; doc.go "Fixed costs", invariant 31).
	add := reserveSize(seg, 0, 0, budget.Limit(), budget.Reserve())
	budget.AddReserve(add)
	var rc *rowCache
	rowWant := int64(0)
	if o.Lower != nil && o.RowCacheSize > 0 && o.db != nil && o.db.Empty() {
		rowWant = o.RowCacheSize // mapped with the block cache, once the LsmStore holds data (mapCaches)
	} else if o.Lower != nil && o.RowCacheSize > 0 {
		if rc, err = newRowCache(budget, o.RowCacheSize); err != nil {
			budget.AddReserve(-add)
			return nil, errors.Join(fmt.Errorf("row cache of %d bytes: %w", o.RowCacheSize, err), sched.Close(), sl.Close(), f.Close())
		}
	}
	// The first segment now: an Open that succeeds never sees its first write fail for memory
	// (a shared budget that other stores filled fails Open instead, with the figures).
	if err := f.Prepare(); err != nil {
		budget.AddReserve(-add)
		errs := []error{fmt.Errorf("the first segment: %w", err), sched.Close(), sl.Close(), f.Close()}
		if rc != nil {
			errs = append(errs, rc.close())
		}
		return nil, errors.Join(errs...)
	}
	t = &Engine{
		f: f, sl: sl, alloc: alloc, low: o.Lower, budget: budget, sched: sched, rc: rc,
		stride:     base.Stride(o.MaxParallelism),
		segSize:    int(seg),
		runStop:    runStopPerBucket * sl.Buckets(),
		reserve:    add,
		bpTimeout:  o.BackpressureTimeout,
		maxCompact: max(sched.Workers(), 1),
		evictWater: o.EvictionWatermark,
		evictRoom:  o.EvictionRoom,
		rowWant:    rowWant,
		l0Stop:     o.L0StopWrites,
		mapChunk:   cmp.Or(o.MapChunk, lowMapChunk),
		db:         o.db,
		ttl:        o.ttl,
		wake:       make(chan struct{}, 1),

		tailHook:        o.TailHook,
		replayByApply:   o.ReplayByApply,
		bulkParallelMin: cmp.Or(o.BulkParallelMin, DefaultBulkParallelMin),
		remoteLanes:     cmp.Or(o.RemotePrefetchLanes, DefaultRemotePrefetchLanes),
	}
	t.cost.cpu0 = processCPU()
	t.lr.eagerMax = cmp.Or(o.ListEagerBytes, lowListEager)
	return t, nil
}

// defaultBucketBits is the SliceTable's bucket bits for segments of seg bytes (Options.BucketBits
// 0). A transform leaves at most one partly filled block per bucket, so the buckets' blocks are
// kept to a quarter of a segment: 32 buckets at 2 MiB, 64 at 4 MiB, 128 at 8 MiB, 256 at
// 16 MiB, 1024 at 64 MiB.
func defaultBucketBits(seg int64) int {
	bits := 8
	if seg < 4<<20 {
		bits = 5
	} else if seg < 8<<20 {
		bits = 6
	} else if seg < 16<<20 {
		bits = 7
	}
	for n := seg / (16 << 20); n > 1; n >>= 1 {
		bits++
	}
	return bits
}

// Seq returns the FreshTable's sequence number (every write advances it).
func (t *Engine) Seq() uint64 { return t.f.Seq() }

// ---- writes: see write.go ----

// before runs at the start of every write: it reports a sticky background failure (or a full
// disk while its retry waits), retries failed background work whose backoff has passed, and
// installs finished background work.
func (t *Engine) before() error {
	if err := t.sticky(); err != nil {
		return err
	}
	t.lr.reset()
	if t.ready.Load() != 0 {
		t.poll()
	}
	if t.tail != nil && t.tailWritten() { // a lazy tail written while value reads went on (invariant 39)
		if err := t.awaitTail(); err != nil {
			return err
		}
	}
	if t.l0Files >= t.l0Stop && t.db != nil {
		t.stallL0()
	}
	return nil
}

// sticky returns the failure every write meets now: the sticky background failure (damage),
// or ErrNoSpace while a full disk's retry waits (before, WriteCheck).
func (t *Engine) sticky() error {
	if t.bgErr != nil {
		return t.bgErr
	}
	if t.retrying > 0 {
		return t.retryCheck()
	}
	return nil
}

// WriteCheck returns the error Apply would refuse any write with before it writes: the
// sticky background failure (damage), ErrNoSpace while a full disk's retry waits, a lazy
// restore's failed changelog tail once its driver has ended — or nil. It installs no
// background work. The root's hot tier asks it at each write it keeps above the engine, so
// those writes report what a write reports (root doc.go, "Hot tier"). Owner goroutine only.
func (t *Engine) WriteCheck() error {
	if err := t.sticky(); err != nil {
		return err
	}
	if t.tail != nil && t.tailWritten() {
		if err := t.awaitTail(); err != nil {
			return err
		}
	}
	return nil
}

// stallL0 makes a writer wait while the LsmStore has Options.L0StopWrites L0 files or more,
// until an L0 compaction is installed (stall). Counted in Stats (L0Stalls, L0StallNanos).
//
//go:noinline
func (t *Engine) stallL0() {
	t.l0Stalls++
	t.l0StallNanos += t.stall(func() bool { return t.l0Files >= t.l0Stop }, func() bool {
		if len(t.lsmJobs) == 0 {
			t.kickLSM()
		}
		return len(t.lsmJobs) > 0 // else nothing to wait for (levels busy or not due)
	})
}

// sealedStop is the number of sealed segments queued for their transform (the one in flight
// included) above which a write waits (stallSealed). One worker runs transforms one at a
// time; a writer on a shared core otherwise outruns it, and the queue grows without bound
// below the budget: every queued segment holds its memory and its index (a FreshTable probe
// per read each), and compactions, which the worker takes only when no transform is queued,
// starve — an overwrite load at 1 GiB held 7 sealed segments and chains of 25 runs, and
// evicted live state to the LsmStore at 124 MiB of it.
const sealedStop = 2

// stallSealed makes a writer wait while more than sealedStop sealed segments are queued,
// until the transform at the head is installed (stall): writers are paced at the rate the
// background sustains instead of borrowing memory against it. A head that is not in flight
// (failed for memory, or waiting for a retry) is not waited for: backpressure handles
// memory. Counted in Stats (TransformStalls, TransformStallNanos).
//
//go:noinline
func (t *Engine) stallSealed() {
	t.sealedStalls++
	t.sealedStallNanos += t.stall(func() bool { return len(t.fifo) > sealedStop }, func() bool {
		if t.fifo[0].h == nil {
			t.kick()
		}
		return t.fifo[0].h != nil && !t.fifo[0].done.Load()
	})
}

// runStopPerBucket is the mean chain length, in runs per bucket of the SliceTable, above which
// a write waits for compactions (stallRuns). Every transform adds a run to every bucket and the
// worker takes compactions only between transforms, so a writer on a shared core makes runs
// faster than they are merged: under an overwrite load the chains grew to 28 runs, the
// shadowed versions in them took 700 MiB for 124 MiB of state, and a read searched every run
// of its bucket.
const runStopPerBucket = 6

// stallRuns makes a writer wait while the SliceTable holds more than runStop runs, until
// compactions have merged enough (stall). Compactions that cannot run (one failed for memory,
// noCompact, until memory is freed) are not waited for. Counted in Stats (CompactionStalls,
// CompactionStallNanos).
//
//go:noinline
func (t *Engine) stallRuns() {
	t.runStalls++
	t.runStallNanos += t.stall(func() bool { return t.sl.Runs() > t.runStop }, func() bool {
		if len(t.compactions) == 0 {
			t.kick()
		}
		return len(t.compactions) > 0
	})
}

// stall is the one mechanism of the write stalls: it installs finished work and waits for the
// next job to finish while behind reports that the background is behind and inFlight that a
// job whose end may change that is in flight (inFlight may submit one). The write goes ahead
// when nothing is in flight, on a background failure, or after Options.BackpressureTimeout: a
// stall paces writers, it never fails a write. It returns the time waited, in nanoseconds.
func (t *Engine) stall(behind, inFlight func() bool) int64 {
	start := time.Now()
	timer := time.NewTimer(t.bpTimeout)
	defer timer.Stop()
	for {
		t.install()
		if !behind() || t.bgErr != nil || !inFlight() {
			return int64(time.Since(start))
		}
		select {
		case <-t.wake:
		case <-timer.C:
			return int64(time.Since(start))
		}
	}
}

// after runs after every successful write: when the FreshTable took a segment (a roll seals
// the previous one), the new sealed segments are queued for transform.
func (t *Engine) after() {
	if t.budget.UsedBy(memory.PurposeFreshData) != t.lastFresh {
		t.checkSealed()
		if len(t.fifo) > sealedStop && t.openIters == 0 {
			t.stallSealed()
		}
	}
	if t.sl.Runs() > t.runStop && t.openIters == 0 { // an open map iteration defers installs
		t.stallRuns()
	}
	if t.sw.writes--; t.sw.writes < 0 && t.sweepDue() {
		t.kick()
	}
}

// Seal seals the active segment and queues its transform (tests force reads across segments
// and tiers with it). Errors: ErrMemoryBudget, ErrClosed.
func (t *Engine) Seal() error {
	if err := t.f.Seal(); err != nil {
		return err
	}
	t.checkSealed()
	return nil
}

// Close waits for every background task (scheduler.Close), ends the jobs they leave (built
// slices are released, compactions and evictions cancelled), then closes the tiers, gives the
// reserve back to the budget and releases the segment pool. It persists nothing (Persist
// does). Owner goroutine only; the engine must not be used after.
func (t *Engine) Close() error {
	t.closeScans()
	if t.spareLow != nil {
		t.spareLow.Close()
		t.spareLow = nil
	}
	errs := []error{t.sched.Close()}
	t.dropTail() // the lazy tail's driver ended with the scheduler: its files are discarded
	if l := t.lazy.Load(); l != nil {
		errs = append(errs, l.close()) // the prefetch's scheduler (lazy.go)
	}
	t.closeCheckpoints()
	if t.sb.busy.CompareAndSwap(false, true) { // no task runs now; else leave it mapped
		t.sb.recs.free()
		t.sb.tmp.free()
	}
	for _, j := range t.fifo {
		if j.out != nil {
			t.sl.Release(j.out)
			j.out = nil
		}
		if j.pending != nil {
			t.low.Discard(j.pending)
			j.pending = nil
		}
	}
	t.fifo = nil
	for _, j := range t.compactions {
		for _, c := range j.cs {
			errs = append(errs, t.sl.CancelCompaction(c))
		}
	}
	t.compactions = nil
	if r := t.relocation; r != nil {
		errs = append(errs, t.sl.CancelRelocation(r.r))
		t.relocation = nil
	}
	if e := t.eviction; e != nil {
		errs = append(errs, t.sl.CancelEviction(e.e))
		if e.sink.pending != nil {
			t.low.Discard(e.sink.pending)
		}
		t.eviction = nil
	}
	t.closeTimers() // after the checkpoints: no upload reads them any more
	errs = append(errs, t.sl.Close(), t.f.Close())
	if t.rc != nil {
		errs = append(errs, t.rc.close())
		t.rc = nil
	}
	if t.low != nil {
		errs = append(errs, t.low.Close())
	}
	for _, j := range t.lsmJobs {
		// Run has returned or never will (the scheduler is closed). The DB is closed, so
		// InstallCompaction only releases the job and its outputs (the next Open removes them):
		// an install now would come after the last persist point, which a reopen recovers, so
		// Close writes nothing for it.
		if err := t.db.InstallCompaction(j.j); err != nil && !errors.Is(err, lsm.ErrJobNotRun) &&
			!errors.Is(err, context.Canceled) && !errors.Is(err, base.ErrClosed) {
			errs = append(errs, lowerError(err))
		}
	}
	t.lsmJobs = nil
	t.budget.AddReserve(-t.reserve)
	t.epoch++
	if t.pool != nil {
		errs = append(errs, t.pool.Close())
	}
	return errors.Join(errs...)
}

// HasDisk reports whether the engine has an LsmStore in a directory (Persist works).
func (t *Engine) HasDisk() bool { return t.db != nil }
