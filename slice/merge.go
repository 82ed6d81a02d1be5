package slice

import (
	"bytes"
	"context"
	"fmt"

	"github.com/strata-db/strata/internal/base"
)

// source is one input of a merge: a sequence of slices with ascending,
// disjoint key ranges (a run, or a single slice), read in order.
type source struct {
	slices []*Slice
	si, i  int
	rank   int // lower is newer: breaks ties that sequence numbers cannot
	e      base.Entry
}

func (s *source) load() bool {
	for s.si < len(s.slices) {
		if sl := s.slices[s.si]; s.i < sl.count {
			sl.Entry(s.i, &s.e)
			return true
		}
		s.si++
		s.i = 0
	}
	return false
}

// less orders sources by their current entries: (Order, Key, UserKey,
// Seq descending), then rank.
func (a *source) less(b *source) bool {
	if c := cmpOrder(a.e.Order, a.e.Key, a.e.UserKey, b.e.Order, b.e.Key, b.e.UserKey); c != 0 {
		return c < 0
	}
	if a.e.Seq != b.e.Seq {
		return a.e.Seq > b.e.Seq
	}
	return a.rank < b.rank
}

// mergeIter merges sources into one sorted stream; it implements
// base.Iterator. It reads only immutable slice bytes, so background jobs
// run it (invariant 9).
type mergeIter struct {
	srcs    []source
	heap    []int // indices into srcs, a binary min-heap
	started bool
	cur     *base.Entry
}

func newMergeIter(inputs [][]*Slice) *mergeIter {
	m := &mergeIter{srcs: make([]source, len(inputs))}
	for i, in := range inputs {
		m.srcs[i] = source{slices: in, rank: i}
	}
	return m
}

func (m *mergeIter) Next() bool {
	if !m.started {
		m.started = true
		for i := range m.srcs {
			if m.srcs[i].load() {
				m.heap = append(m.heap, i)
			}
		}
		for i := len(m.heap)/2 - 1; i >= 0; i-- {
			m.down(i)
		}
	} else if len(m.heap) > 0 {
		s := &m.srcs[m.heap[0]]
		s.i++
		if !s.load() {
			m.heap[0] = m.heap[len(m.heap)-1]
			m.heap = m.heap[:len(m.heap)-1]
		}
		if len(m.heap) > 0 {
			m.down(0)
		}
	}
	if len(m.heap) == 0 {
		m.cur = nil
		return false
	}
	m.cur = &m.srcs[m.heap[0]].e
	return true
}

func (m *mergeIter) down(i int) {
	h := m.heap
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		j := l
		if r := l + 1; r < len(h) && m.srcs[h[r]].less(&m.srcs[h[l]]) {
			j = r
		}
		if !m.srcs[h[j]].less(&m.srcs[h[i]]) {
			return
		}
		h[i], h[j] = h[j], h[i]
		i = j
	}
}

func (m *mergeIter) Entry() *base.Entry { return m.cur }
func (m *mergeIter) Err() error         { return nil }

// resolver drops shadowed versions from a sorted stream and resolves list
// operands (doc.go, "Compaction"), passing what survives to emit in
// order. It buffers the versions of one (Key, UserKey) at a time.
type resolver struct {
	drop    bool // no older data can exist below: tombstones may go
	maxList int
	emit    func(*base.Entry) error

	group   []base.Entry // versions of one (Order, Key, UserKey), newest first
	keep    []bool
	mapKey  []byte // (Order, Key) the clear below belongs to
	mapOrd  uint64
	clear   uint64 // seq of the newest key-level tombstone of mapKey
	cleared bool
	list    []byte // scratch for a resolved list
	listE   base.Entry
}

func (r *resolver) add(e *base.Entry) error {
	if len(r.group) > 0 && !sameKey(&r.group[0], e) {
		if err := r.flush(); err != nil {
			return err
		}
	}
	r.group = append(r.group, *e)
	return nil
}

func (r *resolver) flush() error {
	g := r.group
	if len(g) == 0 {
		return nil
	}
	if !(r.cleared && g[0].Order == r.mapOrd && bytes.Equal(g[0].Key, r.mapKey)) {
		r.cleared = false
	}
	r.keep = append(r.keep[:0], make([]bool, len(g))...)
	var repl *base.Entry // replaces the newest key-level version
	// Key-level versions (user key ""): the newest decides.
	first := -1
	for i := range g {
		if !isMapKind(g[i].Kind) {
			first = i
			break
		}
	}
	if first >= 0 {
		v := &g[first]
		switch v.Kind {
		case base.KindTombstone:
			r.mapOrd, r.clear, r.cleared = v.Order, v.Seq, true
			r.mapKey = append(r.mapKey[:0], v.Key...)
			r.keep[first] = !r.drop
		case base.KindListAppend:
			repl = r.resolveList(g, first)
		default: // value, list base
			r.keep[first] = true
		}
	}
	// Map entries: the newest version decides unless a clear hides it.
	for i := range g {
		if !isMapKind(g[i].Kind) {
			continue
		}
		v := &g[i]
		if r.cleared && v.Seq < r.clear {
			break
		}
		r.keep[i] = v.Kind == base.KindMapEntry || !r.drop
		break
	}
	for i := range g {
		switch {
		case repl != nil && i == first:
			if err := r.emit(repl); err != nil {
				return err
			}
		case r.keep[i]:
			if err := r.emit(&g[i]); err != nil {
				return err
			}
		}
	}
	r.group = r.group[:0]
	return nil
}

// resolveList handles a key whose newest key-level version (g[first]) is
// an appended batch: it marks what to keep and returns a replacement entry
// for g[first], or nil to keep versions as they are.
func (r *resolver) resolveList(g []base.Entry, first int) *base.Entry {
	j := first
	total := 0
	for ; j < len(g); j++ {
		if isMapKind(g[j].Kind) {
			continue
		}
		if g[j].Kind != base.KindListAppend {
			break
		}
		total += len(g[j].Value)
	}
	end := j // g[end] is the base, value or tombstone below the operands, if any
	hasBase := end < len(g) && (g[end].Kind == base.KindListBase || g[end].Kind == base.KindValue)
	if hasBase {
		total += len(g[end].Value)
	}
	if total > r.maxList {
		for i := first; i <= end && i < len(g); i++ {
			if !isMapKind(g[i].Kind) {
				r.keep[i] = true
			}
		}
		if end < len(g) && g[end].Kind == base.KindTombstone && r.drop {
			r.keep[end] = false
		}
		return nil
	}
	r.list = r.list[:0]
	if hasBase {
		r.list = append(r.list, g[end].Value...)
	}
	for i := end - 1; i >= first; i-- {
		if !isMapKind(g[i].Kind) {
			r.list = append(r.list, g[i].Value...)
		}
	}
	r.listE = g[first]
	r.listE.Value = r.list
	// Operands over a base or a tombstone are the whole list; operands
	// over nothing stay an operand unless nothing can lie below.
	if end < len(g) || r.drop {
		r.listE.Kind = base.KindListBase
	}
	return &r.listE
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
	maxList int
	inBytes int64
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
	job.drop = len(job.inputs) == len(c.runs) && !t.opts.LowerTier && !t.evicted
	for _, in := range job.inputs {
		for _, s := range in {
			s.busy = true
		}
	}
	return job, true
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

// Run merges the job's runs into new slices: it drops shadowed versions,
// resolves list operands over a base (or over nothing when nothing lies
// below), drops entries hidden by a map's clear, and drops tombstones only
// when the inputs end the chain and no lower tier holds data. It is a pure
// function of immutable slices and the thread-safe allocator, meant for a
// background job; it checks ctx every 256 entries. Errors: ctx.Err(), a
// wrapped memory.ErrMemoryBudget, ErrJob if run twice; on error the job
// holds no output (cancel it).
func (c *Compaction) Run(ctx context.Context) error {
	if c.ran {
		return fmt.Errorf("%w: compaction already ran", ErrJob)
	}
	c.ran = true
	b := newBuilder(c.t.a, c.t.shift)
	res := &resolver{drop: c.drop, maxList: c.maxList, emit: b.add}
	m := newMergeIter(c.inputs)
	for n := 0; m.Next(); n++ {
		if n&255 == 255 {
			if err := ctx.Err(); err != nil {
				b.abort()
				return err
			}
		}
		if err := res.add(m.Entry()); err != nil {
			b.abort()
			return err
		}
	}
	if err := res.flush(); err != nil {
		b.abort()
		return err
	}
	out, err := b.finish()
	if err != nil {
		b.abort()
		return err
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
