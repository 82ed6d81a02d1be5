package engine

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/lsm"
	"github.com/strata-db/strata/scheduler"
)

// AcquireCoarseClock is scheduler.AcquireClock for the root package, which names no scheduler
// (DESIGN §4a): the coarse processing-time clock of a Store's TTL states — milliseconds, one
// atomic load per read, updated every scheduler.ClockTick by one process-wide goroutine that
// runs while any hold is open. release must be called once (Close, Discard). Safe for
// concurrent use.
func AcquireCoarseClock() (now func() int64, release func()) { return scheduler.AcquireClock() }

// TTL cleanup in the tiers (doc.go, "TTL"): the root package gives the engine a table of the
// states with a TTL (SetTTL: each state's TTL, the layout of its timestamps, which cleanups it
// wants) and the clock; slice compactions, LSM compactions and a checkpoint's memory table run
// every entry through a base.TTLFilter made from the table current when the job starts.

// ttlShared is what the owner shares with background jobs about TTL: the current table
// (replaced whole, never changed in place) and the counters of what cleanup removed.
type ttlShared struct {
	table atomic.Pointer[base.TTLTable]
	// Compaction: slice and LSM compactions; Snapshot: checkpoints' memory tables; Sweep:
	// the compactions of the TTL sweep (sweep.go), not counted in Compaction.
	compaction, snapshot, sweep base.TTLCounters
	// sweepNanos is the time sweep jobs ran on their workers, in total.
	sweepNanos atomic.Int64
}

// SetTTL installs tab as the TTL of the engine's states: the jobs started from now on clean
// up as it says (a job in flight keeps the table it started with). nil: no state has a TTL.
// Owner goroutine only; tab must not change afterwards.
func (t *Engine) SetTTL(tab *base.TTLTable) {
	old := t.ttl.table.Swap(tab)
	if tab.SweepsMore(old) {
		// A state the LsmStore's summaries were not noted for: its data from before Open may
		// be in any file (slices hold only data written since Open, under a table that knew
		// its state). Every file is due at the bound counted from now (sweep.go, unknownAt).
		t.sw.opened, t.sw.openAt = true, tab.Now()
		if t.db != nil {
			t.db.ForgetExpiry()
		}
		if t.tail != nil {
			t.tail.forget = true // its files are not installed yet (tail.go)
		}
	}
	t.sw.next, t.sw.writes = 0, 0 // the new table may sweep sooner: judge at the next check
}

// note is the tiers' Expiry hook (slice.Options.Expiry, lsm.Options.Expiry): it adds e's TTL
// data to a slice's or file's summary by the table current now.
func (s *ttlShared) note(x *base.Expiry, e *base.Entry) { s.table.Load().Note(x, e) }

// counters returns the counters of a compaction's removals: the sweep's or compactions'.
func (s *ttlShared) counters(sweep bool) *base.TTLCounters {
	if sweep {
		return &s.sweep
	}
	return &s.compaction
}

// sliceFilter is the SliceTable's Options.NewFilter: a TTL filter for one memory compaction,
// or nil when no state cleans up in compactions.
func (s *ttlShared) sliceFilter(bottom, sweep bool) base.Filter {
	tab := s.table.Load()
	if tab == nil || !tab.Cleans(false) {
		return nil
	}
	f := &base.TTLFilter{Table: tab, Bottom: bottom, Counters: s.counters(sweep)}
	return f.Filter
}

// lsmFilter is the LsmStore's Options.NewFilter: DefaultFilter (tombstones at the bottom),
// then the TTL filter of the job.
func (s *ttlShared) lsmFilter(sweep bool) lsm.CompactionFilter {
	tab := s.table.Load()
	if tab == nil || !tab.Cleans(false) {
		return lsm.DefaultFilter
	}
	f := &base.TTLFilter{Table: tab, Counters: s.counters(sweep)}
	return func(e *base.Entry, bottom bool) (base.Decision, *base.Entry) {
		if d, ne := lsm.DefaultFilter(e, bottom); d != base.FilterKeep {
			return d, ne
		}
		f.Bottom = bottom
		return f.Filter(e)
	}
}

// snapshotFilter returns the filter of a checkpoint's memory table, or nil when no state
// cleans up in snapshots. The memory table is resolved as a compaction that is never at the
// bottom (the checkpoint's tables lie below), so the filter judges each resolved entry as a
// non-bottom compaction's filter does: an expired value or map entry becomes a tombstone, a
// list batch loses its expired elements.
func (s *ttlShared) snapshotFilter() *base.TTLFilter {
	tab := s.table.Load()
	if tab == nil || !tab.Cleans(true) {
		return nil
	}
	return &base.TTLFilter{Table: tab, Snapshot: true, Counters: &s.snapshot}
}

// expired reports whether v, the value of composite key key, belongs to a state with a TTL
// (TTLValue layout) and has expired by the clock: the row cache never returns such a value
// (rowcache.go, invariant 4). A read of a state without a TTL costs an atomic load and a
// table lookup; the clock is read only for TTL states.
func (s *ttlShared) expired(key, v []byte) bool {
	tab := s.table.Load()
	if tab == nil {
		return false
	}
	st, ok := tab.StateOf(key)
	if !ok || st.Layout != base.TTLValue {
		return false
	}
	ts, ok := base.TS(v)
	return ok && base.Expired(ts, st.TTL, tab.Now())
}

// CompactAll compacts every tier down, as RocksDB's CompactRange over the whole key space
// (Store.CompactAll): it seals the FreshTable's active segment and waits for its transform,
// merges each bucket's whole chain of slices into one run (slice.Table.PickChain), and then
// compacts the LsmStore into its last level (CompactLSM) — every compaction applying the
// compaction filter, so TTL compaction cleanup reaches all the data (dropping expired data, or
// leaving a tombstone where older data may lie below). The slice compactions run on the owner
// goroutine, one bucket at a time, after the background work (WaitBackground); ctx is checked
// between buckets and passed to each. Errors: WaitBackground's, a compaction's
// (ErrMemoryBudget when its output does not fit: the chain is left as it was), ctx's. Owner
// goroutine only.
func (t *Engine) CompactAll(ctx context.Context) error {
	if err := t.WaitBackground(); err != nil {
		return err
	}
	if t.f.Stats().DataBytes > 0 {
		if err := t.Seal(); err != nil {
			return err
		}
		if err := t.WaitBackground(); err != nil {
			return err
		}
	}
	installed := false
	defer func() {
		if installed {
			t.bumpEpoch()
		}
	}()
	for b := range t.sl.Buckets() {
		if err := ctx.Err(); err != nil {
			return err
		}
		c, ok := t.sl.PickChain(b)
		if !ok {
			continue
		}
		if err := c.Run(ctx); err != nil {
			if cerr := t.sl.CancelCompaction(c); cerr != nil {
				panic("strata: invariant: cancelling a compaction: " + cerr.Error())
			}
			return fmt.Errorf("strata: full compaction of bucket %d: %w", b, err)
		}
		if err := t.sl.InstallCompaction(c); err != nil {
			panic("strata: invariant: installing a compaction: " + err.Error())
		}
		installed = true
		t.compacted++
	}
	return t.CompactLSM()
}

// CompactLSM compacts every level of the LsmStore into the next, top down, until all the data
// is in the last level, on the owner
// goroutine, whether due or not (tests: a TTL cleanup that must reach the bottom). It waits
// for the background work first. Errors: a job's; nil without an LsmStore.
func (t *Engine) CompactLSM() error {
	if err := t.WaitBackground(); err != nil {
		return err
	}
	if t.db == nil {
		return nil
	}
	for l := 0; l < lsm.MaxLevels-1; l++ {
		for {
			j := t.db.CompactLevel(l)
			if j == nil {
				break
			}
			err := j.Run(context.Background())
			if ierr := t.db.InstallCompaction(j); err == nil {
				err = ierr
			}
			if err != nil {
				return err
			}
			t.lsmCompactions++
		}
	}
	t.noteL0()
	t.bumpEpoch()
	return nil
}
