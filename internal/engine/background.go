package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/strata-db/strata/fresh"
	"github.com/strata-db/strata/lsm/sstable"
	"github.com/strata-db/strata/memory"
	"github.com/strata-db/strata/scheduler"
	"github.com/strata-db/strata/slice"
)

// Background work: scheduling (kick), the tasks (transform, compaction, eviction), installs in
// order (install), and the writers' wait for memory (backpressure). See doc.go for the
// protocol.

// finished marks a job done and tells the owner: done is set after the job's results are
// written, and ready is bumped after done, so an owner that reads ready != 0 and then clears it
// before scanning the jobs never misses one (it may scan once more than needed).
func (t *Engine) finished(done interface{ Store(bool) }) {
	done.Store(true)
	if finishedGap != nil {
		finishedGap()
	}
	t.ready.Add(1)
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// finishedGap, when set (tests only), runs in finished between a job's done flag and its ready
// bump, and ownerGap on the owner at the end of install and after run submitted a job:
// together they widen the windows in which an owner that looked at ready alone took a job that
// finished after install's scan, or right after its submission, for no work at all
// (unsettled; settle_test.go).
var finishedGap, ownerGap func()

// unsettled reports whether a job finished or a checkpoint's memory was written that install
// has not ended yet — what the owner's waits look at, with nothing in flight, before they give
// up: ready alone is not enough, since it is bumped after the done flag (finished), so an
// owner that found the job done in inFlight may still read ready == 0. install ends every job
// this reports (a done transform at the head, compaction, relocation, eviction, LSM
// compaction, a checkpoint's or materialization's written memory or its end), so a caller that loops on it to
// install does not spin. Owner only.
func (t *Engine) unsettled() bool {
	if t.ready.Load() != 0 {
		return true
	}
	if len(t.fifo) > 0 && t.fifo[0].h != nil && t.fifo[0].done.Load() {
		return true
	}
	for _, c := range t.compactions {
		if c.done.Load() {
			return true
		}
	}
	for _, j := range t.lsmJobs {
		if j.done.Load() {
			return true
		}
	}
	if t.relocation != nil && t.relocation.done.Load() || t.eviction != nil && t.eviction.done.Load() {
		return true
	}
	for _, p := range t.ck.running {
		if !p.memReleased && p.memDone.Load() || p.fin.Load() {
			return true
		}
	}
	if c := t.cl; c != nil && c.run != nil {
		if p := c.run; !p.memReleased && p.memDone.Load() || p.fin.Load() {
			return true
		}
	}
	return false
}

// checkSealed queues a transform job for every sealed segment not queued yet (seal order) and
// kicks the scheduler.
func (t *Engine) checkSealed() {
	t.queueSealed()
	t.kick()
}

// queueSealed is checkSealed without the kick.
func (t *Engine) queueSealed() {
	t.lastFresh = t.budget.UsedBy(memory.PurposeFreshData)
	sealed := t.f.Sealed()
	if len(sealed) < len(t.fifo) {
		panic("strata: invariant: fewer sealed segments than queued transforms")
	}
	for i, j := range t.fifo {
		if sealed[i] != j.seg {
			panic("strata: invariant: sealed segments and transform queue out of order")
		}
	}
	for _, seg := range sealed[len(t.fifo):] {
		t.fifo = append(t.fifo, &transformJob{seg: seg})
	}
}

// kick submits the work that may start: the transform at the head of the queue (transforms run
// one at a time, the reserve is sized for one), compactions of long chains, and an eviction
// when the SliceTable is above its watermark and a lower tier exists. A kind of work whose
// last attempt failed for a transient reason is submitted only once its backoff has passed
// (retry.go); a due retry that finds nothing to do ends the backoff (settleRetries).
func (t *Engine) kick() {
	if t.bgErr != nil || t.closing {
		return
	}
	t.sweepCheck()
	if len(t.fifo) > 0 {
		if j := t.fifo[0]; j.h == nil && !t.waiting(bgTransform) {
			switch {
			case t.canFlush() && (j.failed || j.retry && j.flush || t.preferFlush > 0):
				t.submitFlush(j)
			case !j.failed || t.budget.Used() < j.failedUsed:
				t.submitTransform(j)
			}
		}
	}
	for !t.noCompact && len(t.compactions) < t.maxCompact && !t.waiting(bgCompaction) {
		if !t.submitCompactions() {
			break
		}
	}
	if t.relocation == nil && !t.waiting(bgRelocation) {
		if r, ok := t.sl.PickRelocation(); ok {
			t.submitRelocation(r)
		}
	}
	if t.low != nil && (t.headFailed() || t.evictWater > 0 && t.sl.Stats().MemBytes > t.evictWater ||
		t.evictRoom > 0 && t.roomShort() && !t.relocationCovers()) {
		t.evict()
	}
	t.kickLSM()
	t.sweepPick()
	if t.retrying > 0 {
		t.settleRetries()
	}
}

// roomShort reports whether the writers' room in the budget is below EvictionRoom. Caches not
// mapped yet do not count: they yield to state (mapCaches). Memory a running checkpoint pins counts as room:
// it comes back when the checkpoint ends, and evicting for it would only pin the evicted
// slices too (they stay counted until the checkpoint ends), emptying the SliceTable for no
// room; a writer that cannot wait for it gets backpressure, which evicts.
func (t *Engine) roomShort() bool {
	room := t.budget.WriterRoom()
	need := t.evictRoom
	if room >= need {
		return false
	}
	room += t.f.Stats().PinnedBytes + t.sl.Stats().PinnedBytes // O(buckets + segments), when short only
	return room < need
}

// relocationCovers reports whether the pending relocation's segments, which go back to the Pool
// at its install, cover the writers' shortfall below EvictionRoom (doc.go, "Eviction policy"):
// the room test then waits for it instead of evicting state. Not while a cache waits to be
// mapped over an LsmStore that holds data: state that outgrew the budget reads through them,
// and an eviction batch's room beyond the shortfall is what maps them (mapCaches); waiting
// for relocations there left the row cache unmapped in 6 of 10 runs of the root's
// TestCachesAfterEviction.
func (t *Engine) relocationCovers() bool {
	if t.relocation == nil {
		return false
	}
	if lt, ok := t.low.(*lsmTier); ok && (lt.cacheWant > 0 || t.rowWant > 0) && t.db != nil && !t.db.Empty() {
		return false
	}
	short := t.evictRoom - t.budget.WriterRoom()
	return int64(t.relocation.r.Segments())*int64(t.segSize) >= short
}

// mapCaches maps the LsmStore's block cache and the row cache (Options.BlockCacheSize,
// RowCacheSize) that Open left unmapped because the LsmStore was empty, once an eviction or
// flush gave it data — and only from the writers' room (memory.Budget.WriterRoom) beyond
// EvictionRoom, never from the transform reserve: the caches yield to state. No eviction
// makes room for them (roomShort does not count them): evicting state to map a cache of the
// evicted state made the flight demo's first eviction at 64 MiB bring the next ones
// (2026-12-04). A cache that cannot be mapped now is tried again at the next install.
// Owner only.
func (t *Engine) mapCaches() {
	if lt, ok := t.low.(*lsmTier); ok && lt.cacheWant > 0 && t.budget.WriterRoom() >= lt.cacheWant+t.evictRoom {
		if c, err := sstable.NewCache(t.budget, lt.cacheWant, 0); err == nil {
			lt.db.SetCache(c)
			lt.cache, lt.cacheWant = c, 0
		}
	}
	if t.rowWant > 0 && t.budget.WriterRoom() >= t.rowWant+t.evictRoom {
		if rc, err := newRowCache(t.budget, t.rowWant); err == nil {
			t.rc, t.rowWant = rc, 0
		}
	}
}

// kickLSM submits every LSM compaction that is due (lsm.DB.PickCompaction marks the levels of
// a job busy, so the jobs it returns touch disjoint level pairs).
func (t *Engine) kickLSM() {
	if t.db == nil || t.bgErr != nil || t.closing || t.waiting(bgLSM) {
		return
	}
	for {
		j := t.db.PickCompaction()
		if j == nil {
			return
		}
		job := &lsmJob{j: j}
		t.lsmJobs = append(t.lsmJobs, job)
		// A closed scheduler never runs the job: InstallCompaction releases it (ErrJobNotRun).
		t.run(bgLSM, BgLSMCompaction, scheduler.Compaction, j.String(), &job.done, &job.err, j.Run)
	}
}

// Evict starts an eviction of the coldest slices to the lower tier, as memory pressure would,
// if the SliceTable proposes one and none is in flight, and reports whether an eviction is
// running now (started here or before). It waits for nothing: the eviction is installed by a
// later write, WaitBackground or Drain, and memory pressure may start the next. false with a
// nil error: nothing to evict (no slices, no lower tier), a failed eviction waits for its
// backoff, or a lazy tail still going to L0 (invariant 34). The error is the sticky
// background failure (doc.go, "Failures") that stopped the engine, if any. Owner goroutine.
func (t *Engine) Evict() (bool, error) {
	if t.bgErr != nil {
		return false, t.bgErr
	}
	return t.evict() || t.eviction != nil, nil
}

// evict submits an eviction if the SliceTable proposes one, none is in flight and no failed
// eviction waits for its backoff.
func (t *Engine) evict() bool {
	if t.low == nil || t.eviction != nil || t.bgErr != nil || t.waiting(bgEviction) {
		return false
	}
	if t.tail != nil && t.awaitTail() != nil { // the lazy tail goes to L0 first (invariant 34)
		return false
	}
	e, ok := t.sl.PickEviction()
	if !ok {
		return false
	}
	job := &evictionJob{e: e, sink: evictSink{low: t.low}}
	t.eviction = job
	t.run(bgEviction, BgEviction, scheduler.Eviction, "eviction", &job.done, &job.err, func(ctx context.Context) error {
		return e.Run(ctx, &job.sink)
	})
	return true
}

// canFlush reports whether the sealed segment at the head of the queue may go straight to the
// lower tier as an L0 file, bypassing the SliceTable: only when the SliceTable holds nothing
// and no eviction is in flight, so that the file is newer than everything installed below
// before it and nothing older can be installed after it (lsm invariant 6).
func (t *Engine) canFlush() bool {
	if t.tail != nil && t.awaitTail() != nil { // the lazy tail goes to L0 first (invariant 34)
		return false
	}
	return t.low != nil && t.eviction == nil && len(t.compactions) == 0 && t.sl.Stats().Slices == 0
}

// flushProbe is the number of sealed segments flushed straight to the lower tier after a
// transform failed for memory with an empty SliceTable (the budget cannot hold a transform's
// slices beside the FreshTable), before a transform is tried again.
const flushProbe = 8

// submitFlush runs a flush of the head segment: its entries sorted and written as one L0 file
// (invisible until the owner installs it, in seal order, like a transform's slices).
func (t *Engine) submitFlush(j *transformJob) {
	j.failed, j.flush = false, true
	if t.preferFlush > 0 {
		t.preferFlush--
	}
	j.h = t.run(bgTransform, BgTransform, scheduler.Transform, "flush", &j.done, &j.err, func(ctx context.Context) error {
		ents, err := t.segmentEntries(ctx, j.seg)
		if err == nil {
			j.pending, err = t.low.Evict(ents)
			ents.release()
		}
		return err
	})
}

func (t *Engine) submitTransform(j *transformJob) {
	j.failed, j.flush = false, false
	j.h = t.run(bgTransform, BgTransform, scheduler.Transform, "transform", &j.done, &j.err, func(ctx context.Context) (err error) {
		j.out, err = t.transform(ctx, j.seg)
		return err
	})
}

// submitRelocation runs a relocation (slice.Table.PickRelocation: the slices of sparsely
// used allocator segments copied into free blocks of fuller ones, so the segments go back to
// the Pool) as a Transform-class task (its CPU still counts as compaction): eviction and
// compaction free blocks scattered over segments, and only relocation turns them back into
// whole segments for the FreshTable and the budget, so it frees memory as a transform does
// and must not queue behind a batch of compactions while the room test waits for it.
func (t *Engine) submitRelocation(r *slice.Relocation) {
	job := &relocationJob{r: r}
	t.relocation = job
	t.run(bgRelocation, BgCompaction, scheduler.Transform, "relocation", &job.done, &job.err, r.Run)
}

// submitCompactions picks slice compactions, one bucket each, until their inputs reach a
// segment's size, and runs them as one job (compactionJob); it reports whether it picked any.
// One worker takes a queued transform before a compaction (scheduler priority), and the owner
// queues the next transform as soon as one is installed, so a job gets the worker about once
// per transform: one bucket per job (a transform adds a run to every bucket) let chains grow to
// 25 runs under an overwrite load and evicted live state; a segment's worth per job merges
// about what a transform adds.
func (t *Engine) submitCompactions() bool {
	var job *compactionJob
	var in int64
	for in < int64(t.segSize) {
		c, ok := t.sl.PickCompaction()
		if !ok {
			break
		}
		if job == nil {
			job = &compactionJob{}
		}
		job.cs = append(job.cs, c)
		in += c.InputBytes()
	}
	if job == nil {
		return false
	}
	t.compactions = append(t.compactions, job)
	t.run(bgCompaction, BgCompaction, scheduler.Compaction, "compaction", &job.done, &job.err, job.run)
	return true
}

// run runs the job's compactions one after another (the background half), counting those
// that succeeded in ran, until one fails.
func (j *compactionJob) run(ctx context.Context) error {
	for _, c := range j.cs {
		if err := c.Run(ctx); err != nil {
			return err
		}
		j.ran++
	}
	return nil
}

// run is the one way background work starts: it counts the job (submitted), runs work on the
// scheduler in class c under the pprof label name, its cost charged to cc (cost.go), turns a panic into an invariant error, records
// the outcome in *errp and marks the job done for the owner's next install (finished). When the
// scheduler refuses the task (it is closed) the refusal is the outcome, at once. It returns the
// task's handle (nil when refused).
func (t *Engine) run(kind bgKind, cc BackgroundClass, c scheduler.Class, name string, done *atomic.Bool, errp *error, work func(context.Context) error) *scheduler.Handle {
	t.submitted(kind)
	h, err := t.sched.SubmitMetered(c, name, t.meter(cc), func(ctx context.Context) error {
		defer t.finished(done)
		defer recoverInto(errp, name)
		*errp = work(ctx)
		return *errp
	})
	if err != nil {
		*errp = err
		done.Store(true)
		t.ready.Add(1)
		return nil
	}
	if ownerGap != nil {
		ownerGap()
	}
	return h
}

// recoverInto turns a panic of a task into its error, a broken invariant (errInvariant: the
// owner then stops background work and reports it from writes), instead of letting it escape
// to the scheduler without the job learning about it.
func recoverInto(err *error, what string) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("%w: %s task panicked: %v", errInvariant, what, r)
	}
}

// transform is the background half of a transform: the live records of a sealed segment as
// entries, with the hashes fresh leaves to the caller (Hash of the composite key, the order
// hash of its key group, the user-key hash of map entries), sorted in entry order and packed
// into slices. It reads only the sealed segment (immutable until dropped, and the owner drops
// it only after installing this job) and t's fixed configuration.
func (t *Engine) transform(ctx context.Context, seg *fresh.SealedSegment) ([]*slice.Slice, error) {
	ents, err := t.segmentEntries(ctx, seg)
	if err != nil {
		return nil, err
	}
	defer ents.release()
	return t.sl.Build(ctx, ents)
}

// poll installs finished background work, unless a map iteration is open (doc.go, install protocol
// item 4): then it waits, for at most maxDeferredWrites writes.
func (t *Engine) poll() {
	if t.openIters > 0 {
		if t.deferred++; t.deferred < maxDeferredWrites {
			return
		}
		t.forcedInstalls++
	}
	t.install()
}

// install installs every finished job that may be installed now and kicks the next work. It
// returns the number of jobs it installed, which is what a waiting writer needs to know:
// memory may have been freed. Failed jobs are ended too but not counted. One step per job
// kind, in this order: transforms (seal order), slice compactions, the relocation, the
// eviction, LSM compactions, then the checkpoints' pins.
func (t *Engine) install() int {
	t.ready.Store(0)
	n, ended := t.installTransforms()
	add := func(i, e int) { n, ended = n+i, ended+e }
	add(t.installCompactions())
	add(t.installRelocation())
	add(t.installEviction())
	add(t.installLSM())
	// Checkpoints: their pins are released (deferred frees happen now).
	if t.settleCheckpoints() {
		n++ // memory was given back
	}
	if n > 0 {
		t.noCompact = false
	}
	if ended > 0 {
		t.deferred = 0
		t.kick()
	}
	if ownerGap != nil {
		ownerGap()
	}
	return n
}

// installTransforms installs the finished transforms and flushes at the head of the queue, strictly
// in seal order, and ends a failed one (it stays at the head, to be retried); install's step.
// n counts the installed jobs, ended every job it ended.
func (t *Engine) installTransforms() (n, ended int) {
	for len(t.fifo) > 0 {
		j := t.fifo[0]
		if j.h == nil || !j.done.Load() {
			break
		}
		ended++
		if j.err != nil {
			t.transformFails++
			if j.pending != nil {
				t.low.Discard(j.pending)
			}
			what := "transform"
			if j.flush {
				what = "flush"
			}
			t.jobEnded(bgTransform, what, j.err)
			if errors.Is(j.err, memory.ErrMemoryBudget) || errors.Is(j.err, context.Canceled) {
				// Retried once memory was freed (kick) or by a waiting writer; with an empty
				// SliceTable, flushed to the lower tier instead (and the next few too).
				if !j.flush && errors.Is(j.err, memory.ErrMemoryBudget) {
					t.sizeReserve(-1) // the output outgrew the reserve: two segments again
				}
				t.fifo[0] = &transformJob{seg: j.seg, failed: true, failedUsed: t.budget.Used()}
				if !j.flush && t.canFlush() {
					t.preferFlush = flushProbe
				}
			} else {
				// A fresh job at the head, submitted again — the same way, flush or
				// transform, where it still may — once its backoff has passed (kick), or
				// never if the failure stopped the engine.
				t.fifo[0] = &transformJob{seg: j.seg, retry: true, flush: j.flush}
			}
			break
		}
		if j.flush {
			if err := t.low.Install(j.pending, t.f.Seq()); err != nil {
				t.low.Discard(j.pending)
				j.pending = nil
				t.transformFails++
				t.jobEnded(bgTransform, "flush", err)
				if errors.Is(err, context.Canceled) {
					t.fifo[0] = &transformJob{seg: j.seg, failed: true, failedUsed: t.budget.Used()}
				} else {
					t.fifo[0] = &transformJob{seg: j.seg, retry: true, flush: true}
				}
				break
			}
			j.pending = nil
			t.bumpEpoch()
			t.flushes++
			t.noteL0()
			t.mapCaches()
		} else {
			t.bumpEpoch()
			var out int64
			for _, s := range j.out {
				out += int64(s.MemBytes())
			}
			t.costBytes(BgTransform, 0, out)
			t.sizeReserve(out)
			if err := t.sl.Install(j.out); err != nil {
				panic("strata: invariant: installing a transform in seal order: " + err.Error())
			}
			j.out = nil
		}
		t.jobEnded(bgTransform, "", nil)
		if err := t.f.DropSealed(j.seg); err != nil {
			if errors.Is(err, fresh.ErrNotOldestSealed) {
				panic("strata: invariant: dropping the transformed segment: " + err.Error())
			}
			t.stick("drop of a transformed segment", fmt.Errorf("%w: %w", errInvariant, err))
		}
		t.fifo[0] = nil
		t.fifo = t.fifo[1:]
		// The drop gave a segment back: note it, or a roll at this write taking one again
		// would leave UsedBy(PurposeFreshData) unchanged and its seal unnoticed (after).
		t.lastFresh = t.budget.UsedBy(memory.PurposeFreshData)
		n++
		t.transforms++
		t.transformedBytes += j.seg.DataBytes()
		t.costBytes(BgTransform, j.seg.DataBytes(), 0)
	}
	return n, ended
}

// installCompactions installs the slice compactions that finished, in any order (each owns its
// busy runs): a job's compactions that ran are installed, the one that failed and those after
// it (never run) cancelled; install's step.
func (t *Engine) installCompactions() (n, ended int) {
	for i := 0; i < len(t.compactions); {
		j := t.compactions[i]
		if !j.done.Load() {
			i++
			continue
		}
		ended++
		t.compactions = slices.Delete(t.compactions, i, i+1)
		if j.ran > 0 {
			t.bumpEpoch()
		}
		for k, c := range j.cs {
			if k >= j.ran {
				if err := t.sl.CancelCompaction(c); err != nil {
					panic("strata: invariant: cancelling a compaction: " + err.Error())
				}
				t.sw.again = t.sw.again || c.Sweep() // its run is due still: pick it again
				continue
			}
			if err := t.sl.InstallCompaction(c); err != nil {
				panic("strata: invariant: installing a compaction: " + err.Error())
			}
			n++
			t.compacted++
			if c.Sweep() {
				t.costBytes(BgTTLSweep, c.InputBytes(), c.OutputBytes())
			} else {
				t.costBytes(BgCompaction, c.InputBytes(), c.OutputBytes())
			}
			if c.Sweep() {
				t.sw.jobs++
				t.sw.readBytes += c.InputBytes()
				t.sw.again = true
			}
		}
		if j.err != nil {
			t.jobEnded(bgCompaction, "compaction", j.err)
			// No compaction until something else frees memory: picking the same chain again
			// now would fail again.
			t.noCompact = true
			continue
		}
		t.jobEnded(bgCompaction, "", nil)
	}
	return n, ended
}

// installRelocation installs the finished relocation: the moved slices point at their copies, the
// emptied segment is freed; install's step.
func (t *Engine) installRelocation() (n, ended int) {
	if r := t.relocation; r != nil && r.done.Load() {
		ended++
		t.relocation = nil
		if r.err != nil {
			if err := t.sl.CancelRelocation(r.r); err != nil {
				panic("strata: invariant: cancelling a relocation: " + err.Error())
			}
			t.jobEnded(bgRelocation, "relocation", r.err)
		} else {
			t.jobEnded(bgRelocation, "", nil)
			t.bumpEpoch()
			if err := t.sl.InstallRelocation(r.r); err != nil {
				panic("strata: invariant: installing a relocation: " + err.Error())
			}
			if r.r.Moved() > 0 { // progress only when memory may have been freed
				n++
			}
			t.relocations++
		}
	}
	return n, ended
}

// installEviction installs the finished eviction: the lower tier takes the run, then the slices
// leave; install's step.
func (t *Engine) installEviction() (n, ended int) {
	if e := t.eviction; e != nil && e.done.Load() {
		ended++
		t.eviction = nil
		err := e.err
		if err == nil {
			err = t.low.Install(e.sink.pending, t.f.Seq())
		}
		if err != nil {
			if e.sink.pending != nil {
				t.low.Discard(e.sink.pending)
			}
			if err := t.sl.CancelEviction(e.e); err != nil {
				panic("strata: invariant: cancelling an eviction: " + err.Error())
			}
			t.jobEnded(bgEviction, "eviction", err)
		} else {
			t.jobEnded(bgEviction, "", nil)
			t.bumpEpoch()
			if err := t.sl.InstallEviction(e.e); err != nil {
				panic("strata: invariant: installing an eviction: " + err.Error())
			}
			n++
			t.evictions++
			t.costBytes(BgEviction, e.e.Bytes(), 0)
			t.noteL0()
			t.mapCaches()
		}
	}
	return n, ended
}

// installLSM installs the LSM compactions that finished, in any order (their level pairs are
// disjoint). They free no memory, so n does not count them for a waiting writer, but they end
// an L0 stall; install's step.
func (t *Engine) installLSM() (n, ended int) {
	for i := 0; i < len(t.lsmJobs); {
		j := t.lsmJobs[i]
		if !j.done.Load() {
			i++
			continue
		}
		ended++
		t.lsmJobs = slices.Delete(t.lsmJobs, i, i+1)
		if err := t.db.InstallCompaction(j.j); err != nil {
			if j.err != nil { // Run's own error, or its panic (then the job is still "running")
				err = j.err
			}
			t.sw.again = t.sw.again || j.j.Sweep() // its file is due still: pick it again
			t.jobEnded(bgLSM, "LSM compaction", lowerError(err))
			continue
		}
		t.jobEnded(bgLSM, "", nil)
		t.lsmCompactions++
		t.noteL0()
		if j.j.Sweep() {
			t.sw.jobs++
			t.sw.readBytes += j.j.Stats().BytesRead
			t.sw.again = true
		}
	}
	return n, ended
}

// noteL0 records the LsmStore's L0 file count after an install changed it.
func (t *Engine) noteL0() {
	if t.db != nil {
		t.l0Files = t.db.Metrics().Levels[0].Files
	}
}

// bumpEpoch invalidates the open map iterations (an install moves or frees what they walk).
func (t *Engine) bumpEpoch() {
	t.epoch++
	t.openIters = 0
}

// inFlight reports whether a submitted job has not finished yet.
func (t *Engine) inFlight() bool {
	if len(t.fifo) > 0 && t.fifo[0].h != nil && !t.fifo[0].done.Load() {
		return true
	}
	for _, c := range t.compactions {
		if !c.done.Load() {
			return true
		}
	}
	if t.relocation != nil && !t.relocation.done.Load() {
		return true
	}
	for _, p := range t.ck.running {
		if !p.memReleased && !p.fin.Load() && !isDone(p.h) {
			return true // its pins hold memory back until its memory table is written
		}
	}
	if c := t.cl; c != nil && c.run != nil {
		if p := c.run; !p.memReleased && !p.fin.Load() && !isDone(p.h) {
			return true // a materialization's pins, likewise
		}
	}
	return t.eviction != nil && !t.eviction.done.Load()
}

// backpressure is called after a write failed with err. For a budget shortage it installs
// finished work and otherwise waits for background work in flight (at most
// Options.BackpressureTimeout), and returns nil when the write should be retried: once
// something was installed (memory may have been freed). Otherwise it returns the error the
// write fails with, the state intact: err itself for other errors, when nothing in flight could
// free memory, and on timeout (ErrMemoryBudget, naming a pending background failure if one
// holds memory back); a sticky background failure; ErrNoSpace while the work that would free
// memory waits to be retried after a full disk. With nothing in flight it first seals the
// active segment, whose transform may free memory (at most once per call), retries a
// transform that failed for memory if memory was freed since, and waits for failed work
// whose backoff runs (retry.go) — that is what a write sees of a transient background
// failure: a wait, not the failure.
func (t *Engine) backpressure(err error) error {
	if !errors.Is(err, memory.ErrMemoryBudget) || t.bgErr != nil {
		return err
	}
	start := time.Now()
	deadline := start.Add(t.bpTimeout)
	t.bpWaits++
	defer func() { t.bpNanos += int64(time.Since(start)) }()
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	sealed := false
	for {
		t.checkSealed() // a roll refused for memory may have sealed the active segment
		if t.install() > 0 && !t.headFailed() {
			return nil
		}
		if t.bgErr != nil {
			t.bpFailures++
			return t.bgErr
		}
		if !t.inFlight() {
			if t.unsettled() {
				continue // a job finished after install looked
			}
			if !sealed {
				sealed = true
				if t.f.Stats().Segments > len(t.fifo) {
					if t.Seal() != nil {
						return err
					}
				}
			}
			// Slices evicted to the LsmStore free blocks for the next transform, whatever
			// the watermark says.
			if t.evict() {
				continue
			}
			if len(t.fifo) > 0 && t.fifo[0].failed && t.fifo[0].h == nil {
				t.kick() // retries the head: a flush, or a transform if memory was freed
			}
			// What the seal or the kick submitted may have finished already: wait for it or
			// install it, never take it for no work (a fast flush under -race did).
			if t.inFlight() || t.unsettled() {
				continue
			}
			if ns := t.pendingNoSpace(); ns != nil {
				t.bpFailures++
				return ns
			}
			if t.awaitRetry(deadline, true) {
				continue
			}
			t.bpFailures++
			return t.memoryError(err)
		}
		if timer == nil {
			timer = time.NewTimer(t.bpTimeout)
		}
		select {
		case <-t.wake:
		case <-timer.C:
			t.bpFailures++
			return t.memoryError(err)
		}
	}
}

// Backpressure is the write path's wait for memory (backpressure) offered to a write outside
// the engine: the root's operator state, held on the Go heap and charged to the budget. After
// such a write was refused with err (ErrMemoryBudget), it installs finished background work or
// waits for work in flight that frees memory, at most Options.BackpressureTimeout, and returns
// nil when the write should be retried; otherwise the error to fail with (err on timeout or
// when nothing can free memory, a sticky background failure, ErrNoSpace). Like a write, it
// may install. Owner goroutine only.
func (t *Engine) Backpressure(err error) error { return t.backpressure(err) }

// memoryError is the error of a write that waited for memory in vain: err (ErrMemoryBudget),
// naming the background failure that is being retried, if any, without wrapping it — the
// write did not fail for it.
func (t *Engine) memoryError(err error) error {
	if t.retrying > 0 && t.lastBgErr != nil {
		return fmt.Errorf("%w (background work that frees memory is being retried after: %v)", err, t.lastBgErr)
	}
	return err
}

// headFailed reports whether the transform at the head of the queue failed for memory and
// waits for a retry.
func (t *Engine) headFailed() bool {
	return len(t.fifo) > 0 && t.fifo[0].failed && t.fifo[0].h == nil && !t.inFlight()
}

// WaitBackground waits until the background work queued so far has finished and installs it
// (Store.WaitBackground): it runs a write's preamble (a sticky background failure is
// returned), then waits like Drain and also for the LSM compactions in flight (installing them;
// the compactions they make due are waited for too). Work that failed for a transient reason
// is retried on its backoff and waited for; if it still fails after Options.BackpressureTimeout
// of waiting, its last failure is returned (the work stays scheduled for retry), and a full
// disk's at once. Owner goroutine only.
func (t *Engine) WaitBackground() error {
	if err := t.before(); err != nil {
		return err
	}
	return t.idle()
}

// idle is WaitBackground without the write preamble.
func (t *Engine) idle() error {
	var deadline time.Time
	for {
		if err := t.Drain(); err != nil {
			return err
		}
		if len(t.lsmJobs) == 0 {
			waited, err := t.retryWait(&deadline, false)
			if err != nil {
				return err
			}
			if waited {
				continue
			}
			return nil
		}
		t.install()
		if len(t.lsmJobs) > 0 && t.ready.Load() == 0 {
			<-t.wake
		}
	}
}

// Drain waits for every background job but the LSM compactions, installing as they finish,
// until nothing is queued or in flight (tests; a transform that fails for memory ends it).
// Failed work is retried and waited for as by WaitBackground. Map iterations open now are
// invalidated if anything is installed.
func (t *Engine) Drain() error {
	if t.tail != nil {
		if err := t.awaitTail(); err != nil { // a lazy restore's tail first (doc.go, invariant 34)
			return err
		}
	}
	t.checkSealed()
	var deadline time.Time
	for {
		if t.install() > 0 {
			continue
		}
		if t.bgErr != nil {
			return t.bgErr
		}
		if !t.inFlight() {
			if t.unsettled() {
				continue
			}
			waited, err := t.retryWait(&deadline, true)
			if err != nil {
				return err
			}
			if waited {
				continue
			}
			if len(t.fifo) > 0 && t.fifo[0].failed {
				return fmt.Errorf("%w: transform of a sealed segment failed", memory.ErrMemoryBudget)
			}
			return nil
		}
		<-t.wake
	}
}

// retryWait is the retry step of Drain and idle, with nothing in flight: when failed work
// (memOnly: but LSM compactions) waits for its backoff, it waits for it and retries it
// (awaitRetry) and reports waited; it returns a full disk's failure at once, and the pending
// failure once *deadline (set at the first wait, Options.BackpressureTimeout ahead) has passed.
func (t *Engine) retryWait(deadline *time.Time, memOnly bool) (waited bool, err error) {
	if t.retrying == 0 {
		return false, nil
	}
	_, pending, ok := t.nextRetry(memOnly)
	if !ok {
		return false, nil
	}
	if ns := t.pendingNoSpace(); ns != nil {
		return false, ns
	}
	if deadline.IsZero() {
		*deadline = time.Now().Add(t.bpTimeout)
	}
	if !t.awaitRetry(*deadline, memOnly) {
		return false, pending
	}
	return true, nil
}

// reserveWindow is the number of recent transforms whose largest output sizes the transform
// reserve (sizeReserve).
const reserveWindow = 8

// sizeReserve sets the transform reserve from the transforms' measured output (doc.go,
// invariant 31): out >= 0 records an installed transform's slice bytes; out < 0 says a
// transform failed for memory, and the reserve goes to two segments until the next install.
// The size itself is reserveSize's, for the largest output of the last reserveWindow
// transforms beyond the free blocks the slice allocator holds now. Owner only; O(1).
func (t *Engine) sizeReserve(out int64) {
	seg := int64(t.segSize)
	need, free := 2*seg, int64(0) // a transform failed for memory: its output outgrew the reserve
	if out >= 0 {
		t.reserveOut[t.reserveN%reserveWindow] = out
		t.reserveN++
		need = 0
		for _, o := range t.reserveOut[:min(t.reserveN, reserveWindow)] {
			need = max(need, o)
		}
		as := t.alloc.Stats()
		free = int64(as.FreeBlocks) * int64(as.BlockSize)
	}
	t.reserveFree = free
	want := reserveSize(seg, need, free, t.budget.Limit(), t.budget.Reserve()-t.reserve)
	if want != t.reserve {
		t.budget.AddReserve(want - t.reserve)
		t.reserve = want
	}
}

// reserveSize returns the transform reserve, in bytes, for segments of seg bytes whose
// transforms build need bytes of slices (0 before one has installed) while the slice
// allocator holds free bytes of free blocks, in a budget of limit bytes of which others are
// reserved by other stores sharing it (doc.go, "Fixed costs" and invariant 31): need plus an
// eighth, less the free blocks (a transform fills them before it maps a segment), rounded up
// to whole segments (it maps new slice memory from the Pool a segment at a time), one segment
// at least and two at most; capped so that the reserves of all stores sharing the budget take
// at most a quarter of it and writers keep a segment and a quarter. One home for Open's
// reserve and sizeReserve's.
func reserveSize(seg, need, free, limit, others int64) int64 {
	need = max(need+need/8-free, 0)
	want := min(max((need+seg-1)/seg*seg, seg), 2*seg)
	return max(min(want, limit/4-others, limit-seg-seg/4-others), 0)
}
