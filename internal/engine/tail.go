package engine

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/strata-db/strata/changelog"
	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/scheduler"
)

// The lazy tail (doc.go, "Lazy tail"; invariants 32-38): a lazy restore's log tail, collected
// by Restore, written by a background driver and installed by the owner at the first call
// that needs it (awaitTail).

// tailJob is one restore's lazy tail: the collected sources queued by replaySource, the
// driver's Handle and output, and the restore steps deferred to its install.
type tailJob struct {
	srcs   []tailSource // queued by the owner; read by the driver once submitted
	maxSeq uint64       // the FreshTable's seq at Restore: no record may be above it
	h      *scheduler.Handle
	// batches are the driver's output, every batch written (the last one may have failed),
	// appended by the driver and read by the owner only after h completed.
	batches []*bulkBatch
	failed  bool // the job failed: every later awaitTail returns err (invariant 35)
	// forget: SetTTL widened the TTL sweep while the tail was pending. The driver noted its
	// files' expiry summaries under the table of its time, and ForgetExpiry reached only the
	// files installed then, so the install forgets again (invariant 38).
	forget bool
	err    error // the failure
	// persist and done are Restore's deferred steps 8 (the persist point) and 9 (the marker)
	// (invariant 36); nil: none (a tail installed during Restore itself).
	persist, done func() error
	start         time.Time    // when the first source was queued
	wrote         atomic.Int64 // nanoseconds from start to the driver's end (0: running)
}

// tailSource is one restored checkpoint's collected tail, the object errors name, and the
// index of its value records (nil: none could be mapped; reads then wait for the tail).
type tailSource struct {
	b      *changelog.Batch
	object string
	idx    *tailIndex
}

// TailStats describes the lazy tail of a restore (TailStats; all zero without one).
type TailStats struct {
	// Records are the records collected; Applied and Skipped split them as the Resolver did
	// (known once installed); Files the L0 files installed.
	Records, Applied, Skipped int64
	Files                     int
	// Pending: the tail is queued or being written, not installed yet.
	Pending bool
	// Served counts the Gets the pending tail answered from its value index without waiting
	// for the driver (invariant 39); Collisions those its index could not tell from another
	// key's (a 32-bit tag met in a probe sequence), which waited for the tail instead.
	Served, Collisions int64
	// Written is the time from Restore's queueing of the tail to the driver's end (while
	// Pending, nonzero once the driver ended and its files wait for the install); Installed
	// to the install (and the deferred persist); Waited is what the owner waited for the
	// driver in awaitTail.
	Written, Installed, Waited time.Duration
}

// TailStats returns the figures of the Store's lazy tail (doc.go, "Lazy tail"). Owner only.
func (t *Engine) TailStats() TailStats {
	st := t.tailStats
	if j := t.tail; j != nil && !j.failed {
		st.Pending = true
		st.Written = time.Duration(j.wrote.Load()) // nonzero once the driver ended
	}
	return st
}

// queueTail queues the collected tail b of one restored checkpoint (object names it in
// errors) for the lazy tail's driver (invariant 32), with the index of its value records
// (invariant 39). Owner only, during Restore. Errors: a *base.CorruptionError of a value
// record without a composite key (nothing queued; the caller still owns b). An index that
// cannot be mapped is no error: the tail's reads then wait for the driver, as before.
func (t *Engine) queueTail(b *changelog.Batch, object string) error {
	idx, err := newTailIndex(b, object)
	if err != nil {
		if _, ok := errors.AsType[*base.CorruptionError](err); ok {
			return err
		}
		idx = nil
	}
	if t.tail == nil {
		t.tail = &tailJob{maxSeq: t.f.Seq(), start: time.Now()}
	}
	t.tail.srcs = append(t.tail.srcs, tailSource{b, object, idx})
	t.tailStats.Records += int64(b.Len())
	return nil
}

// tailGet answers a Get of a value key (hash h) that no tier above the tail holds, while a
// lazy tail is pending (invariant 39): from the sources' indexes, the value copied into the
// lower reader's arena. ok is false when the tail has no value record of key (then the tiers
// below it hold the answer, or nothing does). When an index cannot tell (a tag collision,
// tailIndex) it waits for the tail and reads the tiers below, which then hold it; an error of
// that wait comes back as failed (lowFailed). Owner only; t.tail not nil and serving.
func (t *Engine) tailGet(h uint64, key []byte) (v []byte, st status, ok bool) {
	for _, s := range t.tail.srcs {
		v, st, ok, known := s.idx.get(h, key)
		if !known {
			t.tailStats.Collisions++
			if err := t.awaitTail(); err != nil {
				return nil, t.lowFailed(err), true
			}
			return nil, absent, false // installed: the lower tier holds the tail now
		}
		if ok {
			t.tailStats.Served++
			if st == found {
				v = t.lr.copy(v)
			}
			return v, st, true
		}
	}
	return nil, absent, false
}

// tailServes reports whether the pending lazy tail answers value reads itself (invariant 39):
// not failed, and every source indexed. Owner only; t.tail not nil.
func (t *Engine) tailServes() bool {
	j := t.tail
	if j.failed || len(j.srcs) == 0 {
		return false
	}
	for _, s := range j.srcs {
		if s.idx == nil {
			return false
		}
	}
	return true
}

// tailWritten reports whether the pending lazy tail's driver has ended (its files wait for
// awaitTail), without waiting. Owner only; t.tail not nil.
func (t *Engine) tailWritten() bool {
	j := t.tail
	if j.h == nil {
		return false
	}
	select {
	case <-j.h.Done():
		return true
	default:
		return false
	}
}

// startTail submits the driver of the queued tail, if not yet submitted: one Transform task
// that writes every source's batches as bulkWrite does, its parts on the lanes of
// forEachInTask, and keeps their pending files for awaitTail. Owner only.
func (t *Engine) startTail() {
	j := t.tail
	if j == nil || j.h != nil || j.failed {
		return
	}
	h, err := t.sched.SubmitMetered(scheduler.Transform, "lazy tail", t.meter(BgTransform), func(ctx context.Context) (err error) {
		defer func() { j.wrote.Store(max(int64(time.Since(j.start)), 1)) }()
		defer recoverInto(&err, "lazy tail")
		if t.tailHook != nil {
			t.tailHook()
		}
		for _, s := range j.srcs {
			err := t.bulkWrite(ctx, s.b, nil, s.object, j.maxSeq, t.forEachInTask, func(bb *bulkBatch) error {
				j.batches = append(j.batches, bb)
				return bb.err
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.failTail(err)
		releaseSources(j) // the driver never ran: nothing reads them
		return
	}
	j.h = h
}

// awaitTail waits for the lazy tail's driver and installs its files — every batch's in one
// lower-tier install, batches in seq order — then runs Restore's deferred steps (the persist
// point, the marker): invariants 33 to 36. On success the job is gone (t.tail nil). On
// failure the job stays, failed, the error sticky (failTail), and every later call returns it.
// Call only when t.tail is not nil. Owner only.
func (t *Engine) awaitTail() error {
	j := t.tail
	if j.failed {
		return j.err
	}
	if j.h == nil {
		if t.startTail(); j.failed {
			return j.err
		}
	}
	t0 := time.Now()
	err := j.h.Wait()
	releaseSources(j)
	t.tailStats.Waited += time.Since(t0)
	t.tailStats.Written = time.Duration(j.wrote.Load())
	var ps []any
	for _, bb := range j.batches {
		ps = append(ps, bb.ps...)
	}
	if err == nil && len(ps) > 0 {
		if err = t.installBulkParts(ps); err == nil && j.forget && t.db != nil {
			t.db.ForgetExpiry()
		}
	}
	if err != nil {
		for _, p := range ps {
			t.low.Discard(p)
		}
		j.batches = nil
		return t.failTail(err)
	}
	for _, bb := range j.batches {
		t.installedBulk(bb)
		t.tailStats.Applied += bb.applied
		t.tailStats.Skipped += bb.skipped
	}
	t.tailStats.Files += len(ps)
	j.batches = nil // the collected records went after Wait (releaseSources)
	t.tail = nil
	for _, f := range []func() error{j.persist, j.done} {
		if f == nil {
			continue
		}
		if err := f(); err != nil {
			t.tail = j
			return t.failTail(err)
		}
	}
	t.tailStats.Installed = time.Since(j.start)
	return nil
}

// errTailFailed wraps the failure of a lazy tail (failTail): final for the Store, whatever
// the cause (not Transient: the root's Close closes), since the restore did not complete.
var errTailFailed = errors.New("strata: the changelog tail of a lazy restore failed (restore again)")

// failTail makes err the lazy tail's failure: the job stays, failed, so every later read
// returns it, and the engine's sticky error is set (invariant 35). It returns the wrapped
// error. Owner only.
func (t *Engine) failTail(err error) error {
	j := t.tail
	j.failed = true
	j.err = fmt.Errorf("%w: %w", errTailFailed, err)
	if t.bgErr == nil {
		t.bgErr = j.err
	}
	return j.err
}

// deferTailPersist makes the persist point of Restore's step 8 wait for the lazy tail's
// install (invariant 36): the timer file is written now, with the restored timers, and the
// persist point naming it, with meta(its ref), is recorded by awaitTail once the tail's files
// are installed; done (step 9, the marker) follows it. Errors: the timer file's. Owner only.
func (t *Engine) deferTailPersist(meta func(TimerFileRef) []byte, done func() error) error {
	var ref TimerFileRef
	if t.timerCount() > 0 {
		var err error
		if ref, err = writeTimerFile(t.tm.fs, t.tm.dir, t.timerSources()); err != nil {
			return err
		}
	}
	m := meta(ref)
	t.tail.persist = func() error {
		if err := lowerError(t.db.Persist(t.f.Seq(), m)); err != nil {
			return fmt.Errorf("persisting the replayed changelog and the timers: %w", err)
		}
		t.tm.file = ref
		removeStrayTimerFiles(t.tm.fs, t.tm.dir, ref.Name)
		return nil
	}
	t.tail.done = done
	return nil
}

// dropTail ends a lazy tail at Close, after the scheduler stopped (its driver ended or never
// ran): its pending files are discarded, nothing is installed or persisted (invariant 36).
func (t *Engine) dropTail() {
	j := t.tail
	if j == nil {
		return
	}
	for _, bb := range j.batches {
		for _, p := range bb.ps {
			t.low.Discard(p)
		}
	}
	releaseSources(j)
	j.batches = nil
	t.tail = nil
}

// releaseSources releases the collected tails of j's sources (their off-heap buffers:
// changelog.CollectOptions.OffHeap) once its driver can no longer read them — it ended, or
// the scheduler stopped before it ran — and forgets them. An unmap error leaves the mapping
// and nothing else.
func releaseSources(j *tailJob) {
	for _, s := range j.srcs {
		if s.idx != nil {
			s.idx.release()
		}
		s.b.Release()
	}
	j.srcs = nil
}

// tailFailed is awaitTail for the batched reads (GetBatch, MapGetBatch) of n keys: on
// failure every key's status is failed, TakeErr gives the error, and it reports true.
func (t *Engine) tailFailed(n int, vals [][]byte, sts []Status) bool {
	err := t.awaitTail()
	if err == nil {
		return false
	}
	for i := range n {
		vals[i], sts[i] = nil, failed
	}
	t.readErr = err
	return true
}
