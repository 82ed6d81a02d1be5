package engine

import (
	"context"
	"math"
	"time"

	"github.com/strata-db/strata/scheduler"
	"github.com/strata-db/strata/slice"
)

// The TTL sweep (doc.go, "TTL sweep"): on the owner goroutine, at most once per sweep period,
// it seals a FreshTable segment once its oldest data can have expired (sweepSealAge), and submits one compaction
// per slice run and per LsmStore file whose TTL summary says it holds expired data.

// sweepWrites is the number of writes between two looks at the clock for the sweep (after).
const sweepWrites = 64

// sweepState is the sweep's bookkeeping; owner goroutine only.
type sweepState struct {
	writes int   // writes left before after() looks at the clock (sweepDue)
	next   int64 // clock (ms) at or after which the next tick runs
	again  bool  // a tick's work was installed, a segment sealed or no slot was free: tick at the next kick
	pick   bool  // sweepCheck started a tick: sweepPick picks at the end of the kick
	now    int64 // the tick's clock
	within int64 // the tick's bound (ms)

	opened bool  // openAt is set
	openAt int64 // clock at the first SetTTL: files found at Open hold nothing younger

	activeID uint64 // the FreshTable's active segment at the last tick (fresh.Table.Active)
	activeAt int64  // clock of the first tick that saw it

	// Counters for Stats.
	ticks, jobs, seals, readBytes int64
}

// sweepPeriod is the sweep's period for a bound of within milliseconds: a fifth of it (at
// least 1 ms), so that data is reclaimed within 4 periods of its expiry (doc.go) with a
// period's slack for the jobs.
func sweepPeriod(within int64) int64 { return max(within/5, 1) }

// sweepDue reports whether a sweep tick is due: a state sweeps, and the period has passed
// since the last tick or the last tick's work made more work possible. after() asks it every
// sweepWrites writes (it reads the clock only then) and kicks when it is.
func (t *Engine) sweepDue() bool {
	t.sw.writes = sweepWrites
	tab := t.ttl.table.Load()
	within, _ := tab.Sweep()
	if within == 0 {
		t.sw.writes = math.MaxInt // no state sweeps: look again after SetTTL
		return false
	}
	now := tab.Now()
	t.noteActive(now)
	return t.sw.again || now >= t.sw.next
}

// noteActive records the clock at which the sweep first saw the FreshTable's active segment:
// sweepDue looks every sweepWrites writes, so activeAt trails the segment's first write by at
// most that many writes, not by a period (sweepCheck seals at sweepSealAge from it).
func (t *Engine) noteActive(now int64) {
	if id, ok := t.f.Active(); ok && id != t.sw.activeID {
		t.sw.activeID, t.sw.activeAt = id, now
	}
}

// sweepLag is the number of sweep periods a unit waits past its earliest expiry instant
// before the sweep rewrites it — a slice run, an LsmStore table file. Without the lag a unit
// holding copies of keys that are rewritten all the time — their oldest copy expiring at
// every tick — is rewritten at every tick: the flight demo's event-time clock made slice
// sweeps and LSM sweeps each rewrite their tier every period; a run swept after the lag holds
// nothing expired that the next lag does not also take.
const sweepLag = 3

// sweepSealAge returns how long (ms) a FreshTable segment stays active before the sweep seals
// it: until its oldest data can have expired (minTTL, the smallest TTL of a state that sweeps,
// after the segment was first seen) and a period more. Sealing sooner gains nothing — the
// run a transform makes of it is due sweepLag periods after its earliest expiry, which is at
// least activeAt + minTTL whenever the segment is sealed — and every seal costs a transform
// of a partly filled segment and the compactions of its small runs. With it every datum is
// still reclaimed within 4 periods of max(its expiry, its write) (doc.go, "TTL sweep"): the
// seal comes at most 2 periods after the oldest datum's expiry (a period of age, a period of
// tick), its run is due 3 after. Sealing at 1 and then 2 periods counted from the first
// write sealed the flight demo's segment every ~1.5 and ~2 periods (391, then 197 transforms
// of 1.3–1.7 MiB segments; 2026-12-04).
func sweepSealAge(minTTL, period int64) int64 {
	if minTTL > math.MaxInt64-period {
		return math.MaxInt64
	}
	return minTTL + period
}

// sweepCheck starts a sweep tick when one is due (sweepDue): it seals a FreshTable segment
// that stayed active sweepSealAge (its transform is queued here and submitted by the kick
// that called it) and marks the tick's picks, which sweepPick makes at the end of the same
// kick, after the tiers' own work took what it needs. Called at the start of kick (after
// every install, and whenever work may start).
func (t *Engine) sweepCheck() {
	t.sw.writes = sweepWrites
	tab := t.ttl.table.Load()
	within, _ := tab.Sweep()
	if within == 0 {
		t.sw.writes = math.MaxInt // no state sweeps: look again after SetTTL
		return
	}
	if t.bgErr != nil || t.closing {
		return
	}
	now := tab.Now()
	if now < t.sw.next && !t.sw.again {
		return
	}
	t.sw.again = false
	period := sweepPeriod(within)
	t.sw.next = now + min(period, math.MaxInt64-now) // saturated
	t.sw.ticks++
	t.sw.pick, t.sw.now, t.sw.within = true, now, within

	t.noteActive(now)
	if _, ok := t.f.Active(); ok && now-t.sw.activeAt >= sweepSealAge(tab.MinSweepTTL(), period) && t.openIters == 0 {
		if t.f.Seal() == nil {
			t.queueSealed()
			t.sw.seals++
			t.sw.again = true
		}
	}
}

// sweepPick makes the picks of the tick sweepCheck started, at the end of kick, so that the
// sweep takes only what transforms, compactions and LSM compactions left: one job per slice
// run holding expired data within the compaction limit, one per due LsmStore file while its
// levels are free. A kind of work it cannot pick now (no slot; a failed job's backoff) makes
// the next kick tick again, as does a sweep job that failed (install).
func (t *Engine) sweepPick() {
	if !t.sw.pick {
		return
	}
	t.sw.pick = false
	now := t.sw.now
	// Slices: while no slot is free, or compactions wait (a failure's backoff, memory), the
	// next kick ticks again — also the one that retries them.
	lag := sweepLag * sweepPeriod(t.sw.within)
	if free := t.maxCompact - len(t.compactions); free > 0 && !t.noCompact && !t.waiting(bgCompaction) {
		for _, c := range t.sl.PickExpired(subSat(now, lag), free) {
			t.submitSweep(c)
		}
	} else {
		t.sw.again = true
	}
	if t.db != nil && t.waiting(bgLSM) {
		t.sw.again = true
	} else if t.db != nil {
		// Files with a summary are due sweepLag periods after their earliest expiry;
		// files without one at unknownAt, as before (both instants shifted by the lag).
		due, unknownAt := subSat(now, lag), t.unknownAt(t.sw.within)
		if unknownAt != math.MaxInt64 {
			unknownAt = subSat(unknownAt, lag)
		}
		for {
			j := t.db.PickExpired(due, unknownAt)
			if j == nil {
				break
			}
			job := &lsmJob{j: j}
			t.lsmJobs = append(t.lsmJobs, job)
			t.run(bgLSM, BgTTLSweep, scheduler.Compaction, "ttl sweep "+j.String(), &job.done, &job.err, t.timed(j.Run))
		}
	}
}

// subSat returns a − b for b >= 0, saturated at math.MinInt64.
func subSat(a, b int64) int64 {
	if a < math.MinInt64+b {
		return math.MinInt64
	}
	return a - b
}

// submitSweep runs a slice sweep job like a compaction (installed by install's compaction
// loop), timed into the sweep's counters.
func (t *Engine) submitSweep(c *slice.Compaction) {
	job := &compactionJob{cs: []*slice.Compaction{c}}
	t.compactions = append(t.compactions, job)
	t.run(bgCompaction, BgTTLSweep, scheduler.Compaction, "ttl sweep", &job.done, &job.err, t.timed(job.run))
}

// timed wraps a sweep job's work so its running time is added to the sweep's (shared)
// counter.
func (t *Engine) timed(work func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		start := time.Now()
		defer func() { t.ttl.sweepNanos.Add(int64(time.Since(start))) }()
		return work(ctx)
	}
}

// lowerHolds is the SliceTable's LowerHolds: whether the lower tier may hold data with order
// hashes in [lo, hi] (a lower tier other than the LsmStore: assumed to). A lazy restore's tail
// not installed yet (or failed) is data below that no file shows: while it is pending the
// answer is yes, so no compaction drops a tombstone that hides a value of the tail
// (invariant 34: writes since Restore are newer than the tail).
func (t *Engine) lowerHolds(lo, hi uint64) bool {
	if t.tail != nil {
		return true
	}
	if t.db != nil {
		return t.db.Overlaps(lo, hi)
	}
	return t.low != nil
}

// sweepStats fills the sweep's part of Stats: the counters, and at the clock now the units
// the next tick would rewrite and an estimate of the expired bytes they hold.
func (t *Engine) sweepStats(st *Stats) {
	st.TTLSweepTicks, st.TTLSweepJobs, st.TTLSweepSeals = t.sw.ticks, t.sw.jobs, t.sw.seals
	st.TTLSweepReadBytes = t.sw.readBytes
	st.TTLSweepEntries, st.TTLSweepBytes = t.ttl.sweep.Entries.Load(), t.ttl.sweep.Bytes.Load()
	st.TTLSweepNanos = t.ttl.sweepNanos.Load()
	tab := t.ttl.table.Load()
	within, _ := tab.Sweep()
	if within == 0 {
		return
	}
	now := tab.Now()
	n, due, exp := t.sl.ExpiryStats(now)
	st.TTLSweepDueUnits, st.TTLSweepDueBytes, st.TTLExpiredPendingBytes = n, due, exp
	if t.db != nil {
		n, due, exp := t.db.ExpiryStats(now, t.unknownAt(within))
		st.TTLSweepDueUnits += n
		st.TTLSweepDueBytes += due
		st.TTLExpiredPendingBytes += exp
	}
}

// unknownAt is when a table file without a known TTL summary (found at Open, imported) is
// due for the sweep, for a bound of within ms: openAt + within − one period. Its data was
// stamped before Open, so what of it expires by then is reclaimed at the tick after, within
// the bound counted from Open, and its rewrite has a summary that tracks the rest. The
// price: every such file is rewritten once per Open (the summaries are not persisted).
func (t *Engine) unknownAt(within int64) int64 {
	d := within - sweepPeriod(within)
	if !t.sw.opened || t.sw.openAt > math.MaxInt64-d {
		return math.MaxInt64
	}
	return t.sw.openAt + d
}
