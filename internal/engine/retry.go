package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/strata-db/strata/lsm"
	"github.com/strata-db/strata/lsm/sstable"
	"github.com/strata-db/strata/memory"
)

// Failures of background work (doc.go, "Failures"). Every background job — transform, flush,
// slice compaction, relocation, eviction, LSM compaction, and with the changelog on
// materialization and changelog persist — ends in jobEnded, which decides,
// through transient, whether the failure stops the engine (sticky: bgErr) or is retried after
// a backoff (retry). Nothing else records a background failure.

// errInvariant marks a broken invariant found while running background work (a task that
// panicked): the engine stops (sticky), like a damaged file.
var errInvariant = errors.New("strata: invariant")

// transient reports whether err, the failure of background work or of Persist, may pass, so
// that the work is retried instead of stopping the engine. It is the one place that makes the
// distinction:
//
//	ErrCorruption (damage to a file, whatever its cause)   → false: sticky, the engine stops
//	errInvariant (a task panicked), sstable.ErrOutOfOrder  → false: a bug, retrying repeats it
//	ErrClosed, lsm.ErrMetaTooLarge                         → false: the caller's doing
//	anything else                                          → true
//
// "Anything else" is, first, the faults known to pass — EMFILE and ENFILE (descriptors come
// back when files are closed or the limit is raised), EIO (a flaky device, a read error a
// retry of the whole job may not meet again), ENOSPC (space is freed), EAGAIN, EINTR,
// ETIMEDOUT and deadlines (a remote file system or object store) — and, second, the I/O
// errors whose fate only their cause knows (EACCES after a permission change, EROFS after a
// remount): retrying them costs one attempt per MaxRetryDelay, whereas stopping would make
// every write fail and Close lose the state since the last persist point, which is the one
// outcome a passing fault must never have (DESIGN §4). Budget shortages (ErrMemoryBudget) and
// cancellations are not failures and never reach this function from jobEnded.
func transient(err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, ErrCorruption),
		errors.Is(err, errInvariant),
		errors.Is(err, errTailFailed),
		errors.Is(err, sstable.ErrOutOfOrder),
		errors.Is(err, ErrClosed),
		errors.Is(err, lsm.ErrMetaTooLarge):
		return false
	}
	return true
}

// Transient reports whether an error of Persist (or a background failure) may pass: the
// engine is intact and Persist may be called again. False for damage (ErrCorruption), a
// broken invariant, ErrClosed and a registry too large to persist. The root package's Close
// keeps the Store open exactly when this is true.
func Transient(err error) bool { return transient(err) }

// The retry schedule of background work that failed for a transient reason: the first retry
// MinRetryDelay after the failure, each further consecutive failure of the same kind of work
// doubling the delay, up to MaxRetryDelay. A full disk (ErrNoSpace) waits NoSpaceRetry from
// the first failure: a retry rewrites whole tables, and a disk rarely frees space in
// milliseconds.
const (
	MinRetryDelay = 10 * time.Millisecond
	MaxRetryDelay = time.Second
	// NoSpaceRetry is the delay before failed background work is tried again after a full
	// disk (ErrNoSpace). While it runs, writes report the ErrNoSpace (doc.go, "Failures").
	NoSpaceRetry = time.Second
)

// retryDelay is the wait before the retry that follows the fails-th consecutive failure (fails
// >= 1) of one kind of background work, which failed with err.
func retryDelay(fails int, err error) time.Duration {
	if errors.Is(err, ErrNoSpace) {
		return NoSpaceRetry
	}
	d := MinRetryDelay
	for i := 1; i < fails && d < MaxRetryDelay; i++ {
		d *= 2
	}
	return min(d, MaxRetryDelay)
}

// bgKind is a kind of background work, with its own retry schedule: a compaction that keeps
// failing does not hold back the evictions that free memory.
type bgKind uint8

const (
	bgTransform  bgKind = iota // transforms and flushes of the head sealed segment
	bgCompaction               // slice compactions
	bgRelocation               // relocations
	bgEviction                 // evictions
	bgLSM                      // LSM compactions
	// The changelog's work against the checkpoint storage (remote): not retried by kick but
	// by pollChangelog, which submits it only once its backoff has passed; never reported to
	// writes nor waited for by Drain or WaitBackground (the local state does not depend on it:
	// a checkpoint-storage outage must not stop writes, doc.go "Changelog").
	bgMaterialization // background materializations
	bgPersist         // changelog persists (background, or a writer's own when the buffer is full)
	numBgKinds
)

// remote reports whether k is work against the checkpoint storage (bgMaterialization,
// bgPersist): retried on its own schedule by pollChangelog, invisible to writes.
func (k bgKind) remote() bool { return k >= bgMaterialization }

// backoff is the retry state of one kind of background work.
type backoff struct {
	fails  int       // consecutive transient failures; 0: none pending
	at     time.Time // not retried before
	trying bool      // a retry was submitted and has not ended
	err    error     // the last failure (wrapped: "strata: background … failed: …")
}

// waiting reports whether work of kind k must not be submitted yet (its backoff runs). It
// reads the clock only while a failure of k is pending.
func (t *Engine) waiting(k bgKind) bool {
	b := &t.retry[k]
	return b.fails > 0 && time.Now().Before(b.at)
}

// submitted notes that work of kind k was submitted: if it is a retry, the engine waits for it
// to end before another one.
func (t *Engine) submitted(k bgKind) {
	if b := &t.retry[k]; b.fails > 0 {
		b.trying = true
	}
}

// jobEnded records the end of a background job of kind k: err nil when it succeeded (its kind's
// failures are over), else its failure, which is ignored for a budget shortage or a
// cancellation (the install logic retries those), stops the engine when it is not transient
// (bgErr: writes report it from now on), and otherwise schedules a retry of the kind after its
// backoff. Counted in Stats (BackgroundErrors, BackgroundRetries, LastBackgroundError).
func (t *Engine) jobEnded(k bgKind, what string, err error) {
	b := &t.retry[k]
	b.trying = false
	switch {
	case err == nil:
		if b.fails > 0 {
			b.fails, b.err = 0, nil
			t.retrying--
		}
		return
	case errors.Is(err, memory.ErrMemoryBudget), errors.Is(err, context.Canceled), errors.Is(err, lsm.ErrJobNotRun):
		return
	}
	werr := wrapBG(what, err)
	t.bgErrors++
	t.lastBgErr = werr
	if !transient(err) {
		if t.bgErr == nil {
			t.bgErr = werr
		}
		return
	}
	if b.fails == 0 {
		t.retrying++
	}
	b.fails++
	b.err = werr
	d := retryDelay(b.fails, err)
	if k == bgMaterialization {
		// A materialization's retry cuts again: it seals the active segment and opens a
		// generation, so it waits at least as long as one that could not start.
		d = max(d, materializationRetry)
	}
	b.at = time.Now().Add(d)
	t.bgRetries++
}

// stick stops the engine for a failure found outside a job's end (a broken invariant while
// installing): writes report it from now on.
func (t *Engine) stick(what string, err error) {
	werr := wrapBG(what, err)
	t.bgErrors++
	t.lastBgErr = werr
	if t.bgErr == nil {
		t.bgErr = werr
	}
}

// wrapBG wraps a background failure with the work that failed.
func wrapBG(what string, err error) error {
	return fmt.Errorf("strata: background %s failed: %w", what, err)
}

// retryCheck is the slow path of a write's preamble while background failures are pending
// (retrying > 0): once a kind's backoff has passed it kicks the scheduler, which retries it;
// while a full disk's backoff runs it returns that ErrNoSpace, which the write reports.
// Other transient failures are not reported: the write goes ahead (and gets backpressure if
// memory runs short).
//
//go:noinline
func (t *Engine) retryCheck() error {
	now := time.Now()
	due := false
	var noSpace error
	for k := range t.retry {
		b := &t.retry[k]
		switch {
		case b.fails == 0 || b.trying || bgKind(k).remote():
		case !now.Before(b.at):
			due = true
		case noSpace == nil && errors.Is(b.err, ErrNoSpace):
			noSpace = b.err
		}
	}
	if due {
		t.kick()
	}
	return noSpace
}

// settleRetries ends the backoff of every kind whose retry is due but which kick did not
// resubmit: nothing of that kind is left to do (the compaction is no longer due, the eviction
// no longer needed), so nothing is pending. Called by kick after it submitted what it could.
func (t *Engine) settleRetries() {
	now := time.Now()
	for k := range t.retry {
		b := &t.retry[k]
		if b.fails > 0 && !b.trying && !now.Before(b.at) && !bgKind(k).remote() {
			b.fails, b.err = 0, nil
			t.retrying--
		}
	}
}

// nextRetry returns the earliest time a pending retry is due and the failure it retries, or ok
// false when no retry waits (none pending, or every pending one is in flight). memOnly leaves
// out LSM compactions, which free no memory.
func (t *Engine) nextRetry(memOnly bool) (at time.Time, err error, ok bool) {
	for k := range t.retry {
		b := &t.retry[k]
		if b.fails == 0 || b.trying || memOnly && bgKind(k) == bgLSM || bgKind(k).remote() {
			continue
		}
		if !ok || b.at.Before(at) {
			at, err, ok = b.at, b.err, true
		}
	}
	return at, err, ok
}

// pendingNoSpace returns the failure of a pending retry for a full disk whose backoff still
// runs, or nil.
func (t *Engine) pendingNoSpace() error {
	if t.retrying == 0 {
		return nil
	}
	now := time.Now()
	for k := range t.retry {
		if b := &t.retry[k]; b.fails > 0 && !b.trying && now.Before(b.at) && errors.Is(b.err, ErrNoSpace) && !bgKind(k).remote() {
			return b.err
		}
	}
	return nil
}

// awaitRetry waits, for at most until deadline, for the earliest pending retry (memOnly: of
// work that frees memory) to be due, or for a job to finish (wake), then kicks the scheduler.
// It reports false when no retry waits or the deadline has passed.
func (t *Engine) awaitRetry(deadline time.Time, memOnly bool) bool {
	at, _, ok := t.nextRetry(memOnly)
	if !ok {
		return false
	}
	now := time.Now()
	if !now.Before(deadline) {
		return false
	}
	if deadline.Before(at) {
		at = deadline
	}
	if d := at.Sub(now); d > 0 {
		timer := time.NewTimer(d)
		select {
		case <-t.wake: // a job finished (ready is set): the caller's loop installs it
		case <-timer.C:
		}
		timer.Stop()
	}
	t.kick()
	return true
}
