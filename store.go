package strata

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"

	"github.com/strata-db/strata/memory"
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
// Persistence: not yet. Open creates the directory but writes nothing into it, and Close
// drops the state; checkpoints, the changelog and restore come in later issues.
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

	states map[string]*registration
	nextID uint32

	// Scratch buffers, reused by every operation (one goroutine at a time).
	kbuf    []byte    // composite key of the current operation
	ubuf    []byte    // encoded map user key
	vbuf    []byte    // encoded value or framed list batch
	bufs    [3][]byte // merge buffers (MergeNamespaces)
	present []int     // indices of present sources (MergeNamespaces)
}

// Open opens a Store over dir with opts. dir is created (with parents, mode 0o755) when it is
// missing; "" means in memory only. Nothing is written to dir yet: persistence comes in a
// later issue, so today every Store starts empty and loses its state on Close.
//
// Open maps no segment yet beyond what the FreshTable needs to start. Errors: ErrInvalidOptions
// (wrapped, naming the field) from opts.Validate, an *os.PathError from creating dir,
// ErrMemoryBudget when the budget cannot hold the first segment.
func Open(dir string, opts Options) (*Store, error) { return open(dir, opts, nil) }

// open is Open with a hook that adjusts the tiers' options (tests: a lower tier, eviction
// settings, bucket bits).
func open(dir string, opts Options, adjust func(*tierOptions)) (*Store, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	if dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("strata: open %q: %w", dir, err)
		}
	}
	budget := opts.SharedBudget
	if budget == nil {
		budget = memory.NewBudget(opts.MemoryBudget)
	}
	pool, err := memory.NewPool(budget, opts.SegmentSize)
	if err != nil {
		return nil, fmt.Errorf("strata: open %q: %w", dir, err)
	}
	to := tierOptions{
		maxP:      opts.MaxParallelism,
		workers:   opts.BackgroundWorkers,
		bpTimeout: opts.BackpressureTimeout,
	}
	if adjust != nil {
		adjust(&to)
	}
	t, err := newTiers(pool, to)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("strata: open %q: %w", dir, err), pool.Close())
	}
	return &Store{
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
	}, nil
}

// Close waits for the Store's background work to stop (no goroutine of the Store runs after
// it returns), then releases the Store's memory (segments, indices, slices) back to its budget
// and drops all state. Later operations on the Store or its states fail with ErrClosed, as does a second
// Close; list and map iterators report ErrClosed. Values decoded by aliasing codecs (Bytes)
// point into the released memory and must not be used after Close. Close must not run
// concurrently with other use of the Store.
func (s *Store) Close() error {
	if s.closed {
		return ErrClosed
	}
	s.guard.enter()
	defer s.guard.exit()
	s.closed = true
	err := s.t.Close()
	return errors.Join(err, s.pool.Close())
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
	return st
}
