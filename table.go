package strata

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/strata-db/strata/fresh"
	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/lsm"
	"github.com/strata-db/strata/memory"
	"github.com/strata-db/strata/scheduler"
	"github.com/strata-db/strata/slice"
)

// The read and write path across the tiers. State code (value.go, list.go, map.go, merging.go)
// calls tiers' methods, which mirror fresh.Table's, so it reads the same whatever tier holds the
// data:
//
//	write ──► FreshTable (active segment) ──seal──► sealed segments
//	                                                   │ transform (background): entries, hashes,
//	                                                   ▼ sort, slice.Build; installed in seal order
//	read  ──► FreshTable ──Absent/partial──► SliceTable ──Absent/partial──► LsmStore (lower tier)
//	             │                              │ ▲ compaction (background)   ▲ │ LSM compaction
//	             │                              ▼ eviction (background) ──────┘ ▼ (background)
//	             └── flush of a sealed segment (background; only while the SliceTable is
//	                 empty, when the budget cannot hold a transform's slices) ──► LsmStore L0
//
// Concurrency (one mechanism): the owner goroutine (the caller's) does every read, write and
// install. Background tasks (scheduler/, the only goroutine starter) read immutable inputs —
// sealed segments, slices — and build immutable outputs; when one finishes it bumps an atomic
// counter, and the owner installs finished work at its next write (one atomic load on the fast
// path), or while a writer waits for memory (backpressure). Reads never install, so values and
// list batches a read returns stay valid until the next write, as the API documents.
//
// Install protocol:
//  1. Transforms are installed strictly in seal order (the head of a FIFO of sealed segments):
//     slice.Table.Install of the segment's slices, then fresh.Table.DropSealed of the segment.
//     Between the two calls the data is in both tiers (the FreshTable, read first, wins), so a
//     read never sees a gap or a stale version. Transforms run one at a time, which is what the
//     budget's reserve (below) is sized for.
//  2. A compaction or eviction job owns its input slices (slice marks them busy) until the owner
//     installs or cancels it; the owner frees replaced inputs at install, when no read can hold
//     them (readers are the owner, and values are documented valid until the next write).
//  3. An eviction's run goes to the lower tier in two steps, like a flush: the task writes it
//     (invisible), the owner installs it in the lower tier and then removes the slices.
//  4. Map iterations span writes (MapIterator.Remove, Put of the current user key). While one is
//     open, installs wait (a transform or compaction would move or free what it walks) — for at
//     most maxDeferredWrites writes, or until a writer needs memory; an install made while an
//     iteration is open ends it with ErrIteratorInvalidated rather than yield wrong entries.
//  5. The LsmStore's install order (lsm invariant 6: a file installed later is newer for every
//     key) holds because the tiers are in age order: evictions take each chain's oldest run,
//     and a flush — a sealed segment written as one L0 file, installed at the head of the FIFO
//     like a transform (InstallL0, then DropSealed) — is only started while the SliceTable is
//     empty and no eviction or slice compaction is in flight, so nothing older can be
//     installed after it. LSM compactions are picked after every install, run as Compaction
//     tasks and installed by the owner like the others; while L0 holds Options.L0StopWrites
//     files, writers wait for one (L0 stall).
//
// Eviction policy: above Options.EvictionWatermark bytes of slices, and whenever a writer waits
// for memory or the head transform failed for it, the coldest units of the chains' oldest runs
// are evicted (slice.Table.PickEviction, one batch in flight). A transform that fails for
// memory while the SliceTable is empty switches to flushes for the next flushProbe segments:
// a budget that cannot hold a transform's slices beside the FreshTable (64 MiB with 16 MiB
// segments) then runs as FreshTable → LsmStore.
//
// Memory: the store adds a reserve to its budget (memory.Budget.AddReserve) that the FreshTable
// cannot take, sized for the slices of one transform, so a transform can always build its
// output before the segment it frees is dropped. A write refused with ErrMemoryBudget while
// background work is in flight waits for it (backpressure, counted in Stats) and retries.

// status is the outcome of a lookup in any tier (base.Status, which fresh and slice return).
type status = fresh.Status

const (
	absent  = fresh.Absent
	found   = fresh.Found
	deleted = fresh.Deleted
	// failed: the lower tier could not be read (a damaged file, an I/O error); the error is
	// in tiers.readErr until takeErr. Never returned by the upper tiers.
	failed status = 0xff
)

// maxDeferredWrites bounds how long an open map iteration holds installs back: an iterator
// abandoned before its end (a loop that breaks early) must not stop the tiers from moving data
// forever.
const maxDeferredWrites = 1 << 16

// compactionThreshold is the chain length (runs) above which a bucket is compacted.
const compactionThreshold = 2

// tiers is the Store's view of its tiers, owner goroutine only (except the fields documented
// as shared with background tasks).
type tiers struct {
	f     *fresh.Table
	sl    *slice.Table
	alloc *slice.Allocator
	low   lowerTier // nil: no lower tier, no eviction
	lr    lowReader // point reads of low (lower.go)
	rc    *rowCache // values read from low (rowcache.go); nil: none
	// rcHits and rcMisses count value reads of low served by rc and not.
	rcHits, rcMisses int64
	db               *lsm.DB // the LsmStore behind low (nil: in memory only, or a test lower tier)
	budget           *memory.Budget
	sched            *scheduler.Scheduler
	stride           uint64 // base.Stride(MaxParallelism)

	reserve     int64         // bytes this store added to the budget's reserve
	bpTimeout   time.Duration // Options.BackpressureTimeout
	maxCompact  int           // compactions in flight at most
	autoEvict   bool          // evict whenever the SliceTable is above its watermark (tests: false)
	evictWater  int64         // evict when the slices hold more bytes (0: only under backpressure)
	l0Stop      int           // writers wait while the LsmStore has this many L0 files
	l0Files     int           // L0 files after the last LSM install
	closing     bool          // Close has begun: no new background work is submitted
	noSpaceAt   time.Time     // when a background ErrNoSpace was recorded
	preferFlush int           // sealed segments to flush to the lower tier before trying a transform

	// Shared with background tasks: a task that finishes bumps ready and pokes wake.
	ready atomic.Int32
	wake  chan struct{} // capacity 1

	fifo        []*transformJob // sealed segments not yet dropped, oldest (seal order) first
	compactions []*compactionJob
	eviction    *evictionJob
	relocation  *relocationJob
	lsmJobs     []*lsmJob
	lastFresh   int64 // budget.UsedBy(PurposeFreshData) when the sealed segments were last listed
	bgErr       error // a background failure that is not a budget shortage; writes report it
	readErr     error // the error of the last read that returned failed (takeErr)
	noCompact   bool  // a compaction failed for memory: none until an install frees some

	openIters int    // map iterations open (deferring installs)
	deferred  int    // writes that deferred installs since the last install
	epoch     uint64 // bumped by every install; an open iteration of an older epoch is invalid

	// Counters for Stats.
	transforms       int64
	transformedBytes int64
	transformFails   int64
	compacted        int64
	evictions        int64
	bpWaits          int64
	bpNanos          int64
	bpFailures       int64
	forcedInstalls   int64
	l0Stalls         int64
	l0StallNanos     int64
	lsmCompactions   int64
	flushes          int64 // sealed segments flushed straight to the lower tier
	relocations      int64 // relocations installed
	flushNanos       int64 // time Close spent moving the tiers into the LsmStore
	flushedFiles     int64 // L0 files Close wrote
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
	flush      bool // a flush: the segment goes to the lower tier as one L0 file (pending)
	pending    any  // the flush's L0 file, written by the task, installed by the owner
}

type compactionJob struct {
	c    *slice.Compaction
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

// tierOptions are the tiers' settings derived from Options (and set by tests).
type tierOptions struct {
	maxP       int
	workers    int
	bpTimeout  time.Duration
	low        lowerTier
	db         *lsm.DB // the LsmStore behind low, if low is one
	lowWater   int64   // SliceTable HighWatermark when low != nil
	evictBatch int64   // SliceTable EvictionBatch (0: its default)
	autoEvict  bool
	evictWater int64 // evict when the slices hold more (0: only under backpressure)
	l0Stop     int
	bucketBits int    // 0: from the segment size
	startSeq   uint64 // the FreshTable's first write gets startSeq+1
	rowCache   int64  // row cache bytes when low != nil (0: none)
}

func newTiers(pool *memory.Pool, o tierOptions) (*tiers, error) {
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
	bits := o.bucketBits
	if bits == 0 {
		// A transform leaves at most one partly filled block per bucket, so keep the buckets'
		// blocks to a quarter of a segment: 256 buckets at 16 MiB, 1024 at 64 MiB.
		bits = 8
		for n := seg / (16 << 20); n > 1; n >>= 1 {
			bits++
		}
	}
	// Compact a chain once it has three runs: until then every overwritten key keeps one version
	// per run, and in Phase 1 (no eviction) the whole state must fit the budget, so memory
	// matters more than the write amplification of merging early. (The SliceTable's default,
	// 4, was measured for read latency.)
	so := slice.Options{Allocator: alloc, BucketBits: bits, CompactionThreshold: compactionThreshold}
	if o.low != nil {
		so.LowerTier, so.HighWatermark, so.EvictionBatch = true, o.lowWater, o.evictBatch
	}
	sl, err := slice.New(so)
	if err != nil {
		return nil, errors.Join(err, f.Close())
	}
	sched, err := scheduler.New(scheduler.Options{Workers: o.workers})
	if err != nil {
		return nil, errors.Join(err, sl.Close(), f.Close())
	}
	// The reserve: the slices of one transform. Map entries repeat their map key in a slice
	// (fresh nests them under one header), and a transform leaves a partly filled block per
	// bucket, so a segment's slices may take up to about twice its size. Capped so that the
	// FreshTable keeps room for a segment and its index, and so that stores sharing a budget
	// keep at least three quarters of it for writers (the reserve is per budget, not per store:
	// a transform that finds it taken fails and is retried once memory was freed).
	want := 2 * seg
	cur := budget.Reserve()
	add := min(want, budget.Limit()/4-cur, budget.Limit()-seg-seg/4-cur)
	add = max(add, 0)
	budget.AddReserve(add)
	var rc *rowCache
	if o.low != nil && o.rowCache > 0 {
		if rc, err = newRowCache(budget, o.rowCache); err != nil {
			budget.AddReserve(-add)
			return nil, errors.Join(fmt.Errorf("row cache of %d bytes: %w", o.rowCache, err), sched.Close(), sl.Close(), f.Close())
		}
	}
	t := &tiers{
		f: f, sl: sl, alloc: alloc, low: o.low, budget: budget, sched: sched, rc: rc,
		stride:     base.Stride(o.maxP),
		reserve:    add,
		bpTimeout:  o.bpTimeout,
		maxCompact: max(sched.Workers(), 1),
		autoEvict:  o.autoEvict,
		evictWater: o.evictWater,
		l0Stop:     o.l0Stop,
		db:         o.db,
		wake:       make(chan struct{}, 1),
	}
	return t, nil
}

// orderOf returns the order hash of a composite key with hash h (its key group is its first two
// bytes; see appendCompositeKey).
func (t *tiers) orderOf(key []byte, h uint64) uint64 {
	return base.OrderHash(uint16(key[0])<<8|uint16(key[1]), t.stride, h)
}

// ---- reads ----

// Get returns the newest value of key (hash h) across the tiers.
func (t *tiers) Get(h uint64, key []byte) ([]byte, status) {
	if v, st := t.f.Get(h, key); st != absent {
		return v, st
	}
	order := t.orderOf(key, h)
	if v, st := t.sl.Get(order, key); st != slice.Absent {
		return v, st
	}
	if t.low != nil {
		if t.rc != nil {
			if v, ok := t.rc.get(order, key); ok {
				t.rcHits++
				return t.lr.copy(v), found
			}
			t.rcMisses++
		}
		v, st, err := t.lr.get(t.low, order, key)
		if err != nil {
			return nil, t.lowFailed(err)
		}
		if st == found && t.rc != nil && t.lr.kind == base.KindValue {
			t.rc.put(order, key, v)
		}
		return v, st
	}
	return nil, absent
}

// ListGet appends the batches of the list key (hash h) to dst, oldest first, across the tiers:
// the lower tiers' batches go below the FreshTable's operands until a tier reaches a base or a
// tombstone. The status is found when a batch was returned; complete is always true below the
// lowest tier.
func (t *tiers) ListGet(h uint64, key []byte, dst [][]byte) ([][]byte, status, bool) {
	start := len(dst)
	dst, st, complete := t.f.ListGet(h, key, dst)
	if complete {
		return dst, st, true
	}
	// The FreshTable holds append operands only (or nothing): the older tiers' list goes first.
	// Collect newest tier first after the fresh batches, then rotate the blocks into age order
	// in place (reverse all, then each block), allocation-free.
	nf := len(dst) - start
	order := t.orderOf(key, h)
	dst, complete = t.sl.ListGet(order, key, dst)
	ns := len(dst) - start - nf
	if !complete && t.low != nil {
		var err error
		if dst, err = t.lr.listGet(t.low, order, key, dst); err != nil {
			return dst[:start], t.lowFailed(err), true
		}
	}
	nl := len(dst) - start - nf - ns
	if ns+nl > 0 {
		all := dst[start:]
		reverse(all)
		reverse(all[:nl])
		reverse(all[nl : nl+ns])
		reverse(all[nl+ns:])
	}
	if len(dst) > start {
		return dst, found, true
	}
	return dst, st, true
}

// MapGet returns the value of userKey (hash hu) in the map mapKey (hash hm) across the tiers.
func (t *tiers) MapGet(hm uint64, mapKey []byte, hu uint64, userKey []byte) ([]byte, status) {
	if v, st := t.f.MapGet(hm, mapKey, hu, userKey); st != absent {
		return v, st
	}
	order := t.orderOf(mapKey, hm)
	if v, st := t.sl.MapGet(order, mapKey, userKey); st != slice.Absent {
		return v, st
	}
	if t.low != nil {
		v, st, err := t.lr.mapGet(t.low, order, mapKey, userKey)
		if err != nil {
			return nil, t.lowFailed(err)
		}
		return v, st
	}
	return nil, absent
}

// lowFailed records a lower-tier read error for takeErr and returns the failed status. The
// error is already mapped to the Store's sentinels (lsmTier: ErrCorruption with its cause,
// ErrNoSpace, I/O errors as they are).
//
//go:noinline
func (t *tiers) lowFailed(err error) status {
	t.readErr = err
	return failed
}

// takeErr returns (and forgets) the error of the read that returned failed.
//
//go:noinline
func (t *tiers) takeErr() error {
	err := t.readErr
	t.readErr = nil
	if err == nil {
		panic("strata: invariant: a read failed without an error")
	}
	return err
}

// Seq returns the FreshTable's sequence number (every write advances it).
func (t *tiers) Seq() uint64 { return t.f.Seq() }

// ---- writes ----
//
// Every write first installs finished background work (one atomic load when there is none),
// then writes the FreshTable; a write refused for memory waits for background work and
// retries (backpressure); a write that rolled the active segment queues its transform.

func (t *tiers) Put(h uint64, key, value []byte) error {
	if err := t.before(); err != nil {
		return err
	}
	for {
		err := t.f.Put(h, key, value)
		if err == nil {
			break
		}
		if !t.backpressure(err) {
			return err
		}
	}
	if t.rc != nil && t.rc.n > 0 {
		t.rc.refresh(t.orderOf(key, h), key, value) // after the write: a failed Put changes nothing
	}
	t.after()
	return nil
}

func (t *tiers) Delete(h uint64, key []byte) error {
	if err := t.before(); err != nil {
		return err
	}
	t.dropRow(h, key)
	for {
		err := t.f.Delete(h, key)
		if err == nil {
			break
		}
		if !t.backpressure(err) {
			return err
		}
	}
	t.after()
	return nil
}

func (t *tiers) ListAppend(h uint64, key, batch []byte) error {
	if err := t.before(); err != nil {
		return err
	}
	for {
		err := t.f.ListAppend(h, key, batch)
		if err == nil {
			break
		}
		if !t.backpressure(err) {
			return err
		}
	}
	t.after()
	return nil
}

func (t *tiers) ListReplace(h uint64, key, batch []byte) error {
	if err := t.before(); err != nil {
		return err
	}
	for {
		err := t.f.ListReplace(h, key, batch)
		if err == nil {
			break
		}
		if !t.backpressure(err) {
			return err
		}
	}
	t.after()
	return nil
}

func (t *tiers) ListDelete(h uint64, key []byte) error {
	if err := t.before(); err != nil {
		return err
	}
	for {
		err := t.f.ListDelete(h, key)
		if err == nil {
			break
		}
		if !t.backpressure(err) {
			return err
		}
	}
	t.after()
	return nil
}

func (t *tiers) MapPut(hm uint64, mapKey []byte, hu uint64, userKey, value []byte) error {
	if err := t.before(); err != nil {
		return err
	}
	for {
		err := t.f.MapPut(hm, mapKey, hu, userKey, value)
		if err == nil {
			break
		}
		if !t.backpressure(err) {
			return err
		}
	}
	t.after()
	return nil
}

func (t *tiers) MapRemove(hm uint64, mapKey []byte, hu uint64, userKey []byte) error {
	if err := t.before(); err != nil {
		return err
	}
	for {
		err := t.f.MapRemove(hm, mapKey, hu, userKey)
		if err == nil {
			break
		}
		if !t.backpressure(err) {
			return err
		}
	}
	t.after()
	return nil
}

func (t *tiers) MapClear(hm uint64, mapKey []byte) error {
	if err := t.before(); err != nil {
		return err
	}
	for {
		err := t.f.MapClear(hm, mapKey)
		if err == nil {
			break
		}
		if !t.backpressure(err) {
			return err
		}
	}
	t.after()
	return nil
}

// dropRow forgets the row-cache copy of a value key about to be written (rowcache.go,
// invariant 2). Free while the cache is empty (no value was read from the lower tier).
func (t *tiers) dropRow(h uint64, key []byte) {
	if t.rc != nil && t.rc.n > 0 {
		t.rc.drop(t.orderOf(key, h), key)
	}
}

// before runs at the start of every write: it reports a background failure and installs
// finished background work.
func (t *tiers) before() error {
	if t.bgErr != nil && !t.retryNoSpace() {
		return t.bgErr
	}
	t.lr.reset()
	if t.ready.Load() != 0 {
		t.poll()
	}
	if t.l0Files >= t.l0Stop && t.db != nil {
		t.stallL0()
	}
	return nil
}

// stallL0 makes a writer wait while the LsmStore has Options.L0StopWrites L0 files or more,
// until an L0 compaction is installed (at most Options.BackpressureTimeout; then the write
// goes ahead: the stall bounds L0, it must not turn a slow disk into failed writes). Counted in
// Stats (L0Stalls, L0StallNanos).
//
//go:noinline
func (t *tiers) stallL0() {
	start := time.Now()
	t.l0Stalls++
	defer func() { t.l0StallNanos += int64(time.Since(start)) }()
	timer := time.NewTimer(t.bpTimeout)
	defer timer.Stop()
	for {
		t.install()
		if t.l0Files < t.l0Stop || t.bgErr != nil {
			return
		}
		if len(t.lsmJobs) == 0 {
			t.kickLSM()
			if len(t.lsmJobs) == 0 {
				return // nothing to wait for (levels busy or not due)
			}
		}
		select {
		case <-t.wake:
		case <-timer.C:
			return
		}
	}
}

// after runs after every successful write: when the FreshTable took a segment (a roll seals
// the previous one), the new sealed segments are queued for transform.
func (t *tiers) after() {
	if t.budget.UsedBy(memory.PurposeFreshData) != t.lastFresh {
		t.checkSealed()
	}
}

// seal seals the active segment and queues its transform (tests; backpressure).
func (t *tiers) seal() error {
	if err := t.f.Seal(); err != nil {
		return err
	}
	t.checkSealed()
	return nil
}

// Close waits for every background task (scheduler.Close), ends the jobs they leave (built
// slices are released, compactions and evictions cancelled), then closes the tiers and gives
// the reserve back to the budget.
func (t *tiers) Close() error {
	errs := []error{t.sched.Close()}
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
	for _, c := range t.compactions {
		errs = append(errs, t.sl.CancelCompaction(c.c))
	}
	t.compactions = nil
	if r := t.relocation; r != nil {
		errs = append(errs, t.sl.CancelRelocation(r.r))
		t.relocation = nil
	}
	for _, j := range t.lsmJobs {
		// Run has returned or never will (the scheduler is closed): InstallCompaction installs
		// or releases the job. An install now comes after the last persist point, so a reopen
		// does not see it either way.
		if err := t.db.InstallCompaction(j.j); err != nil && !errors.Is(err, lsm.ErrJobNotRun) && !errors.Is(err, context.Canceled) {
			errs = append(errs, lowerError(err))
		}
	}
	t.lsmJobs = nil
	if e := t.eviction; e != nil {
		errs = append(errs, t.sl.CancelEviction(e.e))
		if e.sink.pending != nil {
			t.low.Discard(e.sink.pending)
		}
		t.eviction = nil
	}
	errs = append(errs, t.sl.Close(), t.f.Close())
	if t.rc != nil {
		errs = append(errs, t.rc.close())
		t.rc = nil
	}
	if t.low != nil {
		errs = append(errs, t.low.Close())
	}
	t.budget.AddReserve(-t.reserve)
	t.epoch++
	return errors.Join(errs...)
}

// wrapBG wraps a background failure that is not a budget shortage; it sticks: later writes
// report it (the state read so far stays readable).
func wrapBG(what string, err error) error {
	return fmt.Errorf("strata: background %s failed: %w", what, err)
}

// mapIter iterates one map across the tiers: the FreshTable's entries first (as fresh.MapIter
// yields them); then, unless the FreshTable held a clear or delete of the map, the SliceTable's
// entries whose user key the FreshTable holds no record of; then, likewise, the lower tier's
// entries whose user key neither upper tier holds a record of. Each user key is decided by the
// newest tier that has a record for it, so it is yielded at most once.
//
// A user key of a lower tier written in the FreshTable during the iteration, before the
// iteration reaches it, is not yielded (the FreshTable's iteration covers the map as it was
// when it began, and the lower phases skip user keys the FreshTable now holds).
type mapIter struct {
	t     *tiers
	hm    uint64
	mk    []byte
	order uint64
	phase uint8 // 0 FreshTable, 1 SliceTable, 2 lower tier, 3 done
	open  bool  // counted in t.openIters
	epoch uint64
	fi    fresh.MapIter
	si    slice.MapIter
	low   []lowEntry
	li    int
	uk    []byte
	val   []byte
	err   error
}

// MapIter returns an iterator over the map mapKey (hash hm); mapKey must stay unchanged while
// it is used. It does not defer installs: call track for an iteration that spans writes.
func (t *tiers) MapIter(hm uint64, mapKey []byte) mapIter {
	return mapIter{t: t, hm: hm, mk: mapKey, epoch: t.epoch, fi: t.f.MapIter(hm, mapKey)}
}

// track counts the iteration as open, deferring installs until it ends (table.go, protocol
// item 4).
func (it *mapIter) track() {
	if !it.open && it.phase != 3 && it.err == nil {
		it.open = true
		it.t.openIters++
	}
}

// close ends the iteration's deferral of installs.
func (it *mapIter) close() {
	if it.open {
		it.open = false
		if it.epoch == it.t.epoch { // else an install reset the count already
			it.t.openIters--
		}
	}
	it.phase = 3
}

// live reports whether the tiers the iteration walks are unchanged since it began; when not,
// it records ErrIteratorInvalidated.
func (it *mapIter) live() bool {
	if it.epoch == it.t.epoch {
		return true
	}
	if it.err == nil {
		it.err = ErrIteratorInvalidated
	}
	it.close()
	return false
}

func (it *mapIter) Next() bool {
	if it.err != nil || it.phase == 3 || !it.live() {
		return false
	}
	t := it.t
	for {
		switch it.phase {
		case 0:
			if it.fi.Next() {
				it.uk, it.val = it.fi.UserKey(), it.fi.Value()
				return true
			}
			if err := it.fi.Err(); err != nil {
				it.err = err
				it.close()
				return false
			}
			if it.fi.Complete() {
				it.close()
				return false
			}
			it.order = t.orderOf(it.mk, it.hm)
			it.si = t.sl.MapIter(it.order, it.mk)
			it.phase = 1
		case 1:
			for it.si.Next() {
				uk := it.si.UserKey()
				if _, st := t.f.MapGet(it.hm, it.mk, hashUserKey(uk), uk); st != absent {
					continue
				}
				it.uk, it.val = uk, it.si.Value()
				return true
			}
			if err := it.si.Err(); err != nil {
				it.err = err
				it.close()
				return false
			}
			if it.si.Complete() || t.low == nil {
				it.close()
				return false
			}
			low, err := lowMapEntries(t.low, it.order, it.mk)
			if err != nil {
				it.err = err
				it.close()
				return false
			}
			it.low, it.li, it.phase = low, 0, 2
		case 2:
			for it.li < len(it.low) {
				e := it.low[it.li]
				it.li++
				if _, st := t.f.MapGet(it.hm, it.mk, hashUserKey(e.uk), e.uk); st != absent {
					continue
				}
				if _, st := t.sl.MapGet(it.order, it.mk, e.uk); st != slice.Absent {
					continue
				}
				it.uk, it.val = e.uk, e.val
				return true
			}
			it.close()
			return false
		default:
			return false
		}
	}
}

// UserKey and Value return the current entry (valid until the next write).
func (it *mapIter) UserKey() []byte { return it.uk }
func (it *mapIter) Value() []byte   { return it.val }
