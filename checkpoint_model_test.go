package strata

// The model's checkpoint steps: checkpoint (cut now, upload while later steps run), complete
// or abort, restore of the newest durable checkpoint, and rescale (restore into 1, 2 or 3
// Stores splitting the key groups, compare their union with the model, checkpoint the parts
// and restore them into one Store, which the run goes on with). With the changelog on
// (modelRun.changelog): materialize (force one) and changelog-toggle (restore the newest
// durable checkpoint into a Store with the changelog switched on or off). Storage outage
// (ckOutage): the checkpoint storage refuses every write for a random number of steps.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/strata-db/strata/checkpoint"
	"github.com/strata-db/strata/internal/checkpointfs"
	"github.com/strata-db/strata/internal/engine"
	"github.com/strata-db/strata/internal/vfs"
)

// ckRun is a run's checkpoint state.
type ckRun struct {
	st       *checkpoint.DirStorage
	id       uint64 // the last id used
	pending  *PendingCheckpoint
	pendM    *model // the model at the pending checkpoint's cut
	durable  map[uint64]*model
	handles  map[uint64]CheckpointHandle
	last     uint64 // newest durable id
	dirs     int
	restores int
	rescales int
	failed   int
	// Changelog: materializations forced, toggles, changelog records replayed by restores.
	materializations int
	toggles          int
	replayed         int64
	// opSplits counts the rescale parts that checked a share of a list of several elements.
	opSplits int
	// Storage outages: their number, and what failed during them (checkpoint uploads and
	// forced materializations; background persists fail unseen).
	outages, outageFails int
	// parts are the checkpoint owners of the last rescale's parts: the Store the run goes on
	// with was restored from them (NO_CLAIM), and the next replaceStore deletes them.
	parts []string
	// Savepoints: their storage (beside the checkpoints') and number.
	sp         *checkpoint.DirStorage
	savepoints int
}

// ckInit gives a run with a directory its checkpoint storage, on the run's file system.
func (r *modelRun) ckInit() error {
	if r.dir == "" {
		return nil
	}
	fsys := r.opts.fs
	st, err := checkpointfs.NewDirStorage(fsys, filepath.Join(filepath.Dir(r.dir), "checkpoints"))
	if err != nil {
		return err
	}
	if r.ck.durable == nil {
		r.ck.durable, r.ck.handles = map[uint64]*model{}, map[uint64]CheckpointHandle{}
	}
	r.ck.st = st
	r.opts.Checkpoint = CheckpointOptions{Storage: st, Owner: "model", Grace: checkpoint.NoGrace, Retain: 2}
	if r.changelog {
		// Materializations only when the step forces one (the run stays replayable).
		r.opts.Checkpoint.Changelog = &ChangelogOptions{MaterializationInterval: -1}
		// Restores read the log through a cache that deletes an object at its last release.
		c, err := NewChangelogCache(r.t.TempDir(), 0)
		if err != nil {
			return err
		}
		r.t.Cleanup(func() { c.Close() })
		r.opts.Checkpoint.ChangelogCache = c
	}
	return nil
}

// ckSettle waits for the pending checkpoint (before a step that closes or replaces the Store).
func (r *modelRun) ckSettle() error {
	p := r.ck.pending
	if p == nil {
		return nil
	}
	r.ck.pending = nil
	h, err := p.Wait(context.Background())
	if err != nil {
		// A checkpoint may fail for an injected fault or a full disk; it is then not durable.
		if r.fault != nil && (errors.Is(err, vfs.ErrInjected) || errors.Is(err, ErrNoSpace)) || r.pressure && errors.Is(err, ErrMemoryBudget) {
			r.ck.failed++
			return nil
		}
		return fmt.Errorf("checkpoint %d: %w", p.ID(), err)
	}
	r.ck.durable[h.ID], r.ck.handles[h.ID], r.ck.last = r.ck.pendM, h, h.ID
	return nil
}

// checkpoint cuts a checkpoint; its upload runs during the next steps.
func (r *modelRun) checkpoint(int32) error {
	if r.ck.st == nil {
		return nil
	}
	if err := r.ckSettle(); err != nil {
		return err
	}
	if err := r.invalidate(); err != nil { // the cut seals the active segment: a write
		return err
	}
	r.ck.id++
	p, err := r.st.s.StartCheckpoint(r.ck.id, []byte(fmt.Sprint(r.op)))
	if err != nil {
		if r.pressure && errors.Is(err, ErrMemoryBudget) {
			r.budgetFails++
			return nil
		}
		return err
	}
	r.ck.pending, r.ck.pendM = p, r.m.clone()
	return nil
}

// ckNotify settles the pending checkpoint and completes it (or, one time in five, aborts it).
func (r *modelRun) ckNotify(int32) error {
	if r.ck.st == nil || r.ck.pending == nil {
		return nil
	}
	id := r.ck.pending.ID()
	if err := r.ckSettle(); err != nil {
		return err
	}
	if _, ok := r.ck.durable[id]; !ok {
		return nil
	}
	if r.rng.IntN(5) == 0 {
		delete(r.ck.durable, id)
		if r.ck.last == id {
			r.ck.last = 0
			for d := range r.ck.durable {
				r.ck.last = max(r.ck.last, d)
			}
		}
		return r.st.s.NotifyCheckpointAborted(id)
	}
	if err := r.st.s.NotifyCheckpointComplete(id); err != nil {
		return err
	}
	// Retain 2: what GC may delete is no longer restorable.
	for d := range r.ck.durable {
		if d < id && len(r.ck.durable) > 2 {
			delete(r.ck.durable, d)
		}
	}
	return nil
}

// partOwner is the checkpoint owner of part i of the run's rescale number rescale.
func partOwner(rescale, i int) string { return fmt.Sprintf("model-part-%d-%d", rescale, i) }

// removeDir deletes the directory of a Store the run no longer uses (closed or discarded), on
// the file system under the fault injection: a run of restores and rescales otherwise keeps
// every Store it left behind, which in a MemFS is memory (TestModel/pressure, whose values are
// up to a megabyte, grew past 20 GB under -race).
func (r *modelRun) removeDir(dir string) error {
	if r.mem == nil {
		return os.RemoveAll(dir)
	}
	var walk func(string) error
	walk = func(p string) error {
		fi, err := r.mem.Stat(p)
		if err != nil {
			return err
		}
		if fi.IsDir() {
			names, err := r.mem.List(p)
			if err != nil {
				return err
			}
			for _, n := range names {
				if err := walk(filepath.Join(p, n)); err != nil {
					return err
				}
			}
		}
		return r.mem.Remove(p)
	}
	// The parent's sync drops the directory from its synced entries too (a MemFS keeps a
	// removed entry until then, for a crash to bring back).
	if err := walk(dir); err != nil {
		return fmt.Errorf("removing the left Store's directory %s: %w", dir, err)
	}
	if err := vfs.SyncDir(r.mem, filepath.Dir(dir)); err != nil {
		return fmt.Errorf("removing the left Store's directory %s: %w", dir, err)
	}
	return nil
}

// newDir returns a fresh directory beside the run's.
func (r *modelRun) ckDir() string {
	r.ck.dirs++
	return filepath.Join(filepath.Dir(r.dir), fmt.Sprintf("restored-%d", r.ck.dirs))
}

// replaceStore closes the open Store (Discard: as if it had failed) and continues with s in
// dir, whose state is m.
func (r *modelRun) replaceStore(s *Store, dir string, m *model) error {
	r.addStats()
	if err := r.st.s.Discard(); err != nil && !errors.Is(err, vfs.ErrCrashed) {
		return fmt.Errorf("discard before a restore: %w", err)
	}
	if err := r.removeDir(r.dir); err != nil {
		return err
	}
	// The discarded Store was the last one restored from these parts' checkpoints (NO_CLAIM:
	// its own checkpoints reference none of their objects).
	for _, owner := range r.ck.parts {
		if err := r.removeDir(filepath.Join(filepath.Dir(r.dir), "checkpoints", owner)); err != nil {
			return err
		}
	}
	r.ck.parts = nil
	st, err := r.register(s)
	if err != nil {
		s.Close()
		return err
	}
	r.st, r.dir, r.m, r.persisted = st, dir, m.clone(), m.clone()
	r.ck.replayed += s.RestoreStats().ChangelogRecords
	if on := s.ChangelogStats().Enabled; on != r.changelog {
		return fmt.Errorf("restored Store: changelog on %v, want %v", on, r.changelog)
	}
	return r.checkEvery()
}

// restoreStep restores the newest durable checkpoint into a new directory and goes on with it.
func (r *modelRun) restoreStep(int32) error {
	if r.ck.st == nil {
		return nil
	}
	if err := r.ckSettle(); err != nil {
		return err
	}
	m, ok := r.ck.durable[r.ck.last]
	if !ok {
		return nil
	}
	if err := r.invalidate(); err != nil {
		return err
	}
	dir := r.ckDir()
	o := r.opts
	o.Checkpoint.RestoreMode = Claim
	s, err := Restore(dir, o, r.ck.st, r.ck.handles[r.ck.last])
	if err != nil {
		return fmt.Errorf("restore of checkpoint %d: %w", r.ck.last, err)
	}
	r.ck.restores++
	return r.replaceStore(s, dir, m)
}

// splitRange splits kg into n contiguous parts (n <= its size).
func splitRange(kg KeyGroupRange, n int) []KeyGroupRange {
	size := kg.End - kg.Start + 1
	var out []KeyGroupRange
	for i := range n {
		out = append(out, KeyGroupRange{Start: kg.Start + i*size/n, End: kg.Start + (i+1)*size/n - 1})
	}
	return out
}

// rescale restores the newest durable checkpoint into 1, 2 or 3 Stores splitting the run's key
// groups, as subtasks 0..n-1 of parallelism n, checks each against the model (its own key
// groups read as the model, the others refused; its even split of the operator list, the whole
// union list and broadcast map), registers states of its own in an order of its own
// (rescaleExtrasWrite: the parts disagree on state ids), checkpoints each part and restores the
// parts into one Store (subtask 0 of 1: the parts' lists concatenated, each union element
// once; states matched by name, rescaleExtrasCheck), which the run goes on with.
func (r *modelRun) rescale(int32) error {
	if r.ck.st == nil {
		return nil
	}
	if err := r.ckSettle(); err != nil {
		return err
	}
	m, ok := r.ck.durable[r.ck.last]
	if !ok {
		return nil
	}
	m = m.clone() // TTL reads of the parts change it; the checkpoint stays as it was
	if err := r.invalidate(); err != nil {
		return err
	}
	ctx := context.Background()
	kg := *r.opts.withDefaults().KeyGroups
	n := 1 + r.rng.IntN(min(3, kg.End-kg.Start+1))
	r.ck.rescales++
	var hs []CheckpointHandle
	for i, part := range splitRange(kg, n) {
		o := r.opts
		o.KeyGroups = &part
		o.Parallelism, o.SubtaskIndex = n, i
		o.Checkpoint.Owner = partOwner(r.ck.rescales, i)
		dir := r.ckDir()
		s, err := Restore(dir, o, r.ck.st, r.ck.handles[r.ck.last])
		if err != nil {
			return fmt.Errorf("rescale to %d: restore of part %v: %w", n, part, err)
		}
		r.ck.replayed += s.RestoreStats().ChangelogRecords
		st, err := r.register(s)
		if err == nil {
			err = st.checkOwned(m)
		}
		if err == nil {
			err = st.checkTimers(m)
		}
		if err == nil {
			err = st.checkOpShare(m, i, n)
			if n > 1 && len(m.opl) > 1 {
				r.ck.opSplits++
			}
		}
		if err == nil {
			err = rescaleExtrasWrite(s, r.ck.rescales, i)
		}
		if err == nil {
			var h CheckpointHandle
			if h, err = s.Checkpoint(ctx, 1, nil); err == nil {
				hs = append(hs, h)
			}
		}
		if cerr := s.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = r.removeDir(dir)
		}
		if err != nil {
			return fmt.Errorf("rescale to %d, part %v: %w", n, part, err)
		}
	}
	dir := r.ckDir()
	s, err := Restore(dir, r.opts, r.ck.st, hs...)
	if err != nil {
		return fmt.Errorf("rescale: scale-in of %d parts: %w", n, err)
	}
	if err := rescaleExtrasCheck(s, r.ck.rescales, n); err != nil {
		s.Close()
		return fmt.Errorf("rescale: scale-in of %d parts: %w", n, err)
	}
	if err := r.replaceStore(s, dir, m); err != nil {
		return err
	}
	for i := range n {
		r.ck.parts = append(r.ck.parts, partOwner(r.ck.rescales, i))
	}
	return nil
}

// rescaleExtraKeys is the number of keys the parts of a rescale write their extra states of.
const rescaleExtraKeys = 64

// rescaleExtrasWrite registers, on part i of rescale number rescale, states the other parts
// register in other orders or not at all — part 0 "a" then "b", part 1 "b" then "a", part 2
// "b" alone (Flink's subtasks register lazily, as their records need the states) — before
// writing their keys of its key groups: one name has different ids in the parts, one id
// different names (issue 21 item 3). The model's own states came back with the restore, under
// the checkpoint's ids.
func rescaleExtrasWrite(s *Store, rescale, i int) error {
	order := [][]string{{"a", "b"}, {"b", "a"}, {"b"}}[i]
	kg := *s.opts.KeyGroups
	for _, n := range order {
		v, err := NewValueState(s, ValueDescriptor[int64]{Name: fmt.Sprintf("rescale-%d-%s", rescale, n), Codec: Int64})
		if err != nil {
			return err
		}
		for j := range rescaleExtraKeys {
			k := s.Key(fmt.Appendf(nil, "extra-%d", j))
			if int(k.kg) < kg.Start || int(k.kg) > kg.End {
				continue
			}
			if err := v.Put(k, int64(i)); err != nil {
				return err
			}
		}
	}
	return nil
}

// rescaleExtrasCheck checks the states rescaleExtrasWrite left in the n parts of rescale
// number rescale, restored by name into s: "b" of every key from the part that holds its key
// group, "a" of the keys of parts 0 and 1 only.
func rescaleExtrasCheck(s *Store, rescale, n int) error {
	kg := *s.opts.KeyGroups
	parts := splitRange(kg, n)
	for _, name := range []string{"b", "a"} {
		v, err := NewValueState(s, ValueDescriptor[int64]{Name: fmt.Sprintf("rescale-%d-%s", rescale, name), Codec: Int64})
		if err != nil {
			return err
		}
		for j := range rescaleExtraKeys {
			k := s.Key(fmt.Appendf(nil, "extra-%d", j))
			part := -1
			for i, p := range parts {
				if int(k.kg) >= p.Start && int(k.kg) <= p.End {
					part = i
				}
			}
			if part < 0 {
				continue // outside the Store's key groups (the kg-range config): no Get
			}
			got, ok, err := v.Get(k)
			want := name == "b" || part < 2
			if err != nil || ok != want || (ok && got != int64(part)) {
				return fmt.Errorf("state %q of key extra-%d (part %d): %d, %v, %v", v.Name(), j, part, got, ok, err)
			}
		}
	}
	return nil
}

// materialize forces a materialization and waits for it (Engine.Materialize): the next
// checkpoint stores the log after it on top of its tables, and that checkpoint's completion
// truncates the generations before it. With the changelog off it must be refused.
func (r *modelRun) materialize(int32) error {
	if r.ck.st == nil {
		return nil
	}
	if err := r.invalidate(); err != nil { // the cut seals the active segment: a write
		return err
	}
	err := r.st.s.e.Materialize(context.Background())
	if !r.changelog {
		if !errors.Is(err, engine.ErrNoCheckpoint) {
			return fmt.Errorf("materialize with the changelog off: %v, want ErrNoCheckpoint", err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("materialize: %w", err)
	}
	r.ck.materializations++
	if st := r.st.s.ChangelogStats(); !st.Enabled || st.Materializations == 0 || st.MaterializationRunning {
		return fmt.Errorf("after Materialize: %+v", st)
	}
	return nil
}

// changelogToggle restores the newest durable checkpoint (cut one first if there is none)
// into a Store with the changelog switched on↔off and goes on with it: a checkpoint of either
// kind restores into a Store of either kind (ChangelogOptions: "A Store may switch it on or
// off across a restore").
func (r *modelRun) changelogToggle(int32) error {
	if r.ck.st == nil {
		return nil
	}
	if err := r.ckSettle(); err != nil {
		return err
	}
	if _, ok := r.ck.durable[r.ck.last]; !ok {
		if err := r.checkpoint(0); err != nil {
			return err
		}
		if err := r.ckSettle(); err != nil {
			return err
		}
	}
	m, ok := r.ck.durable[r.ck.last]
	if !ok {
		return nil // the checkpoint failed (an injected fault): nothing to restore
	}
	if err := r.invalidate(); err != nil {
		return err
	}
	r.changelog = !r.changelog
	if err := r.ckInit(); err != nil { // the options of the new Store
		return err
	}
	dir := r.ckDir()
	o := r.opts
	o.Checkpoint.RestoreMode = Claim
	s, err := Restore(dir, o, r.ck.st, r.ck.handles[r.ck.last])
	if err != nil {
		return fmt.Errorf("restore of checkpoint %d with the changelog on %v: %w", r.ck.last, r.changelog, err)
	}
	r.ck.toggles++
	return r.replaceStore(s, dir, m)
}

// The outage step runs write steps drawn from modelSteps, so it is entered at init (a
// composite literal referring to it would be an initialization cycle).
func init() {
	modelSteps[stepCkOutage] = stepDef{"checkpoint-storage-outage", false, (*modelRun).ckOutage}
	modelSteps[stepSavepoint] = stepDef{"savepoint", false, (*modelRun).savepointStep}
}

// ckOutage is a checkpoint-storage outage of random length (issue 21): the storage refuses
// every write (EIO as an object store's outage, or ENOSPC as a full checkpoint disk; reads
// still answer) while up to 40 write steps run, a checkpoint is cut (its upload fails unless
// it ended before), and, with the changelog on, materializations are forced (they fail) and
// the background persists fail. Every write must still be acknowledged; afterwards the run
// goes on, so later checkpoints, restores, rescales, reopens and the final Close check that
// nothing acknowledged was lost and that every checkpoint that reported success restores
// exactly (ckSettle counts only those as durable).
func (r *modelRun) ckOutage(int32) error {
	if r.ck.st == nil || r.fault == nil {
		return nil
	}
	if err := r.ckSettle(); err != nil {
		return err
	}
	cause := error(syscall.EIO)
	if r.rng.IntN(3) == 0 {
		cause = errNoSpaceErrno
	}
	r.fault.Inject(vfs.Fault{Ops: vfs.WriteOps, Path: vfs.PathPrefix(r.ck.st.Dir() + "/"), Sticky: true, Err: cause})
	defer r.fault.ClearFaults()
	r.ck.outages++
	total := 0
	for k, x := range r.w.weights {
		if modelSteps[k].write {
			total += x
		}
	}
	n := 1 + r.rng.IntN(40)
	for range n {
		switch x := r.rng.IntN(16); {
		case x == 0:
			if err := r.checkpoint(0); err != nil {
				return fmt.Errorf("during a storage outage (%v): %w", cause, err)
			}
		case x == 1 && r.changelog:
			if err := r.invalidate(); err != nil {
				return err
			}
			// It fails with the storage's error (unless it had nothing to store), and is
			// retried later: no number of such failures may stop the Store.
			err := r.st.s.e.Materialize(context.Background())
			if err != nil && !errors.Is(err, cause) {
				return fmt.Errorf("materialize during a storage outage (%v): %v, want an error matching it", cause, err)
			}
			if err != nil {
				r.ck.outageFails++
			}
		case x == 2:
			time.Sleep(3 * time.Millisecond) // a background persist is due (PersistDelay) and fails
		default:
			if total == 0 {
				continue
			}
			y := r.rng.IntN(total)
			k := stepKind(0)
			for ; !modelSteps[k].write || y >= r.w.weights[k]; k++ {
				if modelSteps[k].write {
					y -= r.w.weights[k]
				}
			}
			r.counts[k]++
			if err := modelSteps[k].run(r, r.pick()); err != nil {
				return fmt.Errorf("during a storage outage (%v): %s: %w", cause, modelSteps[k].name, err)
			}
		}
	}
	// The outage ends after a checkpoint cut during it is waited for: it fails (counted in
	// ck.failed), as its manifest could not be written.
	return r.ckSettle()
}

// savepointStep takes a savepoint of the Store now — native and canonical in turn —, restores it into 1, 2 or 3 Stores
// splitting the run's key groups and checks each against the model (as rescale does), then
// restores it whole, in a random restore mode, into the Store the run goes on with.
func (r *modelRun) savepointStep(int32) error {
	if r.ck.st == nil {
		return nil
	}
	if err := r.ckSettle(); err != nil {
		return err
	}
	if err := r.invalidate(); err != nil { // the savepoint's checkpoint seals the active segment
		return err
	}
	if r.ck.sp == nil {
		sp, err := checkpointfs.NewDirStorage(r.opts.fs, filepath.Join(filepath.Dir(r.dir), "savepoints"))
		if err != nil {
			return err
		}
		r.ck.sp = sp
	}
	ctx := context.Background()
	r.ck.id++
	kind := SavepointNative
	if r.ck.savepoints%2 == 1 {
		kind = SavepointCanonical
	}
	h, err := r.st.s.Savepoint(ctx, r.ck.sp, kind, r.ck.id, nil)
	if err != nil {
		if r.fault != nil && (errors.Is(err, vfs.ErrInjected) || errors.Is(err, ErrNoSpace)) || r.pressure && errors.Is(err, ErrMemoryBudget) {
			r.ck.failed++
			return nil
		}
		return fmt.Errorf("%v savepoint %d: %w", kind, r.ck.id, err)
	}
	r.ck.savepoints++
	m := r.m.clone()
	kg := *r.opts.withDefaults().KeyGroups
	n := 1 + r.rng.IntN(min(3, kg.End-kg.Start+1))
	for i, part := range splitRange(kg, n) {
		o := r.opts
		o.KeyGroups = &part
		o.Parallelism, o.SubtaskIndex = n, i
		o.Checkpoint.Owner = fmt.Sprintf("model-sp-%d-%d", r.ck.savepoints, i)
		pm := m.clone() // TTL reads of the part change it
		pdir := r.ckDir()
		s, err := Restore(pdir, o, r.ck.sp, h)
		if err != nil {
			return fmt.Errorf("%v savepoint %d into %d Stores: restore of part %v: %w", kind, h.ID, n, part, err)
		}
		st, err := r.register(s)
		if err == nil {
			err = st.checkOwned(pm)
		}
		if err == nil {
			err = st.checkTimers(pm)
		}
		if err == nil {
			err = st.checkOpShare(pm, i, n)
		}
		if cerr := s.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = r.removeDir(pdir)
		}
		if err != nil {
			return fmt.Errorf("savepoint %d into %d Stores, part %v: %w", h.ID, n, part, err)
		}
	}
	dir := r.ckDir()
	o := r.opts
	o.Checkpoint.RestoreMode = RestoreMode(r.rng.IntN(2))
	if o.Checkpoint.RestoreMode == Claim {
		// CLAIM needs the savepoint storage as the Store's checkpoint storage: the run's Store
		// keeps r.ck.st, so Restore must refuse it, and the run goes on in NO_CLAIM mode
		// (TestSavepointNative restores savepoints in CLAIM mode).
		if _, err := Restore(r.ckDir(), o, r.ck.sp, h); !errors.Is(err, ErrInvalidOptions) {
			return fmt.Errorf("restore of savepoint %d in CLAIM mode into another storage: %v, want ErrInvalidOptions", h.ID, err)
		}
		o.Checkpoint.RestoreMode = NoClaim
	}
	s, err := Restore(dir, o, r.ck.sp, h)
	if err != nil {
		return fmt.Errorf("restore of savepoint %d (%v): %w", h.ID, o.Checkpoint.RestoreMode, err)
	}
	return r.replaceStore(s, dir, m)
}
