package slice

import (
	"context"
	"fmt"

	"github.com/strata-db/strata/internal/base"
)

// runIter reads a sequence of slices with ascending, disjoint key ranges (a
// run, or a single slice) in entry order: one source of a merge. It reads
// only immutable slice bytes, so background jobs run it (invariant 9), and
// the entries' bytes stay valid as long as the slices (base.Resolver.Stable).
type runIter struct {
	slices  []*Slice
	si, i   int
	started bool
	noHash  bool // leave Hash and UserHash 0 (a compaction's merge: nothing reads them)
	e       base.Entry
}

func (s *runIter) Next() bool {
	if s.started {
		s.i++
	}
	s.started = true
	for s.si < len(s.slices) {
		if sl := s.slices[s.si]; s.i < sl.count {
			if s.noHash {
				sl.entryNoHash(s.i, &s.e)
			} else {
				sl.Entry(s.i, &s.e)
			}
			return true
		}
		s.si++
		s.i = 0
	}
	return false
}

func (s *runIter) Entry() *base.Entry { return &s.e }
func (s *runIter) Err() error         { return nil }

// newMergeIter merges runs, newest first (ties, which a correct chain never
// holds, go to the newer run), into one stream in entry order. With noHash
// its entries carry Hash and UserHash 0 (entryNoHash): for a memory
// compaction, whose merge, Resolver, Filter and builder order and write
// entries by Order, Key, UserKey and Seq only; an eviction's and a
// snapshot's consumers (the LSM store's filters and block indexes) need them.
func newMergeIter(inputs [][]*Slice, noHash bool) *base.MergingIter {
	runs := make([]runIter, len(inputs))
	srcs := make([]base.Iterator, len(inputs))
	for i, in := range inputs {
		runs[i].slices = in
		runs[i].noHash = noHash
		srcs[i] = &runs[i]
	}
	return base.NewMergingIter(srcs...)
}

// Compaction is one memory-compaction job: a contiguous range of runs of
// one bucket's chain, merged into one run. PickCompaction creates it and
// marks its slices busy; Run merges (any goroutine); InstallCompaction or
// CancelCompaction ends it on the owner goroutine.
type Compaction struct {
	t       *Table
	bucket  int
	ids     []uint64   // run ids, newest first
	inputs  [][]*Slice // the runs' slices, newest first
	drop    bool       // inputs end the chain and nothing lies below
	sweep   bool       // picked by PickExpired (sweep.go)
	maxList int
	inBytes int64
	outMem  int64 // memory of the output slices, set by Run
	out     []*Slice
	ran, ok bool // Run was called; it succeeded
	done    bool // installed or cancelled
}

// Bucket returns the bucket whose chain the job compacts.
func (c *Compaction) Bucket() int { return c.bucket }

// Runs returns the number of runs the job merges.
func (c *Compaction) Runs() int { return len(c.inputs) }

// InputBytes returns the memory of the input slices, in bytes.
func (c *Compaction) InputBytes() int64 { return c.inBytes }

// OutputBytes returns the memory of the slices Run built, in bytes: 0 before
// Run succeeds, and when it dropped everything. Read it after Run returned
// (scheduler.Handle.Wait or the job's completion); it stays valid after
// InstallCompaction.
func (c *Compaction) OutputBytes() int64 { return c.outMem }

// PickCompaction proposes a compaction for the longest chain whose length
// in runs exceeds Options.CompactionThreshold, or reports false. The job
// merges the newest runs (size-tiered: it adds the next older run while it
// is at most twice the size of the runs already taken, and never takes a
// busy slice); at least two runs. Its slices are marked busy until the job
// ends. Owner goroutine only.
func (t *Table) PickCompaction() (*Compaction, bool) {
	if t.closed {
		return nil, false
	}
	best, bestLen := -1, t.opts.CompactionThreshold
	for b := range t.buckets {
		if n := len(t.buckets[b].runs); n > bestLen && !runBusy(&t.buckets[b].runs[0]) && !runBusy(&t.buckets[b].runs[1]) {
			best, bestLen = b, n
		}
	}
	if best < 0 {
		return nil, false
	}
	c := &t.buckets[best]
	job := &Compaction{t: t, bucket: best, maxList: t.opts.MaxListMerge}
	var taken int64
	for i := range c.runs {
		r := &c.runs[i]
		if runBusy(r) {
			break
		}
		size := runBytes(r)
		if i >= 2 && size > 2*taken {
			break
		}
		job.ids = append(job.ids, r.id)
		job.inputs = append(job.inputs, r.slices)
		taken += size
	}
	job.inBytes = taken
	job.drop = len(job.inputs) == len(c.runs) && t.nothingBelow(best)
	for _, in := range job.inputs {
		for _, s := range in {
			s.busy = true
		}
	}
	return job, true
}

// PickChain proposes a compaction of bucket b's whole chain — every run,
// one run too — or reports false when the chain is empty or a slice of it
// is busy: a full compaction (the engine's CompactAll, as RocksDB's
// CompactRange) that leaves the bucket one run and applies the compaction
// filter (TTL: Options.Expiry) to everything in it. Expired data and
// tombstones are dropped outright when nothing may lie below the chain
// (Options.LowerHolds for the bucket's order hashes; without it, the
// LowerTier rule), as PickExpired decides. Run and install as
// PickCompaction's. Owner goroutine only.
func (t *Table) PickChain(b int) (*Compaction, bool) {
	if t.closed || b < 0 || b >= len(t.buckets) {
		return nil, false
	}
	c := &t.buckets[b]
	if len(c.runs) == 0 {
		return nil, false
	}
	for i := range c.runs {
		if runBusy(&c.runs[i]) {
			return nil, false
		}
	}
	job := &Compaction{t: t, bucket: b, maxList: t.opts.MaxListMerge}
	for i := range c.runs {
		r := &c.runs[i]
		job.ids = append(job.ids, r.id)
		job.inputs = append(job.inputs, r.slices)
		job.inBytes += runBytes(r)
		for _, s := range r.slices {
			s.busy = true
		}
	}
	job.drop = t.nothingBelow(b)
	return job, true
}

// nothingBelow reports whether no lower tier may hold data of bucket b, so that a compaction
// whose inputs end b's chain may drop tombstones and expired data (invariant 10):
// Options.LowerHolds for the bucket's order hashes; without it, the LowerTier rule (no lower
// tier, and no eviction picked so far). Every kind of compaction decides by it — PickCompaction,
// PickChain, PickExpired — so a lower tier that holds nothing of a bucket keeps none of its
// tombstones alive.
func (t *Table) nothingBelow(b int) bool {
	h := t.opts.LowerHolds
	if h == nil {
		return !t.opts.LowerTier && !t.evicted
	}
	lo := uint64(b) << t.shift
	hi := lo | (^uint64(0) >> (64 - t.shift))
	if t.shift == 64 {
		lo, hi = 0, ^uint64(0)
	}
	return !h(lo, hi)
}

func runBusy(r *run) bool {
	for _, s := range r.slices {
		if s.busy {
			return true
		}
	}
	return false
}

func runBytes(r *run) int64 {
	var n int64
	for _, s := range r.slices {
		n += int64(s.mem)
	}
	return n
}

// Run merges the job's runs into new slices with the merge rules of
// base.Resolver (internal/base doc.go, "Merge rules"): it drops shadowed
// versions, resolves list operands over a base (or over nothing when
// nothing lies below) in pieces of up to Options.MaxListMerge bytes, drops entries
// hidden by a map's clear, and drops tombstones only when the inputs end
// the chain and no lower tier holds data (invariant 10); then the
// Options.NewFilter's filter, if any, keeps, drops or rewrites each entry
// (TTL: expired data). It is a pure
// function of immutable slices and the thread-safe allocator, meant for a
// background job; it checks ctx every 256 entries. Errors: ctx.Err(), a
// wrapped memory.ErrMemoryBudget, ErrJob if run twice; on error the job
// holds no output (cancel it).
func (c *Compaction) Run(ctx context.Context) error {
	if c.ran {
		return fmt.Errorf("%w: compaction already ran", ErrJob)
	}
	c.ran = true
	b := newBuilder(c.t.a, c.t.shift, c.t.opts.Expiry)
	// Slice memory is immutable while the job runs, so the resolver keeps
	// pointers into it (Stable) instead of copying.
	res := &base.Resolver{Bottom: c.drop, DropTombstones: c.drop, MaxList: c.maxList, Stable: true, Emit: b.add}
	if nf := c.t.opts.NewFilter; nf != nil {
		res.Filter = nf(c.drop, c.sweep)
	}
	m := newMergeIter(c.inputs, true)
	for n := 0; m.Next(); n++ {
		if n&255 == 255 {
			if err := ctx.Err(); err != nil {
				b.abort()
				return err
			}
		}
		if err := res.Add(m.Entry()); err != nil {
			b.abort()
			return err
		}
	}
	if err := res.Finish(); err != nil {
		b.abort()
		return err
	}
	out, err := b.finish()
	if err != nil {
		b.abort()
		return err
	}
	for _, s := range out {
		c.outMem += int64(s.mem)
	}
	c.out, c.ok = out, true
	return nil
}

// InstallCompaction replaces the job's runs with its output (one run, or
// none if everything was dropped) and frees the input slices. Errors:
// ErrJob if the job is not pending on t or has not run successfully
// (the job stays pending; cancel it); base.ErrClosed after Close (the output is
// freed). Owner goroutine only.
func (t *Table) InstallCompaction(c *Compaction) error {
	if c.t != t || c.done {
		return fmt.Errorf("%w: compaction of bucket %d", ErrJob, c.bucket)
	}
	if !c.ok {
		return fmt.Errorf("%w: compaction of bucket %d has not run", ErrJob, c.bucket)
	}
	c.done = true
	if t.closed {
		t.Release(c.out)
		c.out = nil
		for _, in := range c.inputs {
			t.freeBusy(in)
		}
		return base.ErrClosed
	}
	ch := &t.buckets[c.bucket]
	p := -1
	for i := range ch.runs {
		if ch.runs[i].id == c.ids[0] {
			p = i
			break
		}
	}
	if p < 0 || p+len(c.ids) > len(ch.runs) {
		panic("strata: invariant: a compaction's runs left their chain")
	}
	for k, id := range c.ids {
		if ch.runs[p+k].id != id {
			panic("strata: invariant: a compaction's runs are no longer contiguous")
		}
	}
	// Heat carries over: the output shares the inputs' decayed hits and
	// keeps the oldest input's age.
	var heat float64
	born := int64(1<<63 - 1)
	now := int64(t.opts.Now())
	for _, in := range c.inputs {
		for _, s := range in {
			heat += t.heatOf(s, now)
			born = min(born, s.born)
		}
	}
	for _, s := range c.out {
		s.heat, s.born, s.fold = heat/float64(len(c.out)), born, now
	}
	var outBytes int64
	for _, s := range c.out {
		outBytes += int64(s.mem)
	}
	for k := range c.ids { // first: the output's filter may take the inputs' charge
		t.dropFilter(&ch.runs[p+k])
	}
	var repl []run
	if len(c.out) > 0 {
		repl = []run{t.newRun(c.out, c.bucket, now)}
	}
	rest := append(repl, ch.runs[p+len(c.ids):]...)
	ch.runs = append(ch.runs[:p], rest...)
	t.runs -= len(c.ids)
	for _, in := range c.inputs {
		for _, s := range in {
			s.busy = false
			t.free(s)
		}
	}
	t.gen++
	t.compactions++
	t.compactedIn += c.inBytes
	t.compactedOut += outBytes
	c.out = nil
	return nil
}

// CancelCompaction ends a job without installing it: its inputs are no
// longer busy and its output, if any, is freed. Call it only when Run has
// returned or will never be called (after scheduler.Handle.Wait, not
// merely Cancel): a Run still in flight would read inputs the owner may
// free from then on, and its output would leak. Errors: ErrJob if the job
// is not pending on t. Owner goroutine only.
func (t *Table) CancelCompaction(c *Compaction) error {
	if c.t != t || c.done {
		return fmt.Errorf("%w: compaction of bucket %d", ErrJob, c.bucket)
	}
	c.done = true
	t.Release(c.out)
	c.out = nil
	for _, in := range c.inputs {
		if t.closed {
			t.freeBusy(in)
			continue
		}
		for _, s := range in {
			s.busy = false
		}
	}
	return nil
}
