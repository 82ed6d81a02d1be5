package strata

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/strata-db/strata/checkpoint"
	"github.com/strata-db/strata/internal/checkpointfs"
	"github.com/strata-db/strata/internal/engine"
	"github.com/strata-db/strata/internal/vfs"
)

// bulkReplaySource builds the restore source of the bulk replay tests: a Store with the
// changelog on whose state lies in the LsmStore and in memory at a native checkpoint 1 (the
// materialization), then a tail of every write kind of the workload — value puts and clears,
// list adds, updates (replaces) after adds and clears, map puts, removes and clears,
// reducing and aggregating state, TTL values stamped by the clock — over the same keys,
// logged for the changelog checkpoint 2 it returns with the model at its cut.
func bulkReplaySource(t *testing.T, r *modelRun, tail int) (CheckpointHandle, *model) {
	t.Helper()
	ctx := context.Background()
	if err := r.openStore(); err != nil {
		t.Fatal(err)
	}
	defer r.st.s.Close()
	r.writes(raceScale(2000))
	if err := r.pushDown(0); err != nil {
		t.Fatal(err)
	}
	r.writes(raceScale(400))
	h1, err := r.st.s.Checkpoint(ctx, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.st.s.NotifyCheckpointComplete(1); err != nil {
		t.Fatal(err)
	}
	if h1.Stats.MemoryBytes == 0 {
		t.Fatalf("checkpoint 1 is not native: %+v", h1.Stats)
	}
	r.writes(tail)
	h2, err := r.st.s.Checkpoint(ctx, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	if h2.Stats.MemoryBytes != 0 {
		t.Fatalf("checkpoint 2 is not a changelog checkpoint: %+v", h2.Stats)
	}
	return h2, r.m.clone()
}

// TestBulkReplayMatchesApply: a changelog restore that applies the log tail in bulk (sorted,
// resolved, written as L0 files; engine bulk.go) reads exactly as one that replays it through
// Apply (engine.Options.ReplayByApply), and both as the model at the checkpoint's cut — for random logs of every write kind
// over state below them in the restored tables, with TTL values and clock jumps, into all the
// key groups and into sub-ranges (rescaling), one of them all in the lower half of the key
// groups. Every bulk restore splits its tail into parts by key-group range written at once
// (invariant 30; engine.Options.BulkParallelMin lowered to these small tails) and the test checks that it
// did.
func TestBulkReplayMatchesApply(t *testing.T) {
	for seed := range uint64(3) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			root := t.TempDir()
			st, err := checkpointfs.NewDirStorage(vfs.Default(), filepath.Join(root, "checkpoints"))
			if err != nil {
				t.Fatal(err)
			}
			opts, adjust := lsmModelOptions(vfs.Default())
			opts.Checkpoint = CheckpointOptions{Storage: st, Owner: "bulk", Grace: checkpoint.NoGrace,
				Changelog: &ChangelogOptions{MaterializationInterval: -1}}
			now := new(atomic.Int64)
			now.Store(modelClockStart)
			opts.Clock = now.Load
			w := &modelWorkload{u: plainUniverse("key-%d", 60, "", "w1", "w2"), maxVal: 300, ttl: true,
				weights: writeWeights.with(120, stepTTLWrite).with(8, stepClock)}
			r := &modelRun{t: t, w: w, rng: rand.New(rand.NewPCG(seed, 24)), m: newModel(), now: now,
				dir: filepath.Join(root, "db"), opts: opts, adjust: adjust}
			h2, want := bulkReplaySource(t, r, raceScale(3000))
			for ki, kg := range []*KeyGroupRange{nil, {Start: 10, End: 41}, {Start: 0, End: 31}} {
				for _, byApply := range []bool{true, false} {
					o := opts
					o.KeyGroups = kg
					o.Checkpoint.Owner = fmt.Sprintf("restored-%d-%v", ki, byApply)
					o.adjust = func(eo *engine.Options) { eo.ReplayByApply, eo.BulkParallelMin = byApply, 1 }
					s, err := Restore(filepath.Join(root, o.Checkpoint.Owner), o, st, h2)
					if err != nil {
						t.Fatal(err)
					}
					rs := s.RestoreStats()
					files, par := rs.BulkFiles, rs.BulkParallelBatches
					if rs.ChangelogRecords == 0 || byApply != (files == 0) || byApply != (par == 0) {
						s.Close()
						t.Fatalf("restore (by apply %v, key groups %v): %d records replayed, %d bulk files, %d batches in parts",
							byApply, kg, rs.ChangelogRecords, files, par)
					}
					rr := &modelRun{t: t, w: w, rng: r.rng, m: want.clone(), now: now}
					if rr.st, err = rr.register(s); err == nil {
						err = rr.st.checkOwned(rr.m)
					}
					s.Close()
					if err != nil {
						t.Fatalf("restore (by apply %v, key groups %v): %v", byApply, kg, err)
					}
				}
			}
		})
	}
}

// TestBulkReplayCrash: a crash at any write of a bulk changelog replay — the L0 file, its
// install, the persist that follows — leaves the checkpoint restorable: a restore after it
// (into a new directory, from what the crash left on the file system) gives the checkpoint's
// state. The replay writes its tail in parts at once (invariant 30), as the test checks.
func TestBulkReplayCrash(t *testing.T) {
	mem := vfs.NewMem()
	fault := vfs.NewFaultFS(mem)
	st, err := checkpointfs.NewDirStorage(fault, "/ck")
	if err != nil {
		t.Fatal(err)
	}
	opts, adjust := lsmModelOptions(fault)
	opts.Checkpoint = CheckpointOptions{Storage: st, Owner: "bulk", Grace: checkpoint.NoGrace,
		Changelog: &ChangelogOptions{MaterializationInterval: -1}}
	r := &modelRun{t: t, w: crashWorkloadDef(false), rng: rand.New(rand.NewPCG(9, 24)), m: newModel(), dir: "/db",
		opts: opts, adjust: adjust, fault: fault}
	h2, want := bulkReplaySource(t, r, 1500)
	opts.adjust = func(eo *engine.Options) { eo.BulkParallelMin = 1 } // the restores' tails split into parts

	// restore runs Restore of h2 into dir over a crash clone of from; at the n-th write from
	// the start (0: none) the process dies. It returns the file system, the restore's error
	// and the index of the write that created the bulk replay's first L0 file (0: unknown,
	// the restore failed before it or n > 0).
	restore := func(from *vfs.MemFS, dir string, n int64) (*vfs.MemFS, int64, error) {
		m := from.CrashClone()
		var creates []int64 // the writes that created table files in dir
		var outer *vfs.FaultFS
		inner := vfs.NewFaultFS(m, vfs.Fault{Ops: 1 << vfs.OpCreate, Path: func(p string) bool {
			if strings.HasPrefix(p, dir+"/lsm/") && strings.HasSuffix(p, ".sst") {
				creates = append(creates, outer.Count(vfs.WriteOps))
			}
			return false
		}})
		outer = vfs.NewFaultFS(inner)
		s2, err := checkpointfs.NewDirStorage(outer, "/ck")
		if err != nil {
			t.Fatal(err)
		}
		o := opts
		o.fs, o.Checkpoint.Storage, o.Checkpoint.Owner = outer, s2, "restored"
		c0 := outer.Count(vfs.WriteOps)
		outer.CrashAt(n)
		s, err := Restore(dir, o, s2, h2)
		if err != nil {
			return m, 0, err
		}
		defer s.Discard()
		if n > 0 {
			return m, 0, nil
		}
		rs := s.RestoreStats()
		ms, err := registerModel(s, r.w.u)
		if err == nil {
			err = ms.checkAll(want.clone())
		}
		if err == nil && (rs.BulkFiles < 2 || rs.BulkParallelBatches == 0 || len(creates) <= rs.Copied) {
			err = fmt.Errorf("the restore replayed %d records, %d bulk files (%d batches in parts), created %d table files for %d copied",
				rs.ChangelogRecords, rs.BulkFiles, rs.BulkParallelBatches, len(creates), rs.Copied)
		}
		if err != nil {
			return m, 0, err
		}
		return m, creates[rs.Copied] - c0, nil
	}
	_, first, err := restore(mem, "/restored", 0)
	if err != nil {
		t.Fatal(err)
	}
	// The writes of a whole restore.
	clone := vfs.NewFaultFS(mem.CrashClone())
	s2, err := checkpointfs.NewDirStorage(clone, "/ck")
	if err != nil {
		t.Fatal(err)
	}
	o := opts
	o.fs, o.Checkpoint.Storage, o.Checkpoint.Owner = clone, s2, "restored"
	c0 := clone.Count(vfs.WriteOps)
	s, err := Restore("/restored", o, s2, h2)
	if err != nil {
		t.Fatal(err)
	}
	total := clone.Count(vfs.WriteOps) - c0
	s.Discard()
	stride := max(1, (total-first)/int64(raceScale(40)))
	crashes := 0
	for n := first; n <= total; n += stride {
		m, _, err := restore(mem, "/restored", n)
		if err == nil {
			continue // background work (an LSM compaction) may move the writes of a run
		}
		crashes++
		if _, _, err := restore(m, "/again", 0); err != nil {
			t.Fatalf("restore after a crash at write %d of %d (the bulk replay's from %d): %v", n, total, first, err)
		}
	}
	if crashes == 0 {
		t.Fatalf("no crash in writes %d..%d of a restore", first, total)
	}
	t.Logf("%d crash points in writes %d..%d of a restore", crashes, first, total)
}
