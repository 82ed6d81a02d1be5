package strata

// Adversarial tests of checkpoints, restore and rescaling (a hostile user's review).

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/strata-db/strata/checkpoint"
	"github.com/strata-db/strata/internal/vfs"
)

// ownedSteps runs n random steps of weights w on r, each on a slot r's Store owns.
func (r *modelRun) ownedSteps(n int, w modelWeights) {
	r.t.Helper()
	total := 0
	for _, x := range w {
		total += x
	}
	for range n {
		x := r.rng.IntN(total)
		k := stepKind(0)
		for ; x >= w[k]; k++ {
			x -= w[k]
		}
		var slot int32
		for {
			slot = r.rng.Int32N(r.w.u.slots())
			if r.st.owns(slot) {
				break
			}
		}
		if err := modelSteps[k].run(r, slot); err != nil {
			r.t.Fatalf("%s on slot %d: %v", modelSteps[k].name, slot, err)
		}
	}
}

// attackMix: every write (deletes and clears weighted up), map iterations that remove, reads
// and tier moves.
var attackMix = writeWeights.with(60, stepValClear, stepListClear, stepMapClear, stepMapRemove, stepRedClear, stepAggClear).
	with(15, stepMapIterate).with(10, stepSeal).with(4, stepEvictDrain)

// TestAttackRescaleWritesInParts: scale out into parts that each write, delete and clear
// their own keys (with the other parts' entries still physically in their clipped tables),
// compact, checkpoint incrementally; then scale in and out again, a chain of NoClaim and
// Claim restores; every Store compared with the model.
func TestAttackRescaleWritesInParts(t *testing.T) {
	ctx := context.Background()
	const maxP = 128
	e := newCkEnv(t, vfs.Default(), t.TempDir(), maxP)
	r := e.open(nil)
	r.ownedSteps(raceScale(12000), attackMix)
	if err := r.pushDown(0); err != nil {
		t.Fatal(err)
	}
	r.ownedSteps(raceScale(3000), attackMix)
	h, err := r.st.s.Checkpoint(ctx, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := r.m.clone()
	r.st.s.Close()
	var hs0 []CheckpointHandle
	for round, plan := range []struct {
		par  int
		mode RestoreMode
	}{{3, NoClaim}, {2, NoClaim}, {5, NoClaim}, {1, Claim}, {2, NoClaim}} {
		var hs []CheckpointHandle
		union := m.clone()
		for i := range plan.par {
			kg := ComputeKeyGroupRangeForOperatorIndex(maxP, plan.par, i)
			o := e.opts
			o.KeyGroups = &kg
			o.Checkpoint.RestoreMode = plan.mode
			o.Checkpoint.Owner = fmt.Sprintf("round%d-part%d", round, i)
			var srcs []CheckpointHandle
			if round == 0 {
				srcs = []CheckpointHandle{h}
			} else {
				srcs = hs0
			}
			s, err := Restore(e.newDir(), o, e.st, srcs...)
			if err != nil {
				t.Fatalf("round %d part %d: %v", round, i, err)
			}
			p := e.run(s)
			p.m = m.clone()
			if err := p.st.checkOwned(p.m); err != nil {
				t.Fatalf("round %d part %d %v after restore: %v", round, i, kg, err)
			}
			var last CheckpointHandle
			for id := uint64(100); id < 103; id++ {
				p.ownedSteps(raceScale(1500), attackMix)
				if id == 101 {
					if err := p.pushDown(0); err != nil {
						t.Fatal(err)
					}
				}
				last, err = s.Checkpoint(ctx, id, nil)
				if err != nil {
					t.Fatalf("round %d part %d checkpoint %d: %v", round, i, id, err)
				}
				if err := s.NotifyCheckpointComplete(id); err != nil {
					t.Fatal(err)
				}
				if err := s.WaitCheckpointGC(); err != nil {
					t.Fatal(err)
				}
				if err := attackAllStored(ctx, e.st, last); err != nil {
					t.Fatalf("round %d part %d after completing %d: %v", round, i, id, err)
				}
			}
			if err := s.WaitCheckpointGC(); err != nil {
				t.Fatal(err)
			}
			if err := p.st.checkOwned(p.m); err != nil {
				t.Fatalf("round %d part %d %v: %v", round, i, kg, err)
			}
			for slot := range p.w.u.slots() {
				if p.st.owns(slot) {
					union.setSlot(slot, p.m.slot(slot))
				}
			}
			hs = append(hs, last)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
		}
		// Scale in: one Store over everything.
		one := e.restore(nil, NoClaim, hs...)
		one.m = union
		if err := one.st.checkAll(one.m); err != nil {
			t.Fatalf("round %d: scale-in of %d parts: %v", round, plan.par, err)
		}
		if err := one.pushDown(0); err != nil {
			t.Fatal(err)
		}
		if err := one.st.checkAll(one.m); err != nil {
			t.Fatalf("round %d: scale-in of %d parts, after push-down: %v", round, plan.par, err)
		}
		one.st.s.Close()
		// The next round restores the parts' checkpoints directly (scale in and out at once).
		hs0, m = hs, union
	}
}

// TestAttackRestoreDamaged: a restore of a checkpoint whose objects were corrupted, truncated
// or deleted, or whose manifest was damaged, fails with a typed error naming the object and
// leaves the directory usable: Restore again (after the damage is repaired) and Open work.
func TestAttackRestoreDamaged(t *testing.T) {
	ctx := context.Background()
	e := newCkEnv(t, vfs.Default(), t.TempDir(), 128)
	r := e.open(nil)
	r.writes(6000)
	if err := r.pushDown(0); err != nil {
		t.Fatal(err)
	}
	r.writes(1000)
	h, err := r.st.s.Checkpoint(ctx, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := r.m.clone()
	r.st.s.Close()
	man, err := checkpoint.ReadManifest(ctx, e.st, h.Owner, 1)
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(e.root, "checkpoints")
	objPath := filepath.Join(root, filepath.FromSlash(man.Objects[0].Name))
	manPath := filepath.Join(root, filepath.FromSlash(checkpoint.ManifestName(h.Owner, 1)))
	type damage struct {
		name   string
		path   string
		do     func(b []byte) []byte // nil: delete
		target error
		names  string
	}
	flip := func(off func(n int) int) func([]byte) []byte {
		return func(b []byte) []byte { b = slices.Clone(b); b[off(len(b))] ^= 0x40; return b }
	}
	for _, d := range []damage{
		{"object-flip-middle", objPath, flip(func(n int) int { return n / 2 }), ErrCorruption, man.Objects[0].Name},
		{"object-flip-last", objPath, flip(func(n int) int { return n - 1 }), ErrCorruption, man.Objects[0].Name},
		{"object-truncate", objPath, func(b []byte) []byte { return b[:len(b)/3] }, ErrCorruption, man.Objects[0].Name},
		{"object-empty", objPath, func(b []byte) []byte { return nil }, ErrCorruption, man.Objects[0].Name},
		{"object-delete", objPath, nil, checkpoint.ErrNotFound, man.Objects[0].Name},
		{"manifest-flip", manPath, flip(func(n int) int { return n / 2 }), ErrCorruption, "MANIFEST"},
		{"manifest-truncate", manPath, func(b []byte) []byte { return b[:20] }, ErrCorruption, "MANIFEST"},
		{"manifest-delete", manPath, nil, checkpoint.ErrNotFound, "chk-"},
	} {
		t.Run(d.name, func(t *testing.T) {
			orig, err := os.ReadFile(d.path)
			if err != nil {
				t.Fatal(err)
			}
			// Objects may be hard links of Store files: replace, never write in place.
			os.Remove(d.path)
			if d.do != nil {
				if err := os.WriteFile(d.path, d.do(orig), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			dir := e.newDir()
			_, err = Restore(dir, e.opts, e.st, h)
			os.Remove(d.path)
			if werr := os.WriteFile(d.path, orig, 0o644); werr != nil {
				t.Fatal(werr)
			}
			if err == nil {
				t.Fatalf("restore of a damaged checkpoint succeeded")
			}
			if !errors.Is(err, d.target) {
				t.Errorf("error %v: want %v", err, d.target)
			}
			if !strings.Contains(err.Error(), d.names) {
				t.Errorf("error %v does not name %s", err, d.names)
			}
			t.Logf("%s: %v", d.name, err)
			if names, _ := os.ReadDir(dir); len(names) > 0 {
				var ns []string
				for _, n := range names {
					ns = append(ns, n.Name())
				}
				t.Errorf("failed restore left %v in %s", ns, dir)
			}
			// Restore into the same directory once repaired.
			s, err := Restore(dir, e.opts, e.st, h)
			if err != nil {
				t.Fatalf("restore after repair into the same directory: %v", err)
			}
			rr := e.run(s)
			if err := rr.st.checkAll(m); err != nil {
				t.Fatal(err)
			}
			s.Close()
		})
	}
}

// TestAttackCheckpointLifecycle: empty Stores, checkpoints twice in a row, id reuse and ids
// going down, abort of the running one, Close and Discard during the upload, a checkpoint
// right after Open of a recovered directory.
func TestAttackCheckpointLifecycle(t *testing.T) {
	ctx := context.Background()
	e := newCkEnv(t, vfs.Default(), t.TempDir(), 128)
	e.opts.Checkpoint.Owner = "life"
	// Empty Store.
	r := e.open(nil)
	dir := filepath.Join(e.root, fmt.Sprintf("store-%d", e.dirs))
	h1, err := r.st.s.Checkpoint(ctx, 1, nil)
	if err != nil {
		t.Fatalf("checkpoint of an empty Store: %v", err)
	}
	if err := r.st.s.NotifyCheckpointComplete(1); err != nil {
		t.Fatal(err)
	}
	re := e.restore(nil, NoClaim, h1)
	if err := re.st.checkAll(newModel()); err != nil {
		t.Fatal(err)
	}
	re.st.s.Close()
	// Twice in a row without writes.
	r.writes(2000)
	h2, err := r.st.s.Checkpoint(ctx, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	m2 := r.m.clone()
	h3, err := r.st.s.Checkpoint(ctx, 3, nil)
	if err != nil {
		t.Fatalf("second checkpoint without writes: %v", err)
	}
	// Id reuse and ids going down.
	if _, err := r.st.s.Checkpoint(ctx, 3, nil); !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("checkpoint 3 again: %v, want ErrInvalidOptions (ids only grow)", err)
	}
	if _, err := r.st.s.Checkpoint(ctx, 2, nil); err == nil {
		t.Errorf("checkpoint 2 after 3: accepted")
	}
	for _, h := range []CheckpointHandle{h2, h3} {
		x := e.restore(nil, NoClaim, h)
		if err := x.st.checkAll(m2); err != nil {
			t.Fatalf("checkpoint %d: %v", h.ID, err)
		}
		x.st.s.Close()
	}
	if err := r.st.s.NotifyCheckpointComplete(3); err != nil {
		t.Fatal(err)
	}
	// Abort of the running checkpoint, then the next one.
	r.writes(2000)
	p, err := r.st.s.StartCheckpoint(10, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.st.s.NotifyCheckpointAborted(10); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(ctx); err != nil {
		t.Logf("aborted checkpoint 10: %v", err)
	}
	r.writes(500)
	h11, err := r.st.s.Checkpoint(ctx, 11, nil)
	if err != nil {
		t.Fatalf("checkpoint after an abort: %v", err)
	}
	m11 := r.m.clone()
	if err := r.st.s.NotifyCheckpointComplete(11); err != nil {
		t.Fatal(err)
	}
	if err := r.st.s.WaitCheckpointGC(); err != nil {
		t.Fatal(err)
	}
	x := e.restore(nil, NoClaim, h11)
	if err := x.st.checkAll(m11); err != nil {
		t.Fatal(err)
	}
	x.st.s.Close()
	// Close during the upload, then Wait.
	r.writes(1000)
	m12 := r.m.clone()
	p, err = r.st.s.StartCheckpoint(12, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.st.s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(ctx); !errors.Is(err, ErrClosed) {
		t.Errorf("Wait after Close: %v, want ErrClosed", err)
	}
	select {
	case <-p.Done():
	default:
		t.Errorf("Done not closed after Close")
	}
	// Open the recovered directory and checkpoint at once.
	o := e.opts
	s, err := Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	rr := e.run(s)
	rr.m = m12.clone()
	if err := rr.st.checkAll(rr.m); err != nil {
		t.Fatal(err)
	}
	h13, err := s.Checkpoint(ctx, 13, nil)
	if err != nil {
		t.Fatalf("checkpoint right after Open: %v", err)
	}
	if err := s.NotifyCheckpointComplete(13); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitCheckpointGC(); err != nil {
		t.Fatal(err)
	}
	x = e.restore(nil, NoClaim, h13)
	if err := x.st.checkAll(m12); err != nil {
		t.Fatal(err)
	}
	x.st.s.Close()
	// Discard during the upload.
	rr.writes(1000)
	p, err = s.StartCheckpoint(14, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Discard(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(ctx); !errors.Is(err, ErrClosed) {
		t.Errorf("Wait after Discard: %v, want ErrClosed", err)
	}
	// Whatever 14 left, the latest restorable is consistent.
	lh, err := LatestCheckpoint(ctx, e.st, "life")
	if err != nil {
		t.Fatal(err)
	}
	x = e.restore(nil, NoClaim, lh)
	if lh.ID == 13 {
		if err := x.st.checkAll(m12); err != nil {
			t.Fatal(err)
		}
	}
	x.st.s.Close()
}

// attackAllStored checks that every object h's manifest names is in the storage.
func attackAllStored(ctx context.Context, st checkpoint.Storage, h CheckpointHandle) error {
	m, err := checkpoint.ReadManifest(ctx, st, h.Owner, h.ID)
	if err != nil {
		return err
	}
	for _, o := range m.Objects {
		if _, err := st.GetRange(ctx, o.Name, 0, 0); err != nil {
			return fmt.Errorf("checkpoint %d of %s names %s: %w", h.ID, h.Owner, o.Name, err)
		}
	}
	return nil
}

// TestAttackRestoredIDAboveOwn: a Store restored from another owner's checkpoint 50 starts its
// own lineage at id 1 (allowed: ids must grow only under the Store's Owner). Completing its
// checkpoint 1 must not garbage-collect it (GC took the restored id, 50, for the newest
// completed checkpoint of the new lineage, so checkpoint 1 fell outside Retain and was deleted
// at once — the job's only checkpoint gone). Both modes; and a CLAIM scale-in of sources with
// different ids keeps every source until a checkpoint of its own completes.
func TestAttackRestoredIDAboveOwn(t *testing.T) {
	ctx := context.Background()
	for _, mode := range []RestoreMode{NoClaim, Claim} {
		t.Run(mode.String(), func(t *testing.T) {
			e := newCkEnv(t, vfs.Default(), t.TempDir(), 128)
			e.opts.Checkpoint.Owner = "old"
			r := e.open(nil)
			r.writes(3000)
			if err := r.pushDown(0); err != nil {
				t.Fatal(err)
			}
			r.writes(500)
			h, err := r.st.s.Checkpoint(ctx, 50, nil)
			if err != nil {
				t.Fatal(err)
			}
			m := r.m.clone()
			r.st.s.Close()
			e.opts.Checkpoint.Owner = "new"
			n := e.restore(nil, mode, h)
			n.m = m.clone()
			n.writes(500)
			h1, err := n.st.s.Checkpoint(ctx, 1, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := n.st.s.NotifyCheckpointComplete(1); err != nil {
				t.Fatal(err)
			}
			if err := n.st.s.WaitCheckpointGC(); err != nil {
				t.Fatal(err)
			}
			if err := attackAllStored(ctx, e.st, h1); err != nil {
				t.Fatalf("completed checkpoint 1 after a restore of checkpoint 50: %v", err)
			}
			x := e.restore(nil, NoClaim, h1)
			if err := x.st.checkAll(n.m); err != nil {
				t.Fatal(err)
			}
			x.st.s.Close()
			n.st.s.Close()
		})
	}
	t.Run("claim-scale-in-mixed-ids", func(t *testing.T) {
		e := newCkEnv(t, vfs.Default(), t.TempDir(), 128)
		r := e.open(nil)
		r.writes(3000)
		if err := r.pushDown(0); err != nil {
			t.Fatal(err)
		}
		h, err := r.st.s.Checkpoint(ctx, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		m := r.m.clone()
		r.st.s.Close()
		var hs []CheckpointHandle
		union := m.clone()
		for i, id := range []uint64{5, 7} {
			kg := ComputeKeyGroupRangeForOperatorIndex(128, 2, i)
			o := e.opts
			o.KeyGroups = &kg
			o.Checkpoint.Owner = fmt.Sprintf("part%d", i)
			s, err := Restore(e.newDir(), o, e.st, h)
			if err != nil {
				t.Fatal(err)
			}
			p := e.run(s)
			p.m = m.clone()
			p.ownedSteps(800, attackMix)
			if err := p.pushDown(0); err != nil {
				t.Fatal(err)
			}
			hp, err := s.Checkpoint(ctx, id, nil)
			if err != nil {
				t.Fatal(err)
			}
			for slot := range p.w.u.slots() {
				if p.st.owns(slot) {
					union.setSlot(slot, p.m.slot(slot))
				}
			}
			hs = append(hs, hp)
			s.Close()
		}
		e.opts.Checkpoint.Owner = "merged"
		one := e.restore(nil, Claim, hs...)
		one.m = union
		// The first checkpoint is aborted: GC runs with nothing of ours completed.
		one.writes(300)
		if _, err := one.st.s.Checkpoint(ctx, 8, nil); err != nil {
			t.Fatal(err)
		}
		if err := one.st.s.NotifyCheckpointAborted(8); err != nil {
			t.Fatal(err)
		}
		if err := one.st.s.WaitCheckpointGC(); err != nil {
			t.Fatal(err)
		}
		for _, h := range hs {
			if err := attackAllStored(ctx, e.st, h); err != nil {
				t.Fatalf("claimed source before any checkpoint of ours completed: %v", err)
			}
		}
		one.writes(300)
		h9, err := one.st.s.Checkpoint(ctx, 9, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := one.st.s.NotifyCheckpointComplete(9); err != nil {
			t.Fatal(err)
		}
		if err := one.st.s.WaitCheckpointGC(); err != nil {
			t.Fatal(err)
		}
		if err := attackAllStored(ctx, e.st, h9); err != nil {
			t.Fatal(err)
		}
		x := e.restore(nil, NoClaim, h9)
		if err := x.st.checkAll(one.m); err != nil {
			t.Fatal(err)
		}
		x.st.s.Close()
		one.st.s.Close()
		// Claimed lineages are gone once ours completed.
		for _, h := range hs {
			if ids, _ := checkpoint.ListCheckpoints(ctx, e.st, h.Owner); len(ids) != 0 {
				t.Errorf("claimed lineage %s still holds %v", h.Owner, ids)
			}
		}
	})
}

// TestAttackUploadFaults: ENOSPC and EIO during a checkpoint's upload (objects, manifest,
// memory table): the checkpoint fails with the cause, the Store keeps working and loses
// nothing, the next checkpoint succeeds and restores exactly.
func TestAttackUploadFaults(t *testing.T) {
	ctx := context.Background()
	fault := vfs.NewFaultFS(vfs.Default())
	root := t.TempDir()
	e := newCkEnv(t, fault, root, 128)
	r := e.open(nil)
	defer r.st.s.Close()
	ckDir := filepath.Join(root, "checkpoints")
	id := uint64(0)
	// quiet: the task does not go on during the upload — the fault (the second read of any
	// LSM table) would as well hit the task's own reads (an aggregating merge reads the
	// LsmStore), which fails that step, not the upload (2 runs in 24 failed so).
	cases := []struct {
		name  string
		f     vfs.Fault
		quiet bool
	}{
		{"enospc-write-objects", vfs.Fault{Ops: vfs.Ops(vfs.OpWrite), Path: vfs.PathPrefix(ckDir), Sticky: true, Err: syscall.ENOSPC, ShortWrite: true}, false},
		{"eio-link-objects", vfs.Fault{Ops: vfs.Ops(vfs.OpLink), Path: vfs.PathPrefix(ckDir), Err: syscall.EIO}, false},
		{"eio-sync-2nd", vfs.Fault{Ops: vfs.Ops(vfs.OpSync), Path: vfs.PathPrefix(ckDir), Nth: 2, Err: syscall.EIO}, false},
		{"enospc-rename", vfs.Fault{Ops: vfs.Ops(vfs.OpRename, vfs.OpLink), Path: vfs.PathPrefix(ckDir), Nth: 3, Sticky: true, Err: syscall.ENOSPC}, false},
		{"enospc-memory-table", vfs.Fault{Ops: vfs.Ops(vfs.OpWrite, vfs.OpCreate), Path: vfs.PathPrefix(filepath.Join(root, "store-1", "checkpoint-tmp")), Sticky: true, Err: syscall.ENOSPC}, false},
		{"eio-read-lsm", vfs.Fault{Ops: vfs.Ops(vfs.OpRead), Path: vfs.PathGlob(filepath.Join(root, "store-1", "lsm", "*.sst")), Nth: 2, Err: syscall.EIO}, true},
	}
	for i, c := range cases {
		r.ownedSteps(1500, writeWeights)
		if i%2 == 0 {
			if err := r.pushDown(0); err != nil {
				t.Fatal(err)
			}
			r.ownedSteps(300, writeWeights)
		}
		fault.Inject(c.f)
		id++
		p, err := r.st.s.StartCheckpoint(id, nil)
		if err != nil {
			t.Fatalf("%s: start: %v", c.name, err)
		}
		if !c.quiet {
			r.ownedSteps(200, writeWeights) // the task goes on during the failing upload
		}
		_, err = p.Wait(ctx)
		injected := fault.Injected()
		fault.ClearFaults()
		if err == nil {
			if injected == 0 {
				t.Logf("%s: no fault hit", c.name)
			} else {
				t.Logf("%s: %d faults injected (retried), checkpoint succeeded", c.name, injected)
			}
		} else {
			t.Logf("%s: %v", c.name, err)
			// A full checkpoint storage is the storage's error (syscall.ENOSPC); only the
			// Store's own disk (the memory table) is ErrNoSpace.
			if errors.Is(c.f.Err, syscall.ENOSPC) && !errors.Is(err, syscall.ENOSPC) {
				t.Errorf("%s: checkpoint error %v is not ENOSPC", c.name, err)
			}
			if !errors.Is(err, vfs.ErrInjected) && !errors.Is(err, ErrNoSpace) {
				t.Errorf("%s: checkpoint error %v does not carry the cause", c.name, err)
			}
			if err := r.st.s.NotifyCheckpointAborted(id); err != nil {
				t.Fatal(err)
			}
		}
		if err := r.st.checkAll(r.m); err != nil {
			t.Fatalf("%s: Store after a failed checkpoint: %v", c.name, err)
		}
		r.ownedSteps(300, writeWeights)
		id++
		h, err := r.st.s.Checkpoint(ctx, id, nil)
		if err != nil {
			t.Fatalf("%s: the next checkpoint: %v", c.name, err)
		}
		m := r.m.clone()
		if err := r.st.s.NotifyCheckpointComplete(id); err != nil {
			t.Fatal(err)
		}
		if err := r.st.s.WaitCheckpointGC(); err != nil {
			t.Fatal(err)
		}
		x := e.restore(nil, NoClaim, h)
		if err := x.st.checkAll(m); err != nil {
			t.Fatalf("%s: restore of the next checkpoint: %v", c.name, err)
		}
		x.st.s.Close()
		if err := ckOnlyReachable(ctx, e.st, h.Owner); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

// TestAttackOwnerPrefixes: Stores with owners "a" and "ab" (and "a-b") checkpoint
// concurrently into one storage with NoGrace and Retain 1; every GC leaves the others'
// checkpoints whole.
func TestAttackOwnerPrefixes(t *testing.T) {
	ctx := context.Background()
	e := newCkEnv(t, vfs.Default(), t.TempDir(), 128)
	owners := []string{"a", "ab", "a-b", "a.b"}
	var runs []*modelRun
	for _, o := range owners {
		e.opts.Checkpoint.Owner = o
		runs = append(runs, e.open(nil))
	}
	last := map[string]CheckpointHandle{}
	models := map[string]*model{}
	for id := uint64(1); id <= 6; id++ {
		var ps []*PendingCheckpoint
		var ms []*model
		for _, r := range runs {
			r.writes(400)
			if id == 3 {
				if err := r.pushDown(0); err != nil {
					t.Fatal(err)
				}
			}
			p, err := r.st.s.StartCheckpoint(id, nil)
			if err != nil {
				t.Fatal(err)
			}
			ps, ms = append(ps, p), append(ms, r.m.clone())
		}
		for i, r := range runs {
			h, err := ps[i].Wait(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := r.st.s.NotifyCheckpointComplete(id); err != nil {
				t.Fatal(err)
			}
			last[owners[i]], models[owners[i]] = h, ms[i]
		}
		for i, r := range runs {
			if err := r.st.s.WaitCheckpointGC(); err != nil {
				t.Fatal(err)
			}
			for _, o := range owners {
				if err := attackAllStored(ctx, e.st, last[o]); err != nil {
					t.Fatalf("after GC of %q: %v", owners[i], err)
				}
			}
		}
	}
	for _, o := range owners {
		x := e.restore(nil, NoClaim, last[o])
		if err := x.st.checkAll(models[o]); err != nil {
			t.Fatalf("owner %q: %v", o, err)
		}
		x.st.s.Close()
	}
	for _, r := range runs {
		r.st.s.Close()
	}
}

// TestAttackExtremeParallelism: MaxParallelism 1 (one key group) and 32768, scale out to
// single key groups and back.
func TestAttackExtremeParallelism(t *testing.T) {
	ctx := context.Background()
	for _, maxP := range []int{1, 2, 32768} {
		t.Run(fmt.Sprint(maxP), func(t *testing.T) {
			e := newCkEnv(t, vfs.Default(), t.TempDir(), maxP)
			r := e.open(nil)
			r.ownedSteps(3000, attackMix)
			if err := r.pushDown(0); err != nil {
				t.Fatal(err)
			}
			r.ownedSteps(500, attackMix)
			h, err := r.st.s.Checkpoint(ctx, 1, nil)
			if err != nil {
				t.Fatal(err)
			}
			m := r.m.clone()
			r.st.s.Close()
			// Single key groups: the first, the last, and the key groups of two used keys.
			groups := []int{0, maxP - 1}
			for slot := range int32(6) {
				groups = append(groups, r.st.key(slot*3).KeyGroup())
			}
			slices.Sort(groups)
			groups = slices.Compact(groups)
			for _, g := range groups {
				kg := KeyGroupRange{Start: g, End: g}
				x := e.restore(&kg, NoClaim, h)
				x.m = m.clone()
				if err := x.st.checkOwned(x.m); err != nil {
					t.Fatalf("key group %d: %v", g, err)
				}
				x.st.s.Close()
			}
			// Three parts and back in one Store (maxP >= 3).
			if maxP < 3 {
				return
			}
			var hs []CheckpointHandle
			union := m.clone()
			for i, part := range splitRange(KeyGroupRange{Start: 0, End: maxP - 1}, 3) {
				o := e.opts
				o.KeyGroups = &part
				o.Checkpoint.Owner = fmt.Sprintf("p%d", i)
				s, err := Restore(e.newDir(), o, e.st, h)
				if err != nil {
					t.Fatal(err)
				}
				p := e.run(s)
				p.m = m.clone()
				p.ownedSteps(500, attackMix)
				hp, err := s.Checkpoint(ctx, 2, nil)
				if err != nil {
					t.Fatal(err)
				}
				for slot := range p.w.u.slots() {
					if p.st.owns(slot) {
						union.setSlot(slot, p.m.slot(slot))
					}
				}
				hs = append(hs, hp)
				s.Close()
			}
			one := e.restore(nil, Claim, hs...)
			if err := one.st.checkAll(union); err != nil {
				t.Fatal(err)
			}
			one.st.s.Close()
		})
	}
}

// TestAttackCheckpointDuringIteration: a checkpoint cut while a map iteration and a list
// stream from disk are open (big list pieces, a big map, many namespaces), both finishing
// after the cut; a NoClaim restore under the same owner whose source is never collected by
// the restored Store's GC.
func TestAttackCheckpointDuringIteration(t *testing.T) {
	ctx := context.Background()
	e := newCkEnv(t, vfs.Default(), t.TempDir(), 128)
	e.opts.Checkpoint.Owner = "iter"
	r := e.open(nil)
	s := r.st.s
	lst, err := NewListState(s, ListDescriptor[[]byte]{Name: "big-list", Codec: Bytes})
	if err != nil {
		t.Fatal(err)
	}
	mp, err := NewMapState(s, MapDescriptor[string, int64]{Name: "big-map", KeyCodec: String, ValueCodec: Int64})
	if err != nil {
		t.Fatal(err)
	}
	k := s.Key([]byte("the-key"))
	big := make([]byte, 3<<20) // > 1 MiB: several list pieces
	for i := range big {
		big[i] = byte(i * 7)
	}
	wantList := 0
	for i := range 4 {
		big[0] = byte(i)
		if err := lst.Add(k, big); err != nil {
			t.Fatal(err)
		}
		wantList++
	}
	for i := range raceScale(40000) {
		if err := mp.Put(k, fmt.Sprintf("uk-%06d", i), int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	for ns := range raceScale(20000) {
		if err := mp.Put(k.In([]byte(fmt.Sprintf("ns-%d", ns))), "x", int64(ns)); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.pushDown(0); err != nil {
		t.Fatal(err)
	}
	nMap := raceScale(40000)
	// Open the iterations, cut a checkpoint mid-way, write more, finish them.
	li := lst.Get(k)
	if !li.Next() {
		t.Fatal("empty list")
	}
	mi := mp.Iterator(k)
	seen := 0
	for seen < nMap/2 && mi.Next() {
		seen++
	}
	p, err := s.StartCheckpoint(1, nil)
	if err != nil {
		t.Fatal(err)
	}
	h, err := p.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for mi.Next() {
		seen++
	}
	if err := mi.Err(); err != nil || seen != nMap {
		t.Fatalf("map iteration across a checkpoint: %d of %d entries, %v", seen, nMap, err)
	}
	got := 1
	for li.Next() {
		if v := li.Value(); len(v) != len(big) {
			t.Fatalf("list element of %d bytes", len(v))
		}
		got++
	}
	if err := li.Err(); err != nil || got != wantList {
		t.Fatalf("list across a checkpoint: %d of %d, %v", got, wantList, err)
	}
	if err := s.NotifyCheckpointComplete(1); err != nil {
		t.Fatal(err)
	}
	s.Close()
	check := func(s *Store) {
		t.Helper()
		lst, _ := NewListState(s, ListDescriptor[[]byte]{Name: "big-list", Codec: Bytes})
		mp, _ := NewMapState(s, MapDescriptor[string, int64]{Name: "big-map", KeyCodec: String, ValueCodec: Int64})
		k := s.Key([]byte("the-key"))
		n := 0
		li := lst.Get(k)
		for li.Next() {
			v := li.Value()
			if len(v) != len(big) || v[0] != byte(n) || v[len(v)-1] != big[len(v)-1] {
				t.Fatalf("list element %d wrong", n)
			}
			n++
		}
		if li.Err() != nil || n != wantList {
			t.Fatalf("restored list: %d, %v", n, li.Err())
		}
		n = 0
		mi := mp.Iterator(k)
		for mi.Next() {
			if mi.Key() != fmt.Sprintf("uk-%06d", n) || mi.Value() != int64(n) {
				t.Fatalf("restored map entry %d: %s=%d", n, mi.Key(), mi.Value())
			}
			n++
		}
		if mi.Err() != nil || n != nMap {
			t.Fatalf("restored map: %d entries, %v", n, mi.Err())
		}
		for ns := range raceScale(20000) {
			v, ok, err := mp.Get(k.In([]byte(fmt.Sprintf("ns-%d", ns))), "x")
			if err != nil || !ok || v != int64(ns) {
				t.Fatalf("namespace %d: %d %v %v", ns, v, ok, err)
			}
		}
	}
	// NoClaim under the same owner: many checkpoints and completions never delete the source.
	o := e.opts
	x, err := Restore(e.newDir(), o, e.st, h)
	if err != nil {
		t.Fatal(err)
	}
	check(x)
	xl, _ := NewListState(x, ListDescriptor[[]byte]{Name: "big-list", Codec: Bytes})
	for id := uint64(2); id < 8; id++ {
		if err := xl.Add(x.Key([]byte(fmt.Sprintf("other-%d", id))), []byte("v")); err != nil {
			t.Fatal(err)
		}
		if id == 4 {
			x.Evict()
			x.WaitBackground()
		}
		if _, err := x.Checkpoint(ctx, id, nil); err != nil {
			t.Fatal(err)
		}
		if err := x.NotifyCheckpointComplete(id); err != nil {
			t.Fatal(err)
		}
		if err := x.WaitCheckpointGC(); err != nil {
			t.Fatal(err)
		}
		if err := attackAllStored(ctx, e.st, h); err != nil {
			t.Fatalf("NoClaim source after the restored Store completed %d: %v", id, err)
		}
	}
	x.Close()
	y, err := Restore(e.newDir(), o, e.st, h)
	if err != nil {
		t.Fatal(err)
	}
	check(y)
	y.Close()
}

// TestAttackZombieFenced: store A (a partitioned process that still runs) goes on
// checkpointing owner "o" after store B restored it. B's first checkpoint fences every older
// writer epoch: B commits checkpoint 2 over the zombie's checkpoint 2 (which it fenced),
// LatestCheckpoint is B's and restores B's state, and every later checkpoint of A fails with
// ErrFenced. A third Store restoring B's checkpoint fences B the same way; a manifest of an
// old epoch above a fence point is neither latest nor restorable; a Store restored only to
// read a checkpoint fences nobody.
func TestAttackZombieFenced(t *testing.T) {
	ctx := context.Background()
	e := newCkEnv(t, vfs.Default(), t.TempDir(), 128)
	e.opts.Checkpoint.Owner = "o"
	a := e.open(nil)
	a.writes(2000)
	h1, err := a.st.s.Checkpoint(ctx, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.st.s.NotifyCheckpointComplete(1); err != nil {
		t.Fatal(err)
	}
	m1 := a.m.clone()
	// A restore only to read: no fence, A goes on.
	v := e.restore(nil, NoClaim, h1)
	if err := v.st.checkAll(m1); err != nil {
		t.Fatal(err)
	}
	v.st.s.Close()
	b := e.restore(nil, NoClaim, h1)
	bDir := filepath.Join(e.root, fmt.Sprintf("store-%d", e.dirs))
	b.m = m1.clone()

	// Before B's first checkpoint the zombie still commits (nothing fenced it yet) ...
	a.writes(300)
	if _, err := a.st.s.Checkpoint(ctx, 2, nil); err != nil {
		t.Fatalf("A's checkpoint 2 before B checkpointed: %v", err)
	}
	// ... and B's first checkpoint fences it: B's checkpoint 2 replaces the zombie's.
	b.writes(300)
	hb, err := b.st.s.Checkpoint(ctx, 2, nil)
	if err != nil {
		t.Fatalf("B's checkpoint 2 over the zombie's: %v", err)
	}
	if _, err := a.st.s.Checkpoint(ctx, 3, nil); !errors.Is(err, ErrFenced) || !errors.Is(err, checkpoint.ErrFenced) {
		t.Fatalf("zombie A's checkpoint 3 after B's first checkpoint: %v, want ErrFenced", err)
	}
	// B closed and reopened from its directory is the same writer, not a zombie of itself.
	if err := b.st.s.Close(); err != nil {
		t.Fatal(err)
	}
	bs, err := Open(bDir, e.opts)
	if err != nil {
		t.Fatal(err)
	}
	bm := b.m
	b = e.run(bs)
	b.m = bm
	b.writes(200)
	hb, err = b.st.s.Checkpoint(ctx, 3, nil)
	if err != nil {
		t.Fatalf("B reopened: checkpoint 3: %v", err)
	}
	latest, err := LatestCheckpoint(ctx, e.st, "o")
	if err != nil || latest.ID != hb.ID {
		t.Fatalf("LatestCheckpoint(o) = %d, %v; want B's %d", latest.ID, err, hb.ID)
	}
	c := e.restore(nil, NoClaim, latest)
	if err := c.st.checkAll(b.m); err != nil {
		t.Fatalf("restore of the latest checkpoint: %v", err)
	}
	// C fences B at its first checkpoint.
	if _, err := c.st.s.Checkpoint(ctx, 4, nil); err != nil {
		t.Fatalf("C's checkpoint 4: %v", err)
	}
	if _, err := b.st.s.Checkpoint(ctx, 5, nil); !errors.Is(err, ErrFenced) {
		t.Fatalf("B's checkpoint 5 after C's first checkpoint: %v, want ErrFenced", err)
	}
	if _, err := c.st.s.Checkpoint(ctx, 5, nil); err != nil {
		t.Fatalf("C's checkpoint 5: %v", err)
	}
	for _, r := range []*modelRun{a, b, c} {
		r.st.s.Close()
	}
	// A zombie manifest that landed above a fence point (written by hand: A's checkpoint 1,
	// epoch 0, as id 6) is neither latest nor restorable.
	mf, err := checkpoint.ReadManifest(ctx, e.st, "o", 1)
	if err != nil {
		t.Fatal(err)
	}
	mf.ID, mf.Parent = 6, 0
	b6, err := mf.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if err := e.st.Create(ctx, checkpoint.ManifestName("o", 6), b6); err != nil {
		t.Fatal(err)
	}
	if latest, err := LatestCheckpoint(ctx, e.st, "o"); err != nil || latest.ID != 5 {
		t.Fatalf("LatestCheckpoint(o) with a fenced manifest 6 = %d, %v; want C's 5", latest.ID, err)
	}
	if _, err := Restore(e.newDir(), e.opts, e.st, CheckpointHandle{Owner: "o", ID: 6}); !errors.Is(err, ErrFenced) {
		t.Fatalf("Restore of a fenced checkpoint: %v, want ErrFenced", err)
	}
}

// TestAttackCheckpointIDsGrow: a Store restored from checkpoint 10 of its own lineage refuses
// checkpoint ids at or below 10, and after committing 12 refuses 11 and 12 (Flink's ids only
// grow; a smaller id would commit a checkpoint that "latest" never returns, and the writes
// after it would be dropped at the next recovery).
func TestAttackCheckpointIDsGrow(t *testing.T) {
	ctx := context.Background()
	e := newCkEnv(t, vfs.Default(), t.TempDir(), 128)
	e.opts.Checkpoint.Owner = "o"
	a := e.open(nil)
	a.writes(500)
	h, err := a.st.s.Checkpoint(ctx, 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	a.st.s.Close()
	b := e.restore(nil, NoClaim, h)
	defer b.st.s.Close()
	for _, id := range []uint64{5, 10} {
		if _, err := b.st.s.Checkpoint(ctx, id, nil); !errors.Is(err, ErrInvalidOptions) {
			t.Fatalf("checkpoint %d after a restore of checkpoint 10: %v, want ErrInvalidOptions", id, err)
		}
	}
	if _, err := b.st.s.Checkpoint(ctx, 12, nil); err != nil {
		t.Fatal(err)
	}
	for _, id := range []uint64{11, 12} {
		if _, err := b.st.s.Checkpoint(ctx, id, nil); !errors.Is(err, ErrInvalidOptions) {
			t.Fatalf("checkpoint %d after checkpoint 12 committed: %v, want ErrInvalidOptions", id, err)
		}
	}
	if _, err := b.st.s.Checkpoint(ctx, 13, nil); err != nil {
		t.Fatal(err)
	}
}

// TestAttackRestoreDamagedLogAndTimers: a changelog checkpoint's changelog object and timer
// object truncated, emptied or swapped for another object: Restore reports ErrCorruption
// naming the object (the manifest records each object's size and CRC32C), as for tables —
// never the storage's range error — and restores exactly once repaired.
func TestAttackRestoreDamagedLogAndTimers(t *testing.T) {
	ctx := context.Background()
	e := newCkEnv(t, vfs.Default(), t.TempDir(), 128)
	e.opts.Checkpoint.Changelog = &ChangelogOptions{MaterializationInterval: -1}
	r := e.open(nil)
	ts, err := NewTimerService(r.st.s, TimerServiceDescriptor[string]{Name: "tm", NamespaceCodec: String})
	if err != nil {
		t.Fatal(err)
	}
	r.writes(3000)
	if _, err := r.st.s.Checkpoint(ctx, 1, nil); err != nil {
		t.Fatal(err)
	}
	if err := r.st.s.NotifyCheckpointComplete(1); err != nil {
		t.Fatal(err)
	}
	r.writes(1500)
	for slot := range int32(40) {
		if err := ts.RegisterEventTimeTimer(r.st.key(slot), "w", int64(slot)*1000); err != nil {
			t.Fatal(err)
		}
	}
	h, err := r.st.s.Checkpoint(ctx, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := r.m.clone()
	r.st.s.Close()
	man, err := checkpoint.ReadManifest(ctx, e.st, h.Owner, 2)
	if err != nil {
		t.Fatal(err)
	}
	var logName, tmName string
	for _, o := range man.Objects {
		switch o.Kind {
		case checkpoint.KindChangelog:
			logName = o.Name
		case checkpoint.KindTimers:
			tmName = o.Name
		}
	}
	if logName == "" || tmName == "" {
		t.Fatalf("checkpoint 2 lists no changelog (%q) or timer (%q) object", logName, tmName)
	}
	root := filepath.Join(e.root, "checkpoints")
	path := func(name string) string { return filepath.Join(root, filepath.FromSlash(name)) }
	read := func(name string) []byte {
		b, err := os.ReadFile(path(name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	logBytes, tmBytes := read(logName), read(tmName)
	for _, d := range []struct {
		name, obj string
		with      []byte
	}{
		{"log-truncate-half", logName, logBytes[:len(logBytes)/2]},
		{"log-truncate-last", logName, logBytes[:len(logBytes)-1]},
		{"log-empty", logName, nil},
		{"log-swapped", logName, tmBytes},
		{"timers-truncate-half", tmName, tmBytes[:len(tmBytes)/2]},
		{"timers-empty", tmName, nil},
		{"timers-swapped", tmName, logBytes},
	} {
		t.Run(d.name, func(t *testing.T) {
			orig := read(d.obj)
			os.Remove(path(d.obj)) // objects may be hard links: replace, never write in place
			if err := os.WriteFile(path(d.obj), d.with, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Restore(e.newDir(), e.opts, e.st, h)
			os.Remove(path(d.obj))
			if werr := os.WriteFile(path(d.obj), orig, 0o644); werr != nil {
				t.Fatal(werr)
			}
			if !errors.Is(err, ErrCorruption) || !strings.Contains(err.Error(), d.obj) {
				t.Fatalf("restore with %s: %v, want ErrCorruption naming %s", d.name, err, d.obj)
			}
			s, err := Restore(e.newDir(), e.opts, e.st, h)
			if err != nil {
				t.Fatalf("restore once repaired: %v", err)
			}
			rr := e.run(s)
			if err := rr.st.checkAll(m); err != nil {
				t.Fatal(err)
			}
			s.Close()
		})
	}
}

// TestAttackChangelogCheckpointNoSpace: a changelog checkpoint on a full checkpoint disk
// fails with an error matching both ErrNoSpace and syscall.ENOSPC, as a native one does.
func TestAttackChangelogCheckpointNoSpace(t *testing.T) {
	ctx := context.Background()
	fault := vfs.NewFaultFS(vfs.Default())
	root := t.TempDir()
	e := newCkEnv(t, fault, root, 128)
	e.opts.Checkpoint.Changelog = &ChangelogOptions{MaterializationInterval: -1}
	r := e.open(nil)
	defer r.st.s.Close()
	r.writes(2000)
	if _, err := r.st.s.Checkpoint(ctx, 1, nil); err != nil {
		t.Fatal(err)
	}
	if err := r.st.s.NotifyCheckpointComplete(1); err != nil {
		t.Fatal(err)
	}
	r.writes(500)
	fault.Inject(vfs.Fault{Ops: vfs.Ops(vfs.OpWrite), Path: vfs.PathPrefix(filepath.Join(root, "checkpoints")), Sticky: true, Err: syscall.ENOSPC})
	_, err := r.st.s.Checkpoint(ctx, 2, nil)
	fault.ClearFaults()
	if !errors.Is(err, ErrNoSpace) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("changelog checkpoint on a full checkpoint disk: %v, want ErrNoSpace and ENOSPC", err)
	}
}
