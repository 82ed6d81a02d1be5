package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/strata-db/strata/checkpoint"
)

// The restore sequence (doc.go, "The restore sequence"): Restore makes a Store's directory
// from checkpoints and returns the engine opened over it, with the registry, operator state
// and writer identity the root wraps in a Store. The steps' numbers are the table's in doc.go.

// Restore's errors that the root re-exports (strata.ErrMaxParallelismMismatch,
// ErrOverlappingHandles, ErrOperatorStateTooLarge).
var (
	// ErrMaxParallelismMismatch: a checkpoint was written with another MaxParallelism than the
	// Store's (key groups would not line up).
	ErrMaxParallelismMismatch = errors.New("strata: checkpoint max parallelism differs from the store's")
	// ErrOverlappingHandles: two checkpoints given to Restore hold one key group of the
	// Store's range.
	ErrOverlappingHandles = errors.New("strata: restored checkpoints overlap in key groups")
	// ErrOperatorStateTooLarge: operator state beyond MaxOperatorStateSize.
	ErrOperatorStateTooLarge = errors.New("strata: operator state too large")
)

// RestoreHandle names one checkpoint given to Restore: its lineage (Owner) and id.
type RestoreHandle struct {
	Owner string
	ID    uint64
}

// RestoreSpec is what Restore needs beside the engine's Options.
type RestoreSpec struct {
	// Storage holds the checkpoints of Handles.
	Storage checkpoint.Storage
	// Handles are the checkpoints to restore from (every old subtask's, for operator state).
	Handles []RestoreHandle
	// Owner is the restored Store's lineage (the root's CheckpointOptions.Owner or its
	// default); CheckpointStorage is where its checkpoints go (its fences and checkpoint ids
	// are read there).
	Owner             string
	CheckpointStorage checkpoint.Storage
	// Claim: RestoreMode CLAIM (claim markers are written, the restored tables become the
	// base of the first checkpoint). Lazy: CheckpointOptions.LazyRestore.
	Claim, Lazy bool
	// Subtask and Parallelism are the new Store's (the operator state's redistribution).
	Subtask, Parallelism int
	// ChangelogCache, when not nil, serves the changelog objects (each fetched once per
	// process); nil: read from Storage.
	ChangelogCache *ChangelogCache
}

// RestoreStats describes what Restore did (the root's strata.RestoreStats, whose fields of the
// same names mean the same; its BulkFiles and BulkParallelBatches come from
// Engine.BulkReplayed whenever asked, since a lazy tail installs after Restore returns).
type RestoreStats struct {
	Bytes                               int64
	Tables, Linked, Copied, Skipped     int
	ChangelogRecords, ChangelogSkipped  int64
	Timers                              int
	CanonicalEntries                    int64
	TablesTime, ReplayTime, PersistTime time.Duration
}

// Restored is a restored Store's engine and what the root wraps it with.
type Restored struct {
	// Engine is open over the restored directory, its persist point holding Registry with
	// Ops; the caller owns it.
	Engine *Engine
	// Registry is the merged state registry (Ops nil), as persisted; Ops the operator state
	// of the Store's subtask (without states: none).
	Registry *Registry
	Ops      *OpSnapshot
	// Used are the indices in RestoreSpec.Handles of the checkpoints that hold key groups of
	// the Store (those read for their tables, changelog, timers and canonical entries).
	Used []int
	// RestoredOwn is the newest of them of the Store's own lineage (0: none).
	RestoredOwn uint64
	// Writer is the Store's writer identity, in the directory's WRITER file: its epoch (to be
	// claimed by a fence at the first checkpoint), the fence point and its writer id.
	Writer WriterRecord
	Stats  RestoreStats

	dir string
	fs  FS
}

// Discard closes the engine without persisting and removes what Restore wrote under its
// directory (RemoveRestored): the caller's wrap of a Restored failed. Errors: Close's.
func (r *Restored) Discard() error {
	err := r.Engine.Close()
	RemoveRestored(r.fs, r.dir)
	return err
}

// Restore creates the Store directory o.Dir (empty or missing: the caller checks) from the
// checkpoints spec.Handles name, for the key groups o.KeyGroups, and returns the engine
// opened over it (o, with o.FS replaced by the lazy restore's LazyFS when spec.Lazy) — the
// sequence of doc.go, "The restore sequence": manifests and fences checked, registries merged
// by name (restoreIDs), operator state redistributed (RedistributeOps) and bounded
// (MaxOperatorStateSize), claim markers, the tables imported, the engine opened, the writer
// file, the changelog replayed, the timers restored, canonical savepoints loaded, all of it
// persisted, and the RESTORING marker removed (or the prefetch started, which removes it).
//
// Errors: ErrMaxParallelismMismatch, ErrOverlappingHandles, ErrIncompatibleState,
// ErrIncompleteOperatorState, ErrOperatorStateTooLarge, checkpoint.ErrFenced (a handle a fence
// of its lineage fences), checkpoint.ErrNotFound, ErrCorruption naming the object, the
// storage's, the file system's, Open's. On error nothing is left open and what Restore wrote
// under o.Dir is removed (claim markers stay: doc.go, invariant 28). Not safe for concurrent
// use with another Restore or Open of o.Dir.
func Restore(ctx context.Context, o Options, spec RestoreSpec) (r *Restored, err error) {
	fsys, dir := o.FS, o.Dir
	if err := MarkRestoring(fsys, dir); err != nil { // step 1
		RemoveRestored(fsys, dir)
		return nil, fmt.Errorf("strata: restore into %q: %w", dir, err)
	}
	defer func() {
		if err != nil {
			RemoveRestored(fsys, dir)
		}
	}()
	p, err := planRestore(ctx, o, spec) // step 2
	if err != nil {
		return nil, err
	}
	if spec.Claim {
		// Step 3, before any object is used: the claim markers tell the GC of every other
		// Store that claims these lineages (a scale out) what this one still needs
		// (checkpoint/doc.go, "Claims shared by several Stores").
		for _, i := range p.used {
			if h := spec.Handles[i]; h.Owner != spec.Owner {
				if err := checkpoint.WriteClaim(ctx, spec.Storage, h.Owner, spec.Owner, h.ID); err != nil {
					return nil, fmt.Errorf("strata: restore into %q: %w", dir, err)
				}
			}
		}
	}
	// Step 4: the tables, under a persist point holding the merged registry and operator state.
	r = &Restored{Registry: p.merged, Ops: p.ops, Used: p.used, dir: dir, fs: fsys}
	t0 := time.Now()
	var res restoreResult
	var lazy *LazyFS
	if spec.Lazy {
		res, lazy, err = restoreLazy(ctx, fsys, dir, o.MaxParallelism, o.KeyGroups, spec.Storage, p.sources, r.persistMeta(TimerFileRef{}))
		o.FS = lazy
	} else {
		res, err = restore(ctx, fsys, dir, o.MaxParallelism, o.KeyGroups, spec.Storage, p.sources, r.persistMeta(TimerFileRef{}), nil)
	}
	if err != nil {
		return nil, fmt.Errorf("strata: restore into %q: %w", dir, err)
	}
	r.Stats = RestoreStats{Bytes: res.Bytes, Tables: len(res.Tables), Linked: res.Linked, Copied: res.Copied, Skipped: res.Skipped}
	// Step 5: the engine over the directory, with the queues of the registry's timer services.
	e, _, err := Open(o)
	if err != nil {
		return nil, fmt.Errorf("strata: open %q: %w", dir, err)
	}
	r.Engine = e
	defer func() {
		if err != nil {
			err = errors.Join(err, e.Close()) // r is nil by now
		}
	}()
	for name, st := range p.merged.States {
		if st.Kind == KindTimerService {
			r.Engine.TimerQueues(name)
		}
	}
	if err := r.Engine.LoadTimerFile(TimerFileRef{}); err != nil {
		return nil, fmt.Errorf("strata: open %q: %w", dir, err)
	}
	// A lazy restore's changelog tail is written in the background (doc.go, "Lazy tail").
	e.lazyTail = spec.Lazy || o.LazyTail
	if err := r.fill(ctx, spec, p, res.Tables, t0); err != nil { // steps 6 to 8
		return nil, fmt.Errorf("strata: restore into %q: %w", dir, err)
	}
	e.lazyTail = false
	// Step 9.
	finish := func() error { return FinishRestoring(fsys, dir) }
	if e.tail != nil {
		// The directory is complete once the tail is installed and persisted (invariant 36)
		// and, lazily, every table is local (invariant 22): whichever ends last removes the
		// marker.
		var left atomic.Int32
		left.Store(1)
		if lazy != nil {
			left.Store(2)
		}
		marker := finish
		finish = func() error {
			if left.Add(-1) == 0 {
				return marker()
			}
			return nil
		}
		e.tail.done = finish
	}
	switch {
	case lazy != nil:
		// The directory is complete once the prefetch made every table local (invariant 22):
		// the marker goes then.
		err = r.Engine.StartPrefetch(lazy, finish)
	case e.tail == nil:
		err = FinishRestoring(fsys, dir)
	}
	if err != nil {
		return nil, fmt.Errorf("strata: restore into %q: %w", dir, err)
	}
	return r, nil
}

// restorePlan is step 2's outcome: the manifests of the checkpoints holding key groups of the
// Store (sources; used: their indices in RestoreSpec.Handles), the merged registry and the
// Store's share of the operator state, the writer epoch the lineage has reached (epoch: the
// Store's is one more), the newest checkpoint restored (lastID) and the fence point.
type restorePlan struct {
	sources       []*checkpoint.Manifest
	used          []int
	merged        *Registry
	ops           *OpSnapshot
	epoch, lastID uint64
	point         uint64
}

// planRestore is step 2: it reads and checks the manifest of every handle (max parallelism,
// fences of its lineage, overlaps), merges their registries by name (restoreIDs),
// redistributes and bounds the operator state, and reads the fences and checkpoint ids of the
// Store's own lineage. It reads only. Errors: Restore's.
func planRestore(ctx context.Context, o Options, spec RestoreSpec) (*restorePlan, error) {
	dir, kg := o.Dir, o.KeyGroups
	p := &restorePlan{merged: &Registry{MaxParallelism: o.MaxParallelism, KeyGroups: kg, NextID: 1, States: map[string]PersistedState{}}}
	var regs []idSource
	var opSrcs []OpSource
	var noOps []string
	fencesOf := map[string][]checkpoint.Fence{} // per owner, read once
	for idx, h := range spec.Handles {
		m, err := checkpoint.ReadManifest(ctx, spec.Storage, h.Owner, h.ID)
		if err != nil {
			return nil, fmt.Errorf("strata: restore of checkpoint %d of %q: %w", h.ID, h.Owner, err)
		}
		if int(m.MaxParallelism) != o.MaxParallelism {
			return nil, fmt.Errorf("%w: checkpoint %d of %q has max parallelism %d, the Store %d",
				ErrMaxParallelismMismatch, h.ID, h.Owner, m.MaxParallelism, o.MaxParallelism)
		}
		fs, ok := fencesOf[h.Owner]
		if !ok {
			if fs, err = checkpoint.ReadFences(ctx, spec.Storage, h.Owner, 0); err != nil {
				return nil, fmt.Errorf("strata: restore of checkpoint %d of %q: %w", h.ID, h.Owner, err)
			}
			fencesOf[h.Owner] = fs
		}
		if i := slices.IndexFunc(fs, func(f checkpoint.Fence) bool { return f.Fences(m.Epoch, m.ID) }); i >= 0 {
			return nil, fmt.Errorf("strata: restore of checkpoint %d of %q: %w: written by writer epoch %d after the lineage was restored from checkpoint %d by writer epoch %d",
				h.ID, h.Owner, checkpoint.ErrFenced, m.Epoch, fs[i].Point, fs[i].Epoch)
		}
		p.epoch = max(p.epoch, m.Epoch)
		// Operator state comes from every checkpoint given, whatever its key groups.
		what := fmt.Sprintf("checkpoint %d of %q", h.ID, h.Owner)
		if len(m.OperatorState) == 0 {
			noOps = append(noOps, what)
		} else {
			ops, err := DecodeOps(checkpoint.ManifestName(h.Owner, h.ID)+" (operator state)", m.OperatorState, true)
			if err != nil {
				return nil, fmt.Errorf("strata: restore of %s: %w", what, err)
			}
			opSrcs = append(opSrcs, OpSource{Snap: ops, What: what})
		}
		lo, hi := max(int(m.KeyGroups.Start), kg.Start), min(int(m.KeyGroups.End), kg.End)
		if lo > hi {
			continue // nothing of ours
		}
		for i, src := range p.sources {
			if max(int(src.KeyGroups.Start), lo) <= min(int(src.KeyGroups.End), hi) {
				return nil, fmt.Errorf("%w: checkpoint %d of %q and checkpoint %d of %q both hold key groups of %v",
					ErrOverlappingHandles, h.ID, h.Owner, src.ID, spec.Handles[p.used[i]].Owner, kg)
			}
		}
		reg, _, err := DecodeRegistryOps(m.Registry) // a manifest's registry carries no operator state
		if err != nil {
			return nil, fmt.Errorf("strata: restore of checkpoint %d of %q: %w", h.ID, h.Owner, err)
		}
		regs = append(regs, idSource{lo: uint16(lo), hi: uint16(hi), reg: reg})
		p.sources = append(p.sources, m)
		p.used = append(p.used, idx)
		p.lastID = max(p.lastID, h.ID)
	}
	if err := restoreIDs(p.merged, regs); err != nil {
		return nil, fmt.Errorf("strata: restore into %q: %w", dir, err)
	}
	var err error
	if p.ops, err = RedistributeOps(opSrcs, noOps, spec.Subtask, spec.Parallelism); err != nil {
		return nil, fmt.Errorf("strata: restore into %q: %w", dir, err)
	}
	total := int64(0)
	for _, st := range p.ops.States {
		if k, ok := p.merged.States[st.Name]; ok {
			return nil, fmt.Errorf("%w: %q is a keyed %v state in one checkpoint, an %v state in another",
				ErrIncompatibleState, st.Name, k.Kind, st.Kind)
		}
		total += st.Cost()
	}
	if total > MaxOperatorStateSize {
		return nil, fmt.Errorf("%w: the restored operator state of subtask %d of %d counts %d bytes, the bound is %d",
			ErrOperatorStateTooLarge, spec.Subtask, spec.Parallelism, total, MaxOperatorStateSize)
	}
	// The Store's writer epoch: above every restored manifest's and every fence of its
	// lineage (a later claim of one of those is a newer writer's; checkpoint doc, "Writer
	// fencing").
	fences, err := checkpoint.ReadFences(ctx, spec.CheckpointStorage, spec.Owner, 0)
	if err != nil {
		return nil, fmt.Errorf("strata: restore into %q: the fences of %q: %w", dir, spec.Owner, err)
	}
	if n := len(fences); n > 0 {
		p.epoch = max(p.epoch, fences[n-1].Epoch)
	}
	// The fence point: the lineage goes on from the newest checkpoint restored, or from
	// every checkpoint it holds now if one is newer (a scale-in from other lineages, whose
	// ids need not be this one's, must not fence this lineage's history).
	ownIDs, err := checkpoint.ListCheckpoints(ctx, spec.CheckpointStorage, spec.Owner)
	if err != nil {
		return nil, fmt.Errorf("strata: restore into %q: the checkpoints of %q: %w", dir, spec.Owner, err)
	}
	p.point = max(slices.Max(append(ownIDs, 0)), p.lastID)
	return p, nil
}

// fill is steps 6 to 8 on the opened engine: the writer file, the checkpoint base, the
// changelog replayed, the timers restored, canonical savepoints loaded, and a persist when
// any of those added something (tables: the imported tables, the CLAIM mode's base; t0: when
// step 4 began, for the stats).
func (r *Restored) fill(ctx context.Context, spec RestoreSpec, p *restorePlan, tables map[uint64]checkpoint.Object, t0 time.Time) error {
	e, st := r.Engine, &r.Stats
	// Step 6: the Store is a new writer of its lineage: its first checkpoint fences the older
	// ones (the root's fenceCheckpoint); the directory remembers it (reopened, it is the same
	// writer).
	r.Writer = WriterRecord{Epoch: p.epoch + 1, Point: p.point, Writer: NewWriterID()}
	if err := WriteWriterFile(r.fs, r.dir, r.Writer); err != nil {
		return err
	}
	// Step 7. Only a restored checkpoint of the Store's own lineage is a completed checkpoint
	// of it: the ids of another owner's lineage say nothing of ours (GC would take one above
	// ours for the newest completed and collect ours).
	for _, i := range p.used {
		if h := spec.Handles[i]; h.Owner == spec.Owner {
			r.RestoredOwn = max(r.RestoredOwn, h.ID)
		}
	}
	if !spec.Claim {
		tables = nil // the first checkpoint is full (NO_CLAIM)
	}
	e.SetCheckpointBase(p.lastID, r.RestoredOwn, tables)
	t1 := time.Now()
	st.TablesTime = t1.Sub(t0)
	n, skipped, err := e.ReplayChangelog(ctx, spec.Storage, spec.ChangelogCache, p.sources, p.merged.KeyGroups)
	t2 := time.Now()
	st.ReplayTime = t2.Sub(t1)
	if err != nil {
		return err
	}
	st.ChangelogRecords, st.ChangelogSkipped = n, skipped
	e.startTail() // a lazy tail's driver runs while the timers and canonical entries load
	nt, err := e.RestoreTimers(ctx, spec.Storage, p.sources)
	if err != nil {
		return err
	}
	nc, nct, err := e.restoreCanonical(ctx, spec.Storage, p.sources, p.merged)
	if err != nil {
		return err
	}
	st.Timers, st.CanonicalEntries = nt+nct, nc
	if n == 0 && st.Timers == 0 && nc == 0 {
		return nil
	}
	if e.tail != nil {
		// Step 8 waits for the lazy tail (invariant 36): the timer file now, the persist point
		// naming it once the tail is installed (awaitTail); Restore sets the marker's step.
		return e.deferTailPersist(r.persistMeta, nil)
	}
	// Step 8. The replayed records and the timers are in memory only; the directory's persist
	// point (step 4's) holds the tables alone. Persist, as Close would, so that a crash after
	// Restore returns reopens dir to the checkpoint's state, not to its materialization's (the
	// root's TestModel/changelog, crash after a restore).
	if err := e.PersistAll(r.persistMeta); err != nil {
		return fmt.Errorf("persisting the replayed changelog and the timers: %w", err)
	}
	st.PersistTime = time.Since(t2)
	return nil
}

// persistMeta is the persist point's metadata of the restored Store: its registry with its
// operator state, naming the timer file tf — what the root's Store would write (registry:
// the restored states, none registered yet).
func (r *Restored) persistMeta(tf TimerFileRef) []byte {
	reg := *r.Registry
	if len(r.Ops.States) > 0 {
		reg.Ops = r.Ops.Encode()
	}
	reg.TimerFile = tf
	return reg.Encode()
}
