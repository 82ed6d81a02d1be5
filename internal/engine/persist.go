package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/strata-db/strata/memory"
)

// Persisting (Store.Close, and Open over an existing directory).
//
// A Store with a directory keeps its state in three tiers, and only the LsmStore is on disk.
// Close persists: it waits for the background work, moves every slice and every FreshTable
// segment into L0 files of the LsmStore, then records a persist point (lsm.DB.Persist): the
// LsmStore's version, the last sequence number, and the caller's metadata (the root's state
// registry). Open recovers the LsmStore as of its last persist point (installs after it —
// evictions and compactions of a session that crashed — are dropped by lsm's recovery), returns
// the metadata (Recovered), and starts the FreshTable's sequence numbers after the persisted
// one, so new writes are newer than everything on disk.
//
// Install order (lsm doc.go, invariant 6: for every key, a file installed later holds newer
// versions). The tiers already hold data in age order: the LsmStore (oldest), the SliceTable's
// chains (each newer than what was evicted from it), the FreshTable's sealed segments in seal
// order, the active segment (newest). Close installs in that order: the slices through
// evictions — each takes only units of its chains' oldest runs, as in normal operation — until
// the SliceTable is empty; then one L0 file per FreshTable segment, oldest first.
//
// Crash safety comes from lsm: a crash before Persist returns leaves the previous persist
// point; its files are kept until the next Persist. Nothing else is written.

// Persist moves every slice and FreshTable segment into the LsmStore and records a persist
// point holding meta (the root's state registry) with the engine's sequence number, so that
// Open recovers every write acknowledged so far. The engine stays open and readable, whatever
// the outcome: on error nothing is lost from memory and the on-disk persist point is the
// previous one. It needs no background work: failures of background work that may pass (an
// LSM compaction failing with EMFILE or EIO, doc.go "Failures") are ignored, since persist
// moves the tiers itself. Errors: ErrNoSpace, I/O errors (EMFILE, EIO, …) — Transient: call
// Persist again once the cause has passed —, ErrCorruption, a sticky background failure.
// Panics when the engine has no LsmStore (HasDisk false). Owner goroutine only.
func (t *Engine) Persist(meta []byte) error {
	if err := t.persist(); err != nil {
		return err
	}
	return lowerError(t.db.Persist(t.f.Seq(), meta))
}

// persist moves everything the engine holds in memory into the LsmStore in install order (see
// doc.go, "Persisting"): it waits for the background work to end (submitting nothing new), evicts
// every slice, then writes each FreshTable segment, oldest first, as an L0 file. The tiers
// keep serving reads throughout; on error nothing is lost from memory (a failed eviction is
// cancelled, a segment stays in the FreshTable) and the on-disk persist point is unchanged.
func (t *Engine) persist() error {
	if t.tail != nil {
		if err := t.awaitTail(); err != nil { // the lazy tail goes to L0 first (invariant 34)
			return err
		}
	}
	start := time.Now()
	defer func() { t.persistNanos += int64(time.Since(start)) }()
	t.closing = true
	defer func() { t.closing = false }()
	t.checkSealed()
	for {
		t.install()
		if !t.inFlight() && len(t.lsmJobs) == 0 {
			if t.unsettled() {
				continue
			}
			break
		}
		<-t.wake
	}
	// Background failures that may pass are no reason not to persist: what failed (an LSM
	// compaction, an eviction) is optional or redone below. Only a sticky one (damage, a
	// broken invariant) is.
	if t.bgErr != nil {
		return t.bgErr
	}
	ctx := context.Background()
	for {
		e, ok := t.sl.PickEviction()
		if !ok {
			break
		}
		sink := evictSink{low: t.low}
		err := e.Run(ctx, &sink)
		if err == nil {
			err = t.low.Install(sink.pending, t.f.Seq())
		}
		if err != nil {
			if sink.pending != nil {
				t.low.Discard(sink.pending)
			}
			if cerr := t.sl.CancelEviction(e); cerr != nil {
				panic("strata: invariant: cancelling an eviction at Close: " + cerr.Error())
			}
			return fmt.Errorf("strata: persisting slices: %w", err)
		}
		t.bumpEpoch()
		if err := t.sl.InstallEviction(e); err != nil {
			panic("strata: invariant: installing an eviction at Close: " + err.Error())
		}
		t.evictions++
		t.persistFiles++
	}
	if n := t.sl.Stats().Slices; n != 0 {
		return fmt.Errorf("strata: invariant: %d slices left after evicting all", n)
	}
	if err := t.f.Seal(); err != nil {
		return fmt.Errorf("strata: persisting the active segment: %w", err)
	}
	for _, seg := range t.f.Sealed() {
		ents, err := t.segmentEntries(ctx, seg)
		if err == nil {
			var p any
			p, err = t.low.Evict(ents)
			ents.release()
			if err == nil {
				if err = t.low.Install(p, t.f.Seq()); err != nil {
					t.low.Discard(p)
				}
			}
		}
		if err != nil {
			return fmt.Errorf("strata: persisting a segment: %w", err)
		}
		// The segment is now in the lower tier: it leaves the FreshTable (and the transform
		// queue) at once, as a background flush's does. Kept, a Close that fails later (at
		// Persist) would leave list appends both in memory and on disk, read twice, and a
		// retried Close would persist the duplicates.
		if len(t.fifo) > 0 && t.fifo[0].seg == seg {
			t.fifo[0] = nil
			t.fifo = t.fifo[1:]
		}
		t.bumpEpoch()
		if err := t.f.DropSealed(seg); err != nil {
			return fmt.Errorf("strata: dropping a persisted segment: %w", err)
		}
		t.lastFresh = t.budget.UsedBy(memory.PurposeFreshData)
		t.persistFiles++
	}
	t.noteL0()
	return nil
}
