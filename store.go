package strata

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"sync"
	"time"

	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/internal/engine"
	"github.com/strata-db/strata/memory"
)

// Store is the keyed state of one operator subtask: the states registered on it (value, list,
// map, reducing, aggregating), over the key groups in Options.KeyGroups, and its operator
// state (operator list, union list and broadcast state, operator.go).
//
// Concurrency: a Store and its states are used by one goroutine at a time (the task's), like
// a Flink task thread; they keep per-store scratch buffers so that get and put allocate
// nothing. Hand a Store to another goroutine only with a happens-before edge (a channel send,
// a mutex). Builds with -race or the "invariants" tag panic on overlapping use from two
// goroutines. Background work (transforms of sealed segments into slices, compactions) runs
// on the Store's own workers and needs no locking by the caller: the Store's goroutine
// installs its results at its next write.
//
// Persistence: a Store with a directory keeps what does not fit its memory budget in an
// LsmStore there, and Close persists everything (Open recovers it); a crash loses the writes
// since the last Close but never damages the store. Checkpoints (StartCheckpoint) make the
// state durable in a checkpoint.Storage while the Store runs, and Restore brings it back into
// any key-group range (checkpointing.go).
//
// Failures of background work: a transform, eviction or compaction that fails for a reason
// that may pass — too many open files (EMFILE), an I/O error (EIO), a timeout — is retried
// after a backoff of 10 ms doubling to 1 s, and the Store keeps serving reads and writes
// meanwhile; writes do not fail with the error, but wait (backpressure, at most
// Options.BackpressureTimeout, then ErrMemoryBudget) if memory runs short because the work
// that frees it keeps failing. A full disk is the exception writes see: while the retry of
// work that failed with ENOSPC waits (a second), writes fail with ErrNoSpace and change
// nothing. Only damage (ErrCorruption) or a broken invariant stops the Store: every later
// write reports it. Stats counts the failures (BackgroundErrors, BackgroundRetries,
// LastBackgroundError).
type Store struct {
	dir     string
	opts    Options
	maxP    uint32 // Options.MaxParallelism
	kgStart uint32 // Options.KeyGroups.Start
	kgSpan  uint32 // Options.KeyGroups.End - Start
	budget  *memory.Budget
	e       *engine.Engine
	closed  bool
	// liveMaxP is maxP while the Store is open and ^0 (no Key's) once it is closed: check
	// tests both with one compare.
	liveMaxP uint32
	guard    guard
	meter    opMeter // the task side's cost accounting (cost.go)
	hot      hotTier // the hot tier (hot.go; Options.HotTierSize)

	// Checkpoints (checkpointing.go).
	epoch        uint64             // writer epoch of the lineage (a restore increments it); under fenceMu
	fenceMu      sync.Mutex         // epoch and fenceDue, which checkpoint uploads read and write
	fenceDue     bool               // restored, the older writers not fenced yet (checkpointing.go)
	fencePoint   uint64             // the newest checkpoint restored: the lineage goes on from it
	writerID     uint64             // the Store's writer id among its lineage's writers (0: never restored)
	pins         []uint64           // PinCheckpoint
	restored     []CheckpointHandle // the checkpoints Restore used
	restoredOwn  uint64             // the newest of them of the Store's own Owner (0: none)
	restoreStats RestoreStats

	states    map[string]*registration
	perRecord []stateBase  // states whose incremental TTL cleanup runs per record (RecordProcessed)
	clock     func() int64 // Options.Clock, or wallClock until the first TTL state, then the coarse clock
	coarse    bool         // clock is the default: the first TTL state switches it to the coarse clock
	unclock   func()       // releases the coarse clock's hold (nil: none held)
	// gcWall and gcClock anchor checkpoint GC's time on Options.Clock (gcNow): the wall
	// clock and Options.Clock read together at Open.
	gcWall    time.Time
	gcClock   int64
	nextID    uint32
	persisted map[string]engine.PersistedState // the registry recovered by Open (nil: none)
	// aliases are the state id aliases of the registry (internal/engine/registry.go, "State id
	// aliases"), by state name; nil: none. Replaced whole, never changed in place.
	aliases map[string][]engine.IDAlias

	// Operator state (operator.go, opstate.go): registered and restored states by name, and
	// the bytes charged for them to budget (memory.PurposeOperatorState).
	ops     map[string]*opState
	opBytes int64

	// Timer services (timers.go), registered or restored, by name (their queues are the
	// engine's).
	timers map[string]*timerCore

	// Scratch buffers, reused by every operation (one goroutine at a time).
	kbuf    []byte        // composite key of the current operation
	ubuf    []byte        // encoded map user key
	vbuf    []byte        // encoded value or framed list batch
	bat     *batchScratch // scratch of batched operations (batch.go); nil until the first
	bufs    [3][]byte     // merge buffers (MergeNamespaces)
	present []int         // indices of present sources (MergeNamespaces)
}

// Open opens a Store over dir with opts. dir is created (with parents, mode 0o755) when it is
// missing; "" means in memory only: no LsmStore, no eviction (the state must fit the memory
// budget), and Close drops the state.
//
// With a directory, the Store keeps an LsmStore in dir/lsm and evicts its coldest slices there
// once the budget lacks room for the FreshTable's next segment (or the slices pass
// Options.EvictionWatermark), so the state may be many times the memory budget.
// Close persists the whole state; Open over a directory a Store was closed in recovers it: the
// LsmStore as of its last persist point (a Store that crashed, without Close, reopens to the
// state of its last Close, never to a damaged one), the registered states (registering a name
// again needs the same kind and codec types, ErrIncompatibleState otherwise), and the sequence
// numbers. Files are checked as they are read: damage gives ErrCorruption with its cause
// (ErrTruncated, ErrChecksum, ErrFormatVersion, ErrBadMagic) and the file and offset in the
// message.
//
// Errors: ErrInvalidOptions (wrapped, naming the field) from opts.Validate; I/O errors from
// creating dir; ErrMemoryBudget when the budget cannot hold the first segment and, when the
// LsmStore already holds data, the block and row caches; ErrCorruption as above;
// ErrIncompatibleStore when the stored state was written with another MaxParallelism or
// key-group range; ErrLocked when another open Store, in this process or another, has dir (a
// directory is locked from Open to Close). A damaged directory is left as it was: Open deletes
// files only after a clean recovery.
func Open(dir string, opts Options) (s *Store, err error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	if dir != "" {
		if _, err := opts.fs.Stat(filepath.Join(dir, engine.RestoringMarker)); err == nil {
			return nil, fmt.Errorf("%w: %q (%s is present)", ErrRestoreIncomplete, dir, engine.RestoringMarker)
		}
	}
	eo, err := engineOptions(dir, &opts)
	if err != nil {
		return nil, err
	}
	e, rec, err := engine.Open(eo)
	if err != nil {
		return nil, fmt.Errorf("strata: open %q: %w", dir, err)
	}
	var reg *engine.Registry
	var regOps *engine.OpSnapshot
	if rec.OK {
		reg, regOps, err = decodeRegistry(rec.Meta)
		if err == nil && (reg.MaxParallelism != opts.MaxParallelism || reg.KeyGroups != *opts.KeyGroups) {
			err = fmt.Errorf("%w: stored with MaxParallelism %d and key groups %v, opened with %d and %v",
				ErrIncompatibleStore, reg.MaxParallelism, reg.KeyGroups,
				opts.MaxParallelism, *opts.KeyGroups)
		}
		if err != nil {
			return nil, errors.Join(fmt.Errorf("strata: open %q: %w", dir, err), e.Close())
		}
	}
	s = newStore(dir, opts, eo.Budget, e)
	if dir != "" {
		// A restored directory: the Store is the writer its Restore made (internal/engine/writerfile.go).
		w, ok, err := engine.ReadWriterFile(opts.fs, dir)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("strata: open %q: %w", dir, err), e.Close())
		}
		if ok {
			s.epoch, s.fencePoint, s.writerID, s.fenceDue = w.Epoch, w.Point, w.Writer, true
		}
	}
	if reg != nil {
		err := s.load(reg, regOps)
		if err == nil {
			err = e.LoadTimerFile(reg.TimerFile)
		}
		if err != nil {
			s.opCharge(-s.opBytes)
			return nil, errors.Join(fmt.Errorf("strata: open %q: %w", dir, err), e.Close())
		}
	}
	return s, nil
}

// engineOptions returns the engine's options for a Store over dir with opts (defaults
// applied; Open, Restore), its budget in Budget: opts.SharedBudget or a new one of
// opts.MemoryBudget. opts.adjust, when not nil, changes them last (tests). Errors:
// ErrInvalidOptions from the changelog's options.
func engineOptions(dir string, opts *Options) (engine.Options, error) {
	budget := opts.SharedBudget
	if budget == nil {
		budget = memory.NewBudget(opts.MemoryBudget)
	}
	eo := engine.Options{
		Dir:                 dir,
		FS:                  opts.fs,
		Budget:              budget,
		SegmentSize:         opts.SegmentSize,
		MaxParallelism:      opts.MaxParallelism,
		Workers:             opts.BackgroundWorkers,
		BackpressureTimeout: opts.BackpressureTimeout,
		L0StopWrites:        opts.L0StopWrites,
		MaxOpenFiles:        opts.MaxOpenFiles,
		KeyGroups:           *opts.KeyGroups,
		KeyGroupOfHash:      func(h int32) int { return AssignToKeyGroup(h, opts.MaxParallelism) },
	}
	if opts.Checkpoint.Storage != nil {
		eo.UploadWorkers = 1 // uploads must not queue behind compactions (BackgroundWorkers)
	}
	if dir != "" {
		eo.BlockCacheSize, eo.RowCacheSize, eo.EvictionWatermark, eo.EvictionRoom = opts.budgetDefaults(budget.Limit(), budget.Limit()-budget.Used()-budget.Reserve())
	}
	clo, err := changelogEngineOptions(opts, budget)
	if err != nil {
		return eo, err
	}
	eo.Changelog = clo
	if opts.adjust != nil {
		opts.adjust(&eo)
	}
	return eo, nil
}

// testHotTierDiv, when positive, turns the hot tier on at limit/testHotTierDiv for every
// Store whose options leave it off (tests: STRATA_TEST_HOT_TIER runs the suite with the tier).
var testHotTierDiv int64

// newStore returns the Store of opts (defaults applied) over the open engine e, charging
// budget, with nothing registered or recovered yet.
func newStore(dir string, opts Options, budget *memory.Budget, e *engine.Engine) *Store {
	s := &Store{
		dir:      dir,
		opts:     opts,
		maxP:     uint32(opts.MaxParallelism),
		liveMaxP: uint32(opts.MaxParallelism),
		kgStart:  uint32(opts.KeyGroups.Start),
		kgSpan:   uint32(opts.KeyGroups.End - opts.KeyGroups.Start),
		budget:   budget,
		e:        e,
		states:   make(map[string]*registration),
		ops:      make(map[string]*opState),
		nextID:   1,
		kbuf:     make([]byte, 0, 256),
		ubuf:     make([]byte, 0, 64),
		vbuf:     make([]byte, 0, 256),
		clock:    opts.Clock,
	}
	s.hot.limit, s.hot.judgeEvery = opts.HotTierSize, hotJudgeEvery
	if s.hot.limit == 0 && testHotTierDiv > 0 {
		s.hot.limit = budget.Limit() / testHotTierDiv
	}
	if s.clock == nil {
		s.clock, s.coarse = wallClock(), true
	} else {
		s.gcWall, s.gcClock = time.Now(), s.clock()
	}
	return s
}

// load takes the recovered (Open) or restored (Restore) registry reg and operator state ops
// (nil: none) as the Store's: the states it holds come back when registered again, the
// operator state is installed and charged (loadOps), and the timer services it names get
// their typed side (their queues are the engine's). Errors: loadOps's.
func (s *Store) load(reg *engine.Registry, ops *engine.OpSnapshot) error {
	s.persisted, s.nextID, s.aliases = reg.States, reg.NextID, reg.Aliases
	if ops != nil {
		if err := s.loadOps(ops); err != nil {
			return err
		}
	}
	for name, p := range reg.States {
		if p.Kind == kindTimerService {
			s.timerCore(name)
		}
	}
	return nil
}

// persistAll persists the Store (Close, Restore): the engine writes the timer file, then the
// persist point naming it with the registry and the operator state (persistMeta), and removes
// the timer files it does not name (engine.PersistAll). On error the previous persist point
// stands.
func (s *Store) persistAll() error { return s.e.PersistAll(s.persistMeta) }

// Close persists the Store's state, if it has a directory, and releases it. It waits for the
// background work to stop (no goroutine of the Store runs after it returns); with a directory
// it then moves every slice and FreshTable segment into the LsmStore and records a persist
// point holding the state registry (see persist.go), so that Open sees every acknowledged
// write; then it releases the Store's memory (segments, indices, slices, block cache) back to
// its budget and closes its files.
//
// Close persists whatever background work is doing: a compaction or eviction that keeps
// failing (too many open files, an I/O error) is no reason not to persist, since Close moves
// the tiers into the LsmStore itself. Nor is the checkpoint storage: with the changelog on,
// persists and materializations that its outage makes fail are retried, never sticky, and
// Close needs neither (the local state does not depend on the checkpoint storage). When persisting fails for a reason that may pass — a full
// disk (ErrNoSpace), too many open files, an I/O error (syscall.EMFILE, syscall.EIO, …) — Close
// returns the error and the Store stays open and readable, with nothing lost: fix the cause
// and Close again, or give up with Discard. Only damage (ErrCorruption) or a broken invariant,
// which stop the Store anyway, close it with the error: the directory then keeps the previous
// persist point (what the last Close persisted), which is what Open recovers.
//
// Later operations on the Store or its states fail with ErrClosed, as does a second Close;
// list and map iterators report ErrClosed. Values decoded by aliasing codecs (Bytes) point into
// the released memory and must not be used after Close. Close must not run concurrently with
// other use of the Store.
func (s *Store) Close() error {
	if s.closed {
		return ErrClosed
	}
	s.enter(opCall)
	defer s.exit()
	if err := s.hotErrCheck(); err != nil && engine.Transient(err) {
		// A fault that may pass: the Store stays open, the tier keeps its entries dirty.
		return fmt.Errorf("strata: close %q: %w", s.dir, err)
	}
	err := s.hotErrCheck() // damage: the Store closes with it, as when the persist meets it
	s.hotDiscard()         // written back, or given up with the damaged Store
	if err == nil && s.e.HasDisk() {
		if err = s.persistAll(); err != nil {
			err = fmt.Errorf("strata: close %q: persisting the state: %w", s.dir, err)
			if engine.Transient(err) {
				return err
			}
		}
	}
	s.closed, s.liveMaxP = true, ^uint32(0)
	s.opCharge(-s.opBytes)
	err = errors.Join(err, s.e.Close()) // the timer queues' memory too
	s.releaseClock()
	return err
}

// Discard releases the Store without persisting anything: the writes since the last Close that
// succeeded are dropped, and the directory keeps that Close's persist point, which is what Open
// recovers — as if the process had died. Use it to give up on a Store whose Close keeps failing
// for a fault that does not pass (a disk that does not come back), or to drop a Store in memory
// only without the cost of Close's persist. Like Close, it waits for the background work, frees
// the Store's memory back to its budget, closes its files and releases the directory's lock;
// later operations fail with ErrClosed. Errors: ErrClosed on a closed Store; errors from
// releasing files. Must not run concurrently with other use of the Store.
func (s *Store) Discard() error {
	if s.closed {
		return ErrClosed
	}
	s.hotDiscard() // dropped, not written back (before enter, which would write it back)
	s.enter(opCall)
	defer s.exit()
	s.closed, s.liveMaxP = true, ^uint32(0)
	s.opCharge(-s.opBytes)
	err := s.e.Close()
	s.releaseClock()
	return err
}

// WaitBackground waits until the background work queued so far has finished and installs it:
// the transforms of sealed segments into the SliceTable (or their flushes to L0), slice
// compactions, relocations, evictions to the LsmStore and LSM compactions, including the work
// those installs make due. The active segment is not sealed. A Store installs finished work at
// its next write; a read-only phase (a benchmark after loading, a query-only operator) keeps
// reading the sealed segments until then, so call WaitBackground after a bulk load, as one
// compacts RocksDB after a restore. It blocks the caller (the owner) until the work is done.
//
// Like a write, it ends the validity of values and list iterators read before it, and open
// map iterators end with ErrIteratorInvalidated if anything was installed. Work that failed
// for a reason that may pass is retried on its backoff and waited for. Errors: ErrClosed;
// ErrMemoryBudget when the transform at the head of the queue cannot get memory and no lower
// tier can take the segment; ErrCorruption (or a broken invariant) that stopped the Store;
// ErrNoSpace while a full disk's retry waits; the failure (an I/O error such as EMFILE or
// EIO) of work still failing after Options.BackpressureTimeout of retries — the Store stays
// usable and the work stays scheduled. Must not run concurrently with other use of the Store.
func (s *Store) WaitBackground() error {
	if s.closed {
		return ErrClosed
	}
	s.enter(opCall)
	defer s.exit()
	if err := s.hotErrCheck(); err != nil {
		return err
	}
	return s.e.WaitBackground()
}

// gcNow is checkpoint GC's current time when Options.Clock is set: the wall clock at Open
// advanced by the time Options.Clock has advanced since (clamped at 0 if it went back, and at
// about 292 years). The storage dates objects on its own (wall) clock, so the Store's clock
// is compared with it through its elapsed time, never its epoch: a test clock that starts at
// 0 (Flink's ManualClock) or an event-time clock years behind still ages objects by how far
// it moved, instead of keeping every object until it caught up with the wall clock.
func (s *Store) gcNow() time.Time {
	d := s.clock() - s.gcClock
	d = min(max(d, 0), int64(math.MaxInt64/time.Millisecond))
	return s.gcWall.Add(time.Duration(d) * time.Millisecond)
}

// CompactAll compacts every tier down and applies TTL compaction cleanup to all the data, as
// RocksDB's compactRange over the whole key space (which Flink's tests call to make the
// compaction filter run): the FreshTable's active segment is sealed and turned into slices,
// each bucket's chain of slices is merged into one run, and the LsmStore is compacted into
// its last level. Expired values, map entries and list elements of states with a TTL whose
// Cleanup compacts (TTLCleanup) are dropped, or reduced to a tombstone where older data may
// lie in a lower tier (counted in Stats.TTL.CompactionEntries). The work runs on the calling
// goroutine after the background work queued so far, and takes as long as rewriting the state
// does. Errors: ErrClosed, a sticky background failure, ErrMemoryBudget when a chain's merged
// copy does not fit the budget beside it (that chain is left as it was), the LsmStore's I/O
// errors, ctx's (checked between buckets). Use from the Store's goroutine only.
func (s *Store) CompactAll(ctx context.Context) error {
	if s.closed {
		return ErrClosed
	}
	s.enter(opCall)
	defer s.exit()
	if err := s.hotErrCheck(); err != nil {
		return err
	}
	if err := s.e.CompactAll(ctx); err != nil {
		return fmt.Errorf("strata: compact all: %w", err)
	}
	return nil
}

// Evict starts moving the coldest slices down to the LsmStore now, as memory pressure would,
// and reports whether an eviction is running (started now or already in flight); an operator
// sheds memory before a known burst with it, as one calls Pebble's Flush. It does not wait:
// the eviction is installed at a later write or WaitBackground, after which Stats shows it
// (Slices.Evictions, Slices.Bytes), and Evict may be called again while Slices.Count > 0 to
// evict everything. false with a nil error: nothing to evict — a Store in memory only, no
// slices, a failed eviction waiting for its retry's backoff. Errors: ErrClosed; the failure
// (ErrCorruption or a broken invariant) that stopped the Store's background work. Must not run
// concurrently with other use of the Store.
func (s *Store) Evict() (bool, error) {
	if s.closed {
		return false, ErrClosed
	}
	s.enter(opCall)
	defer s.exit()
	ok, err := s.e.Evict()
	if err != nil {
		return false, fmt.Errorf("strata: evict: %w", err)
	}
	return ok, nil
}

// Check verifies the row cache (Options.RowCacheSize) in place, as Pebble's CheckLevels
// verifies the LSM: the structure of every set (internal/engine/rowcache.go, invariants 5 and
// 6: entry words dense, each entry's units inside its set and disjoint from the others',
// sized for its key and value, filed in the set and under the tag of its key's hash, the count
// of entries and each set's summary right), and every cached value against a read of its key
// through the tiers with the cache bypassed: the newest version there must be that value —
// except an expired TTL value, which compaction cleanup may remove below the cache and which
// a read never returns. It changes nothing and keeps values read before valid; it costs a
// point read per entry (Stats.Caches.RowEntries of them). nil for a Store without a row cache.
// Errors: ErrClosed; a broken invariant ("strata: invariant: row cache …", the key and values
// in hex); ErrCorruption and I/O errors of the LsmStore's reads; the failure of a lazy
// restore's changelog tail. Must not run concurrently with other use of the Store.
func (s *Store) Check() error {
	if s.closed {
		return ErrClosed
	}
	s.enter(opCall)
	defer s.exit()
	if err := s.e.CheckRowCacheReads(); err != nil {
		return fmt.Errorf("strata: check: %w", err)
	}
	return nil
}

// Dir returns the directory given to Open ("" for in memory only).
func (s *Store) Dir() string { return s.dir }

// MaxParallelism returns the number of key groups (Options.MaxParallelism after defaults).
func (s *Store) MaxParallelism() int { return int(s.maxP) }

// KeyGroups returns the key-group range the Store owns (Options.KeyGroups after defaults).
func (s *Store) KeyGroups() KeyGroupRange { return *s.opts.KeyGroups }

// Budget returns the memory budget the Store maps through: Options.SharedBudget, or the
// Store's own budget of Options.MemoryBudget bytes.
func (s *Store) Budget() *Budget { return s.budget }

// check validates a state operation on k: the Store is open and k belongs to it. One compare
// covers both (liveMaxP is no Key's MaxParallelism once the Store is closed), so check inlines.
func (s *Store) check(k Key) error {
	if k.maxP != s.liveMaxP || k.kg-s.kgStart > s.kgSpan {
		return s.keyGroupError(k)
	}
	return nil
}

// keyGroupError is check's error: ErrClosed, or ErrKeyGroupOutOfRange with the reason.
//
//go:noinline
func (s *Store) keyGroupError(k Key) error {
	if s.closed {
		return ErrClosed
	}
	if s.hot.err != nil {
		return s.hotErrCheck()
	}
	if k.maxP != s.maxP {
		return fmt.Errorf("%w: key made for MaxParallelism %d, store has %d", ErrKeyGroupOutOfRange, k.maxP, s.maxP)
	}
	return fmt.Errorf("%w: key group %d not in %v", ErrKeyGroupOutOfRange, k.kg, *s.opts.KeyGroups)
}

// compose writes the composite key of (k, id) into the Store's key scratch buffer and returns
// it with its hash.
func (s *Store) compose(k Key, id uint16) ([]byte, uint64) {
	s.kbuf = base.AppendCompositeKey(s.kbuf[:0], uint16(k.kg), id, k.b, k.ns)
	return s.kbuf, base.CompositeHash(k.kh, k.nh, id)
}

// seal seals the FreshTable's active segment and queues its transform (tests: forces reads
// across segments and tiers), after writing the hot tier back so the tiers hold every write.
func (s *Store) seal() error {
	if err := s.syncHot(); err != nil {
		return err
	}
	return s.e.Seal()
}

// Stats returns a snapshot of the Store's statistics and cost accounting (Stats). On a
// closed Store it returns only States and the budget figures. O(buckets + segments + slices
// + table files), and one getrusage system call. Owner goroutine only.
func (s *Store) Stats() Stats {
	if s.closed {
		return Stats{States: len(s.states), Budget: budgetStats(s.budget, 0)}
	}
	e := s.e.Stats()
	e.States = len(s.states)
	st := statsOf(&e)
	st.Budget = budgetStats(s.budget, e.EvictionRoom)
	s.meter.taskStats(&st, &e)
	st.HotTier = s.hotStats()
	st.LazyRestore = LazyRestoreStats(s.e.LazyStats())
	return st
}

// Lookup outcomes of the engine, by their short names.
type status = engine.Status

const (
	absent = engine.Absent
	found  = engine.Found
	failed = engine.Failed
)

// begin is the preamble of every keyed state operation: it enters the misuse guard, checks that
// the Store is open and owns k's key group, and composes k's key for state id into the key
// scratch buffer (valid until the next begin or compose). The caller exits the guard
// (s.guard.exit) whatever the outcome, and wraps a returned error with the state's name.
func (s *Store) begin(k Key, id uint16) ([]byte, uint64, error) {
	s.enter(opCall)
	if err := s.check(k); err != nil {
		return nil, 0, err
	}
	key, h := s.compose(k, id)
	return key, h, nil
}

// beginHot is begin for a point operation of a state that goes through its hot table (hot.go,
// H1): it does not write the hot tier back.
func (s *Store) beginHot(k Key, id uint16) ([]byte, uint64, error) {
	s.enter(opHot)
	if err := s.check(k); err != nil {
		return nil, 0, err
	}
	key, h := s.compose(k, id)
	return key, h, nil
}

// apply hands one state change to the engine's single write path (engine.Apply): key is a
// composite key with hash h, uk the encoded map user key (OpMapPut, OpMapRemove only), value
// the encoded value or framed list batch. Every write of every state goes through here or
// through the hot tier (hot.go), and this drops the hot entry the write changes (H1).
func (s *Store) apply(kind engine.OpKind, key []byte, h uint64, uk, value []byte) error {
	if s.hot.tabs != nil {
		if err := s.hotInvalidate(kind, key, h, uk); err != nil {
			return err
		}
	}
	return s.applyRaw(kind, key, h, uk, value)
}

// applyRaw is apply without the hot tier's invalidation: the tier's own write-back.
func (s *Store) applyRaw(kind engine.OpKind, key []byte, h uint64, uk, value []byte) error {
	op := engine.Op{Kind: kind, Hash: h, Key: key, Value: value}
	if kind == engine.OpMapPut || kind == engine.OpMapRemove {
		op.UserKey, op.UserHash = uk, base.HashUserKey(uk)
	}
	return s.e.Apply(op)
}
