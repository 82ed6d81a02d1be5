package slice

import (
	"bytes"
	"fmt"
	"time"

	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/internal/invariants"
)

// Status is the outcome of a lookup in the SliceTable: base.Status, shared
// with the FreshTable and the read path (Absent: lower tiers may hold the
// key; Found: returned; Deleted: a tombstone or a cleared map shadows lower
// tiers).
type Status = base.Status

// The statuses, as base defines them.
const (
	Absent  = base.Absent
	Found   = base.Found
	Deleted = base.Deleted
)

// Defaults of Options (doc.go explains how they were chosen).
const (
	DefaultBucketBits          = 10
	DefaultCompactionThreshold = 4
	DefaultEvictionBatch       = 4 << 20
	DefaultHeatHalfLife        = time.Minute
	DefaultMaxListMerge        = base.MaxListPiece
)

// Options configures a Table. The zero value of every field but Allocator
// means its default.
type Options struct {
	// Allocator is required: slices' blocks and oversized regions.
	Allocator *Allocator
	// BucketBits is log2 of the number of buckets, 0..16; a bucket is the
	// range of order hashes with the same top BucketBits bits. Default
	// DefaultBucketBits (1024 buckets); -1 means one bucket (tests).
	BucketBits int
	// CompactionThreshold is the chain length (runs) above which
	// PickCompaction proposes to merge a chain. Default
	// DefaultCompactionThreshold, measured (doc.go).
	CompactionThreshold int
	// HighWatermark is the memory held by the table's slices, in bytes,
	// above which PickEviction proposes work. 0 disables eviction.
	HighWatermark int64
	// EvictionBatch is the bytes of slices one eviction job collects (it
	// may exceed it by one slice). Default DefaultEvictionBatch (4 MiB).
	EvictionBatch int64
	// HeatHalfLife is the time in which a slice's hit count decays by
	// half for the hot/cold score. Default DefaultHeatHalfLife (1 min).
	HeatHalfLife time.Duration
	// MaxListMerge bounds the bytes of a list piece that compaction joins
	// (base.Resolver.MaxList, rule 4): a longer list stays a chain of
	// pieces of at most this size. Default DefaultMaxListMerge
	// (base.MaxListPiece, 1 MiB), clamped to MaxValueSize.
	MaxListMerge int
	// LowerTier says a tier below (the LSM store) may hold data of this
	// table, so compaction keeps tombstones even at the end of a chain.
	// The table also assumes it from its first eviction on.
	LowerTier bool
	// NewFilter, if set, returns the base.Filter of one memory compaction
	// (base.Resolver.Filter: keep, drop or rewrite each resolved entry, rule
	// 7), called once per job on the job's goroutine, so it must be safe for
	// concurrent use; bottom says the job's inputs end their chain with no
	// lower tier below (Compaction drops tombstones then). A nil result, or a
	// nil NewFilter, filters nothing. The TTL cleanup drops expired data with
	// it (base.TTLFilter). The entries it sees carry Hash and UserHash 0: a
	// compaction does not recompute them (newMergeIter), so a filter must
	// decide by Order, Key, UserKey, Seq, Kind and Value.
	//
	// sweep says the job is a TTL sweep (PickExpired), so that its removals
	// can be counted apart.
	NewFilter func(bottom, sweep bool) base.Filter
	// Expiry, if set, adds an entry's TTL data to the summary of the slice
	// being built (base.TTLTable.Note), on the building job's goroutine (safe
	// for concurrent use). PickExpired picks the runs it says hold expired
	// data; nil: no slice holds any (PickExpired finds nothing).
	Expiry func(x *base.Expiry, e *base.Entry)
	// LowerHolds, if set, reports whether the tier below may hold data with
	// order hashes in [lo, hi] now (owner goroutine). PickExpired asks it for
	// a run that ends its chain, to drop expired data outright rather than
	// leave tombstones; nil: the LowerTier rule (something may lie below).
	LowerHolds func(lo, hi uint64) bool
	// Now is the clock for slice ages (monotonic); default: time since New.
	// Tests inject a manual clock. Read on installs and picks only.
	Now func() time.Duration
}

// Validate returns ErrOptions naming the first bad field, or nil.
func (o Options) Validate() error {
	switch {
	case o.Allocator == nil:
		return fmt.Errorf("%w: Options.Allocator is required", ErrOptions)
	case o.BucketBits < -1 || o.BucketBits > 16:
		return fmt.Errorf("%w: Options.BucketBits %d outside [-1, 16]", ErrOptions, o.BucketBits)
	case o.CompactionThreshold < 0:
		return fmt.Errorf("%w: Options.CompactionThreshold %d < 0", ErrOptions, o.CompactionThreshold)
	case o.HighWatermark < 0:
		return fmt.Errorf("%w: Options.HighWatermark %d < 0", ErrOptions, o.HighWatermark)
	case o.EvictionBatch < 0:
		return fmt.Errorf("%w: Options.EvictionBatch %d < 0", ErrOptions, o.EvictionBatch)
	case o.HeatHalfLife < 0:
		return fmt.Errorf("%w: Options.HeatHalfLife %v < 0", ErrOptions, o.HeatHalfLife)
	case o.MaxListMerge < 0:
		return fmt.Errorf("%w: Options.MaxListMerge %d < 0", ErrOptions, o.MaxListMerge)
	}
	return nil
}

func (o *Options) fill() {
	switch o.BucketBits {
	case 0:
		o.BucketBits = DefaultBucketBits
	case -1:
		o.BucketBits = 0
	}
	if o.CompactionThreshold == 0 {
		o.CompactionThreshold = DefaultCompactionThreshold
	}
	if o.EvictionBatch == 0 {
		o.EvictionBatch = DefaultEvictionBatch
	}
	if o.HeatHalfLife == 0 {
		o.HeatHalfLife = DefaultHeatHalfLife
	}
	if o.MaxListMerge == 0 {
		o.MaxListMerge = DefaultMaxListMerge
	}
	// A resolved list is one value: past MaxValueSize Build would refuse
	// it (ErrEntry) and the compaction would fail every time it is tried.
	o.MaxListMerge = min(o.MaxListMerge, MaxValueSize)
	if o.Now == nil {
		start := time.Now()
		o.Now = func() time.Duration { return time.Since(start) }
	}
}

// run is a sorted sequence of slices with disjoint, ascending key ranges
// (one Build's or one compaction's output for one bucket).
type run struct {
	slices []*Slice
	maxs   []uint64 // maxs[i] = slices[i].maxOrder: first's search array (index sets it)
	lo     uint64   // slices[0].minOrder
	scale  float64  // len(slices) / (maxs[last] - lo), or 0: first's interpolation
	id     uint64   // unique per table, to find a job's runs again
	minSeq uint64
	maxSeq uint64
	filter runFilter // the order hashes it held at install (filter.go, invariant 17); nil: none
}

// chain is one bucket: its runs, newest first.
type chain struct {
	runs []run
}

// Table is the SliceTable of one store: 2^BucketBits buckets, each a chain
// of runs of immutable slices, newest first. A Table is NOT safe for
// concurrent use: the owner goroutine (the task's) calls every method,
// except Build, Compaction.Run, Eviction.Run and Relocation.Run, which
// background jobs may call concurrently (doc.go, "Concurrency"), and the
// methods of a Snapshot it returned, which any goroutine may call until
// ReleaseSnapshot (doc.go, "Snapshots").
type Table struct {
	a       *Allocator
	opts    Options
	shift   uint // 64 - bucket bits: bucket = order >> shift
	buckets []chain
	nextID  uint64
	gen     uint64 // bumped whenever slices are freed (MapIter checks it)
	evicted bool   // some data went to the lower tier
	sink    uint64 // bytes touched by PrefetchBatch and offsetHint (kept so the loads stay)
	closed  bool

	// mapSearches counts the slices searched for a map's records (Stats.MapSearches).
	mapSearches int64
	// filterBytes is the bytes of the runs' filters (Stats.FilterBytes); filterSkips the
	// runs a point read skipped by them (Stats.FilterSkips).
	filterBytes, filterSkips int64

	bySeg map[*aseg][]*Slice // installed block slices by segment (Slice.segPos)
	reloc *Relocation        // the pending relocation, if any
	// relocSegs is the number of segments one relocation may empty
	// (relocSegs, the constant; tests that follow one slice set 1).
	relocSegs int

	// Snapshots (snapshot.go, invariant 16): while snaps is not empty,
	// release defers blocks to deferred instead of freeing them.
	snaps       []*Snapshot // open snapshots
	deferred    []blockRef  // releases deferred while snapshots are open
	pinnedBytes int64       // memory of deferred

	slices   int
	runs     int
	memBytes int64
	entries  int64

	compactions   int64
	compactedIn   int64
	compactedOut  int64
	evictions     int64
	evictedSlices int64
	evictedBytes  int64

	relocations     int64
	relocatedSlices int64
}

// New returns an empty Table. Errors: ErrOptions (from Validate).
func New(opts Options) (*Table, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts.fill()
	return &Table{
		a:       opts.Allocator,
		opts:    opts,
		shift:   uint(64 - opts.BucketBits),
		buckets: make([]chain, 1<<opts.BucketBits),
		bySeg:   make(map[*aseg][]*Slice),

		relocSegs: relocSegs,
	}, nil
}

// Buckets returns the number of buckets (a power of two).
func (t *Table) Buckets() int { return len(t.buckets) }

// Runs returns the number of runs in all chains. O(1); owner goroutine only.
func (t *Table) Runs() int { return t.runs }

// BucketOf returns the bucket of an order hash: its top BucketBits bits.
func (t *Table) BucketOf(order uint64) int { return int(order >> t.shift) }

// Install prepends the slices of one Build, in the order Build returned
// them, to their buckets' chains: the slices of each bucket become one new
// run, the newest. The caller installs Builds in the order of their data
// (a transform of an older sealed segment before a newer one).
//
// Errors (nothing is installed): ErrSeqOrder when a run would not be newer
// than its chain (invariant 6), ErrJob for a slice already installed or
// not from t's allocator, ErrUnsorted when the slices are not in Build's
// order, base.ErrClosed. Owner goroutine only.
func (t *Table) Install(slices []*Slice) error {
	if t.closed {
		return base.ErrClosed
	}
	// Validate everything first, then mutate: an error installs nothing.
	for i, s := range slices {
		if invariants.Enabled {
			if err := validate(s.buf); err != nil {
				panic(fmt.Sprintf("strata: invariant: slice: install of slice %d: %v", i, err))
			}
		}
		if s.table != nil || s.ref == (blockRef{}) {
			return fmt.Errorf("%w: slice %d already installed or not built by this table", ErrJob, i)
		}
		b := t.BucketOf(s.minOrder)
		if b != t.BucketOf(s.maxOrder) {
			return fmt.Errorf("%w: slice %d spans buckets", ErrUnsorted, i)
		}
		if i > 0 && slices[i-1].maxOrder > s.minOrder {
			return fmt.Errorf("%w: slice %d starts before slice %d ends", ErrUnsorted, i, i-1)
		}
		if i > 0 && t.BucketOf(slices[i-1].minOrder) == b {
			continue
		}
		var lo uint64 = ^uint64(0)
		for _, x := range slices[i:] {
			if t.BucketOf(x.minOrder) != b {
				break
			}
			lo = min(lo, x.minSeq)
		}
		if c := &t.buckets[b]; len(c.runs) > 0 && lo <= c.runs[0].maxSeq {
			return fmt.Errorf("%w: bucket %d: new run's oldest seq %d, chain's newest %d",
				ErrSeqOrder, b, lo, c.runs[0].maxSeq)
		}
	}
	now := int64(t.opts.Now())
	for i := 0; i < len(slices); {
		b := t.BucketOf(slices[i].minOrder)
		j := i + 1
		for j < len(slices) && t.BucketOf(slices[j].minOrder) == b {
			j++
		}
		r := t.newRun(slices[i:j:j], b, now)
		c := &t.buckets[b]
		c.runs = append(c.runs, run{})
		copy(c.runs[1:], c.runs)
		c.runs[0] = r
		i = j
	}
	return nil
}

// newRun adopts slices as a run of bucket b, born at now.
func (t *Table) newRun(slices []*Slice, b int, now int64) run {
	t.nextID++
	r := run{slices: append([]*Slice(nil), slices...), id: t.nextID, minSeq: ^uint64(0), filter: filterFor(t.a, slices)}
	r.index()
	if r.filter != nil {
		t.filterBytes += int64(len(r.filter)) * 8
	}
	for _, s := range slices {
		s.table, s.bucket = t, b
		if s.born == 0 {
			s.born, s.fold = now, now
		}
		r.minSeq, r.maxSeq = min(r.minSeq, s.minSeq), max(r.maxSeq, s.maxSeq)
		t.slices++
		t.memBytes += int64(s.mem)
		t.entries += int64(s.count)
		t.index(s)
	}
	t.runs++
	return r
}

// dropFilter refunds run r's filter as r leaves the table.
func (t *Table) dropFilter(r *run) {
	if r.filter != nil {
		r.filter.release(t.a)
		t.filterBytes -= int64(len(r.filter)) * 8
		r.filter = nil
	}
}

// free returns a slice's memory; the owner calls it when the slice has
// left the table (or never joined it).
func (t *Table) free(s *Slice) {
	if s.table == t {
		t.slices--
		t.memBytes -= int64(s.mem)
		t.entries -= int64(s.count)
		t.unindex(s)
		s.table = nil
	}
	if s.moving {
		// A relocation's Run may be reading the block: it is released
		// when the relocation ends.
		s.dropped = true
		return
	}
	t.release(s.ref)
	s.ref = blockRef{}
	s.buf, s.fps, s.offs, s.count = nil, nil, nil, 0
}

// index files an installed slice under its segment (PickRelocation).
func (t *Table) index(s *Slice) {
	if g := s.ref.seg; g != nil {
		l := t.bySeg[g]
		s.segPos = len(l)
		t.bySeg[g] = append(l, s)
	}
}

// unindex undoes index.
func (t *Table) unindex(s *Slice) {
	g := s.ref.seg
	if g == nil {
		return
	}
	l := t.bySeg[g]
	if s.segPos >= len(l) || l[s.segPos] != s {
		panic("strata: invariant: a slice is missing from its segment's index")
	}
	last := l[len(l)-1]
	l[s.segPos], last.segPos = last, s.segPos
	l[len(l)-1] = nil
	if l = l[:len(l)-1]; len(l) == 0 {
		delete(t.bySeg, g)
	} else {
		t.bySeg[g] = l
	}
}

// freeBusy frees the slices of a job that ended after Close.
func (t *Table) freeBusy(slices []*Slice) {
	for _, s := range slices {
		if s.busy {
			s.busy = false
			t.free(s)
		}
	}
}

// Release frees slices that were built but will not be installed (for
// example a transform cancelled after Build). Owner goroutine only.
func (t *Table) Release(slices []*Slice) {
	for _, s := range slices {
		if s.table == nil {
			t.free(s)
		}
	}
}

// Get returns the newest key-level version of key (order hash order) in
// the chain of its bucket: the value and Found for a value (or a list's
// newest batch), nil and Deleted for a tombstone, Absent when no slice
// holds the key. Map entries are not key-level (use MapGet). The value
// aliases slice memory: valid until the next InstallCompaction,
// InstallEviction, InstallRelocation or Close. Allocation-free; owner goroutine only.
func (t *Table) Get(order uint64, key []byte) ([]byte, Status) {
	c := &t.buckets[order>>t.shift]
	for ri := range c.runs {
		r := &c.runs[ri]
		if !r.filter.mayHold(order) {
			t.filterSkips++
			continue
		}
		for si := r.first(order); si < len(r.slices); si++ {
			s := r.slices[si]
			if s.minOrder > order {
				break
			}
			t.sink += uint64(s.offsetHint(order))
			for i := s.seekKey(order, key); i < s.count && s.fps[i] == order; i++ {
				val, kind, out := s.keyLevel(i, key)
				if out == recStop {
					break
				}
				if out == recSkip {
					continue // a map entry with an empty user key
				}
				s.hits++
				if kind == base.KindTombstone {
					return nil, Deleted
				}
				return val, Found
			}
		}
	}
	return nil, Absent
}

// ListGet appends the batches of the list key (order hash order) that the
// chain holds to dst, oldest first, and reports whether they are complete:
// true when a base batch or a tombstone was reached (lower tiers must not
// be consulted), false when only appended batches (merge operands) or
// nothing was found, so older batches may lie below. Batches alias slice
// memory (valid as Get's). Allocation-free while dst has capacity; owner
// goroutine only.
func (t *Table) ListGet(order uint64, key []byte, dst [][]byte) ([][]byte, bool) {
	start := len(dst)
	complete := false
	c := &t.buckets[order>>t.shift]
	var hit *Slice
scan:
	for ri := range c.runs {
		r := &c.runs[ri]
		if !r.filter.mayHold(order) {
			t.filterSkips++
			continue
		}
		for si := r.first(order); si < len(r.slices); si++ {
			s := r.slices[si]
			if s.minOrder > order {
				break
			}
			t.sink += uint64(s.offsetHint(order))
			for i := s.seekKey(order, key); i < s.count && s.fps[i] == order; i++ {
				val, kind, out := s.keyLevel(i, key)
				if out == recStop {
					break
				}
				if hit == nil {
					hit = s
				}
				switch kind { // a map entry with an empty user key (recSkip) matches no case
				case base.KindListAppend:
					dst = append(dst, val)
				case base.KindListBase, base.KindValue:
					dst = append(dst, val)
					complete = true
					break scan
				case base.KindTombstone:
					complete = true
					break scan
				}
			}
		}
	}
	if hit != nil {
		hit.hits++
	}
	added := dst[start:]
	for i, j := 0, len(added)-1; i < j; i, j = i+1, j-1 {
		added[i], added[j] = added[j], added[i]
	}
	return dst, complete
}

// MapGet returns the value of user key uk in the map mapKey (order hash
// order of the map key): Found with the value; Deleted when the entry was
// removed or the map cleared or deleted (a key-level tombstone) after it;
// Absent when the chain holds neither. The value aliases slice memory
// (valid as Get's). Allocation-free; owner goroutine only.
func (t *Table) MapGet(order uint64, mapKey, uk []byte) ([]byte, Status) {
	c := &t.buckets[order>>t.shift]
	for ri := range c.runs {
		r := &c.runs[ri]
		if !r.filter.mayHold(order) {
			t.filterSkips++
			continue
		}
		var clear uint64
		cleared := false
		var val []byte
		var seq uint64
		st := Absent
		var hit *Slice
		for si := r.first(order); si < len(r.slices); si++ {
			s := r.slices[si]
			if s.minOrder > order {
				break
			}
			t.mapSearches++
			// One search of the fingerprints per slice: the map's entries
			// share its order hash. The key-level region of the map (user
			// key "") holds its tombstones (clears and deletes).
			t.sink += uint64(s.offsetHint(order))
			lo, hi := s.orderRange(order)
			if lo == hi {
				continue
			}
			t.sink += uint64(s.touchRecords(lo, hi))
			// The range usually holds this map only, whose key-level
			// entries (user key "") come first: one probe instead of a
			// search.
			i0, ref := lo, -1 // ref: an entry whose key is mapKey
			if k, _ := s.keyAt(lo); bytes.Equal(k, mapKey) {
				ref = lo
			} else {
				i0 = s.seekIn(lo, hi, mapKey, nil)
			}
			i := i0
			for ; i < hi; i++ {
				rc := s.rec(i) // one decode: keyAt and then rec decoded the key twice
				if !bytes.Equal(rc.key, mapKey) {
					break
				}
				ref = i
				if len(rc.uk) > 0 {
					break
				}
				if rc.kind == base.KindTombstone && (!cleared || rc.seq > clear) {
					clear, cleared, hit = rc.seq, true, s
				}
			}
			if st != Absent {
				continue // the newest version was in an earlier slice of the run
			}
			// Everything before i sorts below (mapKey, uk) when uk is not
			// empty; an empty uk shares the key-level position.
			if len(uk) > 0 && ref >= 0 {
				i = s.seekUK(ref, i, hi, mapKey, uk)
			} else if len(uk) > 0 {
				i = s.seekIn(i, hi, mapKey, uk)
			} else {
				i = i0
			}
			for ; i < hi; i++ {
				rc := s.rec(i)
				if !bytes.Equal(rc.uk, uk) || !bytes.Equal(rc.key, mapKey) {
					break
				}
				if !isMapKind(rc.kind) {
					continue
				}
				seq, val, hit = rc.seq, rc.val, s
				st = Found
				if rc.kind == base.KindMapEntryTombstone {
					st = Deleted
				}
				break
			}
		}
		// An entry as new as the clear is not older than it (entry
		// invariant 4), as MapIter and compaction also decide.
		if st != Absent && (!cleared || seq >= clear) {
			hit.hits++
			if st == Deleted {
				return nil, Deleted
			}
			return val, Found
		}
		if cleared {
			hit.hits++
			return nil, Deleted
		}
	}
	return nil, Absent
}

// Close frees every slice that no job uses. A pending job's slices (its
// busy inputs and its output) stay until the job ends: InstallCompaction,
// CancelCompaction, InstallEviction, CancelEviction, InstallRelocation or
// CancelRelocation after Close free them, so a background Run never reads
// freed memory. Open snapshots are released with everything else, their
// deferred releases performed: release them (ReleaseSnapshot) first, once
// no goroutine reads them, as the engine does. Owner goroutine
// only; idempotent.
func (t *Table) Close() error {
	if t.closed {
		return nil
	}
	for b := range t.buckets {
		for _, r := range t.buckets[b].runs {
			for _, s := range r.slices {
				if !s.busy {
					t.free(s)
				}
			}
			t.dropFilter(&r)
		}
		t.buckets[b].runs = nil
	}
	t.closeSnapshots()
	t.runs = 0
	t.gen++
	t.closed = true
	return nil
}

// Stats is a snapshot of a Table.
type Stats struct {
	Slices   int   // installed slices
	Runs     int   // runs over all chains
	Entries  int64 // entries in installed slices (all versions)
	MemBytes int64 // memory held by installed slices, bytes
	Blocks   int   // allocator blocks in use (all tables sharing it)
	// ChainHist counts buckets by chain length in runs: [0] empty, [1] one
	// run, [2] two, [3] 3-4, [4] 5-8, [5] 9-16, [6] more.
	ChainHist [7]int
	MaxChain  int // longest chain, in runs
	// Segments counts the allocator segments holding this table's blocks.
	Segments int

	Compactions  int64 // compactions installed
	CompactedIn  int64 // bytes of slices compactions replaced
	CompactedOut int64 // bytes of slices compactions produced

	// MapSearches counts the searches of one slice for a map's records
	// since New: one per slice a MapGet looks into, one per slice a
	// MapIter or MapShadow positions a cursor in. A measure, for tests and
	// benchmarks, of how a map read's cost grows with the slices the map
	// spans (a whole iteration is O(slices + entries), never their product).
	MapSearches int64
	// FilterBytes is the memory of the runs' filters (filter.go; charged to
	// memory.PurposeSlice, not in MemBytes); FilterSkips counts the runs
	// Get, ListGet and MapGet skipped because the filter said the run holds
	// no entry of the order hash.
	FilterBytes, FilterSkips int64
	Evictions                int64 // evictions installed
	EvictedSlices            int64 // slices handed to the sink and removed
	EvictedBytes             int64 // bytes of those slices

	Relocations     int64 // relocations installed
	RelocatedSlices int64 // slices those relocations moved

	// Snapshots counts the open snapshots (Snapshot, not yet released).
	Snapshots int
	// PinnedBytes is the memory that left the table (or was a relocation's
	// old block or unused copy) while snapshots were open: still allocated,
	// counted by the Allocator and the Budget, freed when the last open
	// snapshot is released. Not part of MemBytes.
	PinnedBytes int64
}

// Stats returns a snapshot of the table. O(buckets); owner goroutine only.
func (t *Table) Stats() Stats {
	st := Stats{Slices: t.slices, Runs: t.runs, Entries: t.entries, MemBytes: t.memBytes,
		Blocks: t.a.Stats().Blocks, Compactions: t.compactions, CompactedIn: t.compactedIn,
		CompactedOut: t.compactedOut, Evictions: t.evictions, EvictedSlices: t.evictedSlices,
		EvictedBytes: t.evictedBytes, Segments: len(t.bySeg), Relocations: t.relocations,
		RelocatedSlices: t.relocatedSlices, Snapshots: len(t.snaps), PinnedBytes: t.pinnedBytes,
		MapSearches: t.mapSearches, FilterBytes: t.filterBytes, FilterSkips: t.filterSkips}
	for b := range t.buckets {
		n := len(t.buckets[b].runs)
		st.MaxChain = max(st.MaxChain, n)
		switch {
		case n <= 2:
			st.ChainHist[n]++
		case n <= 4:
			st.ChainHist[3]++
		case n <= 8:
			st.ChainHist[4]++
		case n <= 16:
			st.ChainHist[5]++
		default:
			st.ChainHist[6]++
		}
	}
	return st
}
