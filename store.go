package strata

import (
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/strata-db/strata/internal/vfs"
	"github.com/strata-db/strata/lsm"
	"github.com/strata-db/strata/lsm/sstable"
	"github.com/strata-db/strata/memory"
	"github.com/strata-db/strata/slice"
)

// Store is the keyed state of one operator subtask: the states registered on it (value, list,
// map, reducing, aggregating), over the key groups in Options.KeyGroups.
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
// since the last Close but never damages the store. Checkpoints, the changelog and restore
// come in later issues.
type Store struct {
	dir     string
	opts    Options
	maxP    uint32 // Options.MaxParallelism
	kgStart uint32 // Options.KeyGroups.Start
	kgSpan  uint32 // Options.KeyGroups.End - Start
	budget  *memory.Budget
	pool    *memory.Pool
	t       *tiers
	closed  bool
	guard   guard

	states    map[string]*registration
	nextID    uint32
	persisted map[string]persistedState // the registry recovered by Open (nil: none)

	// Scratch buffers, reused by every operation (one goroutine at a time).
	kbuf    []byte    // composite key of the current operation
	ubuf    []byte    // encoded map user key
	vbuf    []byte    // encoded value or framed list batch
	bufs    [3][]byte // merge buffers (MergeNamespaces)
	present []int     // indices of present sources (MergeNamespaces)
}

// Open opens a Store over dir with opts. dir is created (with parents, mode 0o755) when it is
// missing; "" means in memory only: no LsmStore, no eviction (the state must fit the memory
// budget), and Close drops the state.
//
// With a directory, the Store keeps an LsmStore in dir/lsm and evicts its coldest slices there
// once they pass Options.EvictionWatermark, so the state may be many times the memory budget.
// Close persists the whole state; Open over a directory a Store was closed in recovers it: the
// LsmStore as of its last persist point (a Store that crashed, without Close, reopens to the
// state of its last Close, never to a damaged one), the registered states (registering a name
// again needs the same kind and codec types, ErrIncompatibleState otherwise), and the sequence
// numbers. Files are checked as they are read: damage gives ErrCorruption with its cause
// (ErrTruncated, ErrChecksum, ErrFormatVersion, ErrBadMagic) and the file and offset in the
// message.
//
// Errors: ErrInvalidOptions (wrapped, naming the field) from opts.Validate; I/O errors from
// creating dir; ErrMemoryBudget when the budget cannot hold the first segment and the block
// cache; ErrCorruption as above; ErrIncompatibleStore when the stored state was written with
// another MaxParallelism or key-group range; ErrLocked when another open Store, in this process
// or another, has dir (a directory is locked from Open to Close). A damaged directory is left as
// it was: Open deletes files only after a clean recovery.
func Open(dir string, opts Options) (*Store, error) { return open(dir, opts, nil) }

// open is Open with a hook that adjusts the tiers' options (tests: a lower tier, eviction
// settings, bucket bits).
func open(dir string, opts Options, adjust func(*tierOptions)) (s *Store, err error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	budget := opts.SharedBudget
	if budget == nil {
		budget = memory.NewBudget(opts.MemoryBudget)
	}
	pool, err := memory.NewPool(budget, opts.SegmentSize)
	if err != nil {
		return nil, fmt.Errorf("strata: open %q: %w", dir, err)
	}
	var cleanup []func() error
	defer func() {
		if err != nil {
			for i := len(cleanup) - 1; i >= 0; i-- {
				err = errors.Join(err, cleanup[i]())
			}
		}
	}()
	cleanup = append(cleanup, pool.Close)
	to := tierOptions{
		maxP:      opts.MaxParallelism,
		workers:   opts.BackgroundWorkers,
		bpTimeout: opts.BackpressureTimeout,
		l0Stop:    opts.L0StopWrites,
	}
	var reg *registry
	if dir != "" {
		lt, r, seq, err := openLSM(dir, opts, budget)
		if err != nil {
			return nil, err
		}
		cleanup = append(cleanup, lt.Close)
		reg = r
		_, rows, water := opts.budgetDefaults(budget.Limit())
		to.low, to.db, to.lowWater, to.evictWater = lt, lt.db, 1, water
		to.rowCache = rows
		to.evictBatch = min(max(water/4, slice.DefaultEvictionBatch), 64<<20)
		to.startSeq = seq
	}
	if adjust != nil {
		adjust(&to)
	}
	t, err := newTiers(pool, to)
	if err != nil {
		return nil, fmt.Errorf("strata: open %q: %w", dir, err)
	}
	cleanup = cleanup[:1] // the tiers own the lower tier now and close it
	s = &Store{
		dir:     dir,
		opts:    opts,
		maxP:    uint32(opts.MaxParallelism),
		kgStart: uint32(opts.KeyGroups.Start),
		kgSpan:  uint32(opts.KeyGroups.End - opts.KeyGroups.Start),
		budget:  budget,
		pool:    pool,
		t:       t,
		states:  make(map[string]*registration),
		nextID:  1,
		kbuf:    make([]byte, 0, 256),
		ubuf:    make([]byte, 0, 64),
		vbuf:    make([]byte, 0, 256),
	}
	if reg != nil {
		s.persisted, s.nextID = reg.states, reg.nextID
	}
	t.kick() // LSM compactions due after recovery
	return s, nil
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

// openLSM opens the LsmStore of a Store in dir (its block cache first) and reads its persist
// point: the state registry (nil for a new store) and the last persisted sequence number.
func openLSM(dir string, opts Options, budget *memory.Budget) (*lsmTier, *registry, uint64, error) {
	fs := opts.fs
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, 0, fmt.Errorf("strata: open %q: %w", dir, lowerError(err))
	}
	if err := syncParents(fs, dir); err != nil {
		return nil, nil, 0, fmt.Errorf("strata: open %q: %w", dir, lowerError(err))
	}
	lt := &lsmTier{}
	if size, _, _ := opts.budgetDefaults(budget.Limit()); size > 0 {
		c, err := sstable.NewCache(budget, size, 0)
		if err != nil {
			return nil, nil, 0, fmt.Errorf("strata: open %q: block cache of %d bytes: %w", dir, size, err)
		}
		lt.cache = c
	}
	db, err := lsm.Open(lsm.Options{FS: fs, Dir: filepath.Join(dir, "lsm"), Name: "lsm", Cache: lt.cache})
	if err != nil {
		if lt.cache != nil {
			lt.cache.Close()
		}
		return nil, nil, 0, fmt.Errorf("strata: open %q: %w", dir, lowerError(err))
	}
	lt.db = db
	seq, meta, ok := db.PersistedMeta()
	if !ok {
		return lt, nil, 0, nil
	}
	reg, err := decodeRegistry(meta)
	if err == nil && (reg.maxP != opts.MaxParallelism || reg.kgStart != opts.KeyGroups.Start || reg.kgEnd != opts.KeyGroups.End) {
		err = fmt.Errorf("%w: stored with MaxParallelism %d and key groups %v, opened with %d and %v",
			ErrIncompatibleStore, reg.maxP, KeyGroupRange{Start: reg.kgStart, End: reg.kgEnd},
			opts.MaxParallelism, *opts.KeyGroups)
	}
	if err != nil {
		return nil, nil, 0, errors.Join(fmt.Errorf("strata: open %q: %w", dir, err), lt.Close())
	}
	return lt, reg, seq, nil
}

// Close persists the Store's state, if it has a directory, and releases it. It waits for the
// background work to stop (no goroutine of the Store runs after it returns); with a directory
// it then moves every slice and FreshTable segment into the LsmStore and records a persist
// point holding the state registry (see persist.go), so that Open sees every acknowledged
// write; then it releases the Store's memory (segments, indices, slices, block cache) back to
// its budget and closes its files.
//
// When the disk is full (ErrNoSpace) Close fails and the Store stays open and readable, with
// nothing lost: free space and Close again. Any other failure to persist is returned too, but
// the Store is closed: the directory keeps the previous persist point (what the last Close
// persisted), which is what Open then recovers.
//
// Later operations on the Store or its states fail with ErrClosed, as does a second Close;
// list and map iterators report ErrClosed. Values decoded by aliasing codecs (Bytes) point into
// the released memory and must not be used after Close. Close must not run concurrently with
// other use of the Store.
func (s *Store) Close() error {
	if s.closed {
		return ErrClosed
	}
	s.guard.enter()
	defer s.guard.exit()
	var err error
	if s.t.db != nil {
		if err = s.t.flush(); err == nil {
			err = lowerError(s.t.db.Persist(s.t.f.Seq(), s.encodeRegistry()))
		}
		if err != nil {
			err = fmt.Errorf("strata: close %q: persisting the state: %w", s.dir, err)
			if errors.Is(err, ErrNoSpace) {
				return err
			}
		}
	}
	s.closed = true
	return errors.Join(err, s.t.Close(), s.pool.Close())
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
// map iterators end with ErrIteratorInvalidated if anything was installed. Errors: ErrClosed;
// ErrMemoryBudget when the transform at the head of the queue cannot get memory and no lower
// tier can take the segment; a background failure (ErrNoSpace, ErrCorruption, I/O errors)
// that writes would also report. Must not run concurrently with other use of the Store.
func (s *Store) WaitBackground() error {
	if s.closed {
		return ErrClosed
	}
	s.guard.enter()
	defer s.guard.exit()
	if err := s.t.before(); err != nil {
		return err
	}
	return s.t.idle()
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

// check validates a state operation on k: the Store is open and k belongs to it.
func (s *Store) check(k Key) error {
	if s.closed {
		return ErrClosed
	}
	if k.maxP != s.maxP || k.kg-s.kgStart > s.kgSpan {
		return s.keyGroupError(k)
	}
	return nil
}

//go:noinline
func (s *Store) keyGroupError(k Key) error {
	if k.maxP != s.maxP {
		return fmt.Errorf("%w: key made for MaxParallelism %d, store has %d", ErrKeyGroupOutOfRange, k.maxP, s.maxP)
	}
	return fmt.Errorf("%w: key group %d not in %v", ErrKeyGroupOutOfRange, k.kg, *s.opts.KeyGroups)
}

// Composite key of a record in the FreshTable (fresh treats it as opaque bytes):
//
//	+----------------+----------------+-----------------+-----------+-----------------+
//	| key group      | state id       | len(key)        | key bytes | namespace bytes |
//	| uint16 BE      | uint16 BE      | uvarint, 1..3 B | len(key)  | rest            |
//	+----------------+----------------+-----------------+-----------+-----------------+
//
// The key-group prefix keeps a key group a contiguous range once entries are sorted (slices,
// LSM files, key-group deletion); the length prefix keeps (key, namespace) unambiguous.
// Map user keys are not part of it: fresh nests them under this key.
func appendCompositeKey(dst []byte, k Key, id uint16) []byte {
	dst = append(dst, byte(k.kg>>8), byte(k.kg), byte(id>>8), byte(id))
	dst = binary.AppendUvarint(dst, uint64(len(k.b)))
	dst = append(dst, k.b...)
	return append(dst, k.ns...)
}

// compositeHash is the 64-bit hash fresh indexes the composite key by: the key hash, the
// namespace hash and the state id combined with a multiply-xorshift (the key and namespace
// hashes are already xxh3, so one mixing round suffices).
func compositeHash(k Key, id uint16) uint64 {
	h := k.kh ^ (k.nh+uint64(id))*0x9e3779b97f4a7c15
	h ^= h >> 32
	h *= 0xd6e8feb86659fd93
	h ^= h >> 32
	return h
}

// compose writes the composite key of (k, id) into the Store's key scratch buffer and returns
// it with its hash.
func (s *Store) compose(k Key, id uint16) ([]byte, uint64) {
	s.kbuf = appendCompositeKey(s.kbuf[:0], k, id)
	return s.kbuf, compositeHash(k, id)
}

// seal seals the FreshTable's active segment and queues its transform (tests: forces reads
// across segments and tiers).
func (s *Store) seal() error { return s.t.seal() }

// StoreStats describes the memory, contents and background work of a Store. Sizes are bytes.
// Go heap memory (registrations, scratch buffers) is not included.
type StoreStats struct {
	States         int   // registered states
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

	BudgetUsed    int64 // bytes reserved in the budget (shared budgets: all stores together)
	BudgetLimit   int64 // the budget's limit
	BudgetReserve int64 // bytes of the budget only background work may take (all stores)

	// The LsmStore (all zero for a Store in memory only). Evictions above count its L0
	// installs during operation; Close adds PersistFiles more.
	LSMFiles       int   // table files in all levels
	LSMBytes       int64 // bytes of those files
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
	// L0Stalls counts writes that waited because L0 had Options.L0StopWrites files or more;
	// L0StallNanos is the time they waited in total.
	L0Stalls     int64
	L0StallNanos int64
	PersistFiles int64 // L0 files Close wrote (tests: see flush)
	PersistNanos int64 // time Close spent moving the tiers into the LsmStore
}

// Stats returns a snapshot of the Store's statistics. On a closed Store it returns only
// States and the budget figures. O(buckets + segments).
func (s *Store) Stats() StoreStats {
	st := StoreStats{
		States:        len(s.states),
		BudgetUsed:    s.budget.Used(),
		BudgetLimit:   s.budget.Limit(),
		BudgetReserve: s.budget.Reserve(),
	}
	if s.closed {
		return st
	}
	t := s.t
	ts := t.f.Stats()
	st.Records = int64(ts.Records)
	st.Segments = int(ts.Segments)
	st.SealedSegments = int(ts.Sealed)
	st.SegmentBytes = int64(ts.Segments) * int64(s.opts.SegmentSize)
	st.DataBytes = int64(ts.DataBytes)
	st.IndexBytes = int64(ts.IndexBytes)
	ss := t.sl.Stats()
	st.Slices, st.SliceRuns, st.SliceBytes, st.MaxChain = ss.Slices, ss.Runs, ss.MemBytes, ss.MaxChain
	st.Transforms, st.TransformedBytes, st.TransformFails = t.transforms, t.transformedBytes, t.transformFails
	st.Compactions, st.Evictions, st.EvictedBytes = ss.Compactions, ss.Evictions, ss.EvictedBytes
	st.BackpressureWaits, st.BackpressureNanos, st.BackpressureFailures = t.bpWaits, t.bpNanos, t.bpFailures
	st.L0Stalls, st.L0StallNanos, st.Flushes, st.Relocations = t.l0Stalls, t.l0StallNanos, t.flushes, t.relocations
	st.PersistFiles, st.PersistNanos = t.flushedFiles, t.flushNanos
	if t.db != nil {
		m := t.db.Metrics()
		for _, l := range m.Levels {
			st.LSMFiles += l.Files
			st.LSMBytes += l.Bytes
		}
		st.L0Files = m.Levels[0].Files
		st.LSMCompactions = m.Compactions
		st.LSMIngestedBytes = m.BytesIngested
		st.LSMWrittenBytes = m.BytesFlushed + m.BytesCompacted
		st.WriteAmplification = m.WriteAmplification
	}
	if lt, ok := t.low.(*lsmTier); ok && lt.cache != nil {
		cs := lt.cache.Stats()
		st.BlockCacheBytes, st.BlockCacheHits, st.BlockCacheMisses = cs.Bytes, cs.Hits, cs.Misses
	}
	if rc := t.rc; rc != nil {
		st.RowCacheBytes, st.RowCacheHits, st.RowCacheMisses = int64(len(rc.mem)), t.rcHits, t.rcMisses
	}
	return st
}
