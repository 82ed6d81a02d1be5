package strata

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/strata-db/strata/checkpoint"
	"github.com/strata-db/strata/internal/checkpointfs"
	"github.com/strata-db/strata/internal/engine"
	"github.com/strata-db/strata/internal/vfs"
)

// clCrashThreshold is the changelog writer's Threshold and PreemptiveThreshold in
// TestChangelogCrash: one byte under four 16 KiB charge granules, so a Log buffers at most
// three granules and PersistDue's size test (buffered >= PreemptiveThreshold) is never true.
// With a PersistDelay of an hour no persist is ever due in the background: the log is
// persisted only when an Append is refused at the threshold (the engine's backpressure
// persist, on the owner's goroutine) and by checkpoints — at the same writes in every run.
const clCrashThreshold = 64<<10 - 1

// clCrashOutcome is what the workload of TestChangelogCrash acknowledged.
type clCrashOutcome struct {
	models  map[uint64]*model // the model at the cut of checkpoints 1, 2, 3
	durable uint64            // the newest checkpoint whose Wait returned nil
	stage   string            // the stage that stopped it ("" if none did)
	err     error
	// Figures of the armed part (checked on the run without a crash).
	bpPersists     int64 // backpressure persists of the log (BackpressureWaits)
	h2, h3         CheckpointStats
	materialized   bool
	restoreRecords int64
}

// clCrashWorkload, over fault (a MemFS): a Store with the changelog on and state in all
// three tiers; checkpoint 1 (the first materialization) completed and collected; then, with
// the crash point armed (arm): writes that fill the log's buffer and persist it, checkpoint 2
// (the log's tail only), its completion and GC, a forced materialization, checkpoint 3 on top
// of it, its completion (truncation of the old generation) and GC, and a restore of checkpoint
// 3 into a new directory with the changelog on. Background work is quiet during the armed part
// (no background persist, evictions only when asked), so its writes are the same in every run.
func clCrashWorkload(t *testing.T, fault *vfs.FaultFS, arm func()) (out clCrashOutcome) {
	ctx := context.Background()
	out.models = map[uint64]*model{}
	st, err := checkpointfs.NewDirStorage(fault, "/ck")
	if err != nil {
		t.Fatal(err)
	}
	opts, adjust := lsmModelOptions(fault)
	// A crash fails the backpressure persist for good: give up soon.
	opts.BackpressureTimeout = 20 * time.Millisecond
	opts.Checkpoint = CheckpointOptions{Storage: st, Owner: "crash", Grace: checkpoint.NoGrace,
		Changelog: &ChangelogOptions{MaterializationInterval: -1}}
	r := &modelRun{t: t, w: crashWorkloadDef(false), rng: rand.New(rand.NewPCG(11, 13)), m: newModel(), dir: "/db",
		opts: opts, fault: fault, adjust: func(o *engine.Options) {
			adjust(o)
			w := &o.Changelog.NewWriter
			w.PersistDelay, w.Threshold, w.PreemptiveThreshold = time.Hour, clCrashThreshold, clCrashThreshold
		}}
	if err := r.openStore(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		fault.Crash()
		r.st.s.Discard()
	}()
	s := r.st.s
	r.writes(1500)
	if err := r.pushDown(0); err != nil {
		t.Fatal(err)
	}
	r.writes(300)
	h1, err := s.Checkpoint(ctx, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if h1.Stats.MemoryBytes == 0 {
		t.Fatalf("checkpoint 1 (the first materialization) has no memory table: %+v", h1.Stats)
	}
	out.models[1], out.durable = r.m.clone(), 1
	if err := s.NotifyCheckpointComplete(1); err != nil {
		t.Fatal(err)
	}
	r.writes(300)
	if err := s.WaitBackground(); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitCheckpointGC(); err != nil {
		t.Fatal(err)
	}
	bp0 := s.Stats().Stalls.BackpressureWaits
	arm()
	stop := func(stage string, err error) clCrashOutcome {
		if !fault.Crashed() {
			t.Fatalf("%s failed before the crash: %v", stage, err)
		}
		out.stage, out.err = stage, err
		return out
	}
	writes := func(n int) error {
		for range n {
			if err := r.step(); err != nil {
				return err
			}
		}
		return nil
	}
	if err := writes(1500); err != nil {
		return stop("persist", err)
	}
	out.bpPersists = s.Stats().Stalls.BackpressureWaits - bp0
	h2, err := s.Checkpoint(ctx, 2, []byte("two"))
	out.models[2] = r.m.clone()
	if err != nil {
		return stop("checkpoint 2", err)
	}
	out.durable, out.h2 = 2, h2.Stats
	if err := s.NotifyCheckpointComplete(2); err != nil {
		return stop("complete 2", err)
	}
	if err := s.WaitCheckpointGC(); err != nil {
		return stop("gc 2", err)
	}
	if err := writes(200); err != nil {
		return stop("persist", err)
	}
	if err := s.e.Materialize(ctx); err != nil {
		return stop("materialize", err)
	}
	out.materialized = true
	if err := writes(200); err != nil {
		return stop("persist", err)
	}
	h3, err := s.Checkpoint(ctx, 3, []byte("three"))
	out.models[3] = r.m.clone()
	if err != nil {
		return stop("checkpoint 3", err)
	}
	out.durable, out.h3 = 3, h3.Stats
	if err := s.NotifyCheckpointComplete(3); err != nil {
		return stop("complete 3", err)
	}
	if err := s.WaitCheckpointGC(); err != nil {
		return stop("gc 3", err)
	}
	// The restored Store logs the replayed records too: through a shared writer with the same
	// quiet settings, so its persists (backpressure only) are deterministic.
	w, err := NewChangelogWriter(ChangelogWriterOptions{Storage: st, Prefix: "crash", PersistDelay: time.Hour,
		Threshold: clCrashThreshold, PreemptiveThreshold: clCrashThreshold})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	o := r.opts
	o.Checkpoint.Changelog = &ChangelogOptions{Writer: w, MaterializationInterval: -1}
	rs, err := Restore("/restored", o, st, h3)
	if err != nil {
		return stop("restore", err)
	}
	out.restoreRecords = rs.RestoreStats().ChangelogRecords
	if err := rs.Close(); err != nil {
		rs.Discard() // a Close that fails for the crash keeps the Store open
		return stop("close of the restored Store", err)
	}
	return out
}

// TestChangelogCrash crashes at every write of the changelog's work — backpressure persists
// of the log, a changelog checkpoint (tail only), a materialization, a checkpoint on it, the
// completions (truncation, GC) and a restore — and checks after each crash that the newest
// committed checkpoint restores exactly the model at its cut, into a Store with the changelog
// on and into one with it off; that no checkpoint acknowledged durable is lost; and that after
// the next GC nothing unreachable is left (torn persists, a materialization no manifest lists,
// changelog objects of truncated generations).
func TestChangelogCrash(t *testing.T) {
	var base, total int64
	{
		fault := vfs.NewFaultFS(vfs.NewMem())
		out := clCrashWorkload(t, fault, func() { base = fault.Count(vfs.WriteOps) })
		total = fault.Count(vfs.WriteOps)
		if out.stage != "" || out.durable != 3 {
			t.Fatalf("the workload without a crash stopped at %s: %v", out.stage, out.err)
		}
		// The workload does what it says: persists under backpressure, two changelog
		// checkpoints (no memory table, the materialization's tables reused) and a replay.
		if out.bpPersists == 0 {
			t.Fatal("no backpressure persist of the log in the armed part")
		}
		for i, h := range []CheckpointStats{out.h2, out.h3} {
			if h.MemoryBytes != 0 || h.UploadedObjects == 0 || h.ReusedObjects == 0 {
				t.Fatalf("checkpoint %d is not a changelog checkpoint: %+v", i+2, h)
			}
		}
		if !out.materialized || out.restoreRecords == 0 {
			t.Fatalf("materialized %v, %d records replayed by the restore", out.materialized, out.restoreRecords)
		}
		t.Logf("armed part: %d backpressure persists; checkpoint 2 %+v; checkpoint 3 %+v; %d records replayed",
			out.bpPersists, out.h2, out.h3, out.restoreRecords)
	}
	w := total - base
	// Determinism: a second run writes exactly as much, so write n is the same write in
	// every run of the loop.
	{
		fault := vfs.NewFaultFS(vfs.NewMem())
		var base2 int64
		clCrashWorkload(t, fault, func() { base2 = fault.Count(vfs.WriteOps) })
		if w2 := fault.Count(vfs.WriteOps) - base2; w2 != w || base2 != base {
			t.Fatalf("two runs without a crash wrote %d then %d (%d then %d before arming): the workload is not deterministic",
				w, w2, base, base2)
		}
	}
	t.Logf("%d writes in the armed part", w)
	if w < 40 {
		t.Fatalf("only %d writes: the workload does not reach the storage", w)
	}
	step := int64(1)
	if n := int64(raceScale(150)); (testing.Short() || raceEnabled) && w > n {
		// About 150 crash points in -short, a quarter with -race; every one otherwise
		// (scripts/test.sh runs the crash tests without -race for that).
		step = w / n
	}
	ctx := context.Background()
	stages := map[string]int{}
	for n := int64(1); n <= w; n += step {
		mem := vfs.NewMem()
		fault := vfs.NewFaultFS(mem)
		out := clCrashWorkload(t, fault, func() { fault.CrashAt(n) })
		stages[out.stage]++
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("crash at write %d of %d (stopped at %q: %v): %s", n, w, out.stage, out.err, fmt.Sprintf(format, args...))
		}
		clone := vfs.NewFaultFS(mem.CrashClone())
		st, err := checkpointfs.NewDirStorage(clone, "/ck")
		if err != nil {
			fail("storage after the crash: %v", err)
		}
		latest, err := LatestCheckpoint(ctx, st, "crash")
		if err != nil {
			fail("LatestCheckpoint: %v", err)
		}
		want := out.models[latest.ID]
		switch {
		case want == nil:
			fail("latest checkpoint %d was never cut", latest.ID)
		case latest.ID < out.durable:
			fail("checkpoint %d was acknowledged durable, but the newest after the crash is %d", out.durable, latest.ID)
		}
		for _, on := range []bool{true, false} {
			opts, _ := lsmModelOptions(clone)
			// Another owner: the restored Store's own changelog objects stay out of "crash/".
			opts.Checkpoint = CheckpointOptions{Storage: st, Owner: "verify", Grace: checkpoint.NoGrace}
			if on {
				opts.Checkpoint.Changelog = &ChangelogOptions{MaterializationInterval: -1}
			}
			s, err := Restore(fmt.Sprintf("/after-%d-%v", n, on), opts, st, latest)
			if err != nil {
				fail("restore of checkpoint %d (changelog on: %v): %v", latest.ID, on, err)
			}
			if latest.ID > 1 && s.RestoreStats().ChangelogRecords == 0 {
				s.Close()
				fail("restore of checkpoint %d replayed no changelog record", latest.ID)
			}
			ms, err := registerModel(s, crashWorkloadDef(false).u)
			if err == nil {
				err = ms.checkAll(want)
			}
			if cerr := s.Close(); err == nil && cerr != nil {
				err = fmt.Errorf("close: %w", cerr)
			}
			if err != nil {
				fail("checkpoint %d restored (changelog on: %v): %v", latest.ID, on, err)
			}
		}
		// The next GC (after the grace period) leaves only what the kept checkpoints reach:
		// nothing of a torn persist or upload, no unlisted materialization, temporaries
		// included.
		if _, err := checkpoint.GC(ctx, st, checkpoint.GCOptions{Owner: "crash", LastCompleted: latest.ID, Grace: checkpoint.NoGrace}); err != nil {
			fail("GC after the crash: %v", err)
		}
		if err := ckOnlyReachable(ctx, st, "crash"); err != nil {
			fail("%v", err)
		}
		// What GC kept still restores (it took nothing a kept checkpoint needs).
		opts, _ := lsmModelOptions(clone)
		opts.Checkpoint = CheckpointOptions{Storage: st, Owner: "verify", Grace: checkpoint.NoGrace}
		s, err := Restore(fmt.Sprintf("/after-gc-%d", n), opts, st, latest)
		if err != nil {
			fail("restore of checkpoint %d after GC: %v", latest.ID, err)
		}
		ms, err := registerModel(s, crashWorkloadDef(false).u)
		if err == nil {
			err = ms.checkAll(want)
		}
		s.Close()
		if err != nil {
			fail("checkpoint %d restored after GC: %v", latest.ID, err)
		}
		// A torn restore whose directory has a persist point (lsm/CURRENT) is refused by
		// Open or holds exactly checkpoint 3 — never the materialization without the
		// changelog replayed on it; it is redone after removal.
		if out.stage == "restore" {
			o := opts
			o.Checkpoint = CheckpointOptions{}
			if _, err := clone.Stat("/restored/lsm/CURRENT"); err != nil {
				// No persist point: Open would create an empty Store, not take the restore.
			} else if s, err := Open("/restored", o); err != nil && !errors.Is(err, ErrRestoreIncomplete) {
				fail("Open of the torn restore's directory: %v, want ErrRestoreIncomplete", err)
			} else if err == nil {
				ms, err := registerModel(s, crashWorkloadDef(false).u)
				if err == nil {
					err = ms.checkAll(out.models[3])
				}
				s.Close()
				if err != nil {
					fail("Open took the torn restore's directory, which does not hold checkpoint 3: %v", err)
				}
			}
			engine.RemoveRestored(clone, "/restored")
			s, err := Restore("/restored", opts, st, latest)
			if err != nil {
				fail("restore again into the torn restore's directory: %v", err)
			}
			s.Close()
		}
	}
	t.Logf("crash points by the stage they stopped: %v", stages)
	for _, stage := range []string{"persist", "checkpoint 2", "materialize", "checkpoint 3", "restore"} {
		if stages[stage] == 0 {
			t.Errorf("no crash point stopped the %s", stage)
		}
	}
}

// TestChangelogRestoreDurable: a Store restored from a changelog checkpoint holds the
// checkpoint's state on disk when Restore returns — a crash then (no Close) reopens the
// directory to that state, not to the materialization's under it (the replayed tail was in
// memory only; TestModel/changelog found it).
func TestChangelogRestoreDurable(t *testing.T) {
	ctx := context.Background()
	mem := vfs.NewMem()
	fault := vfs.NewFaultFS(mem)
	st, err := checkpointfs.NewDirStorage(fault, "/ck")
	if err != nil {
		t.Fatal(err)
	}
	opts, adjust := lsmModelOptions(fault)
	opts.Checkpoint = CheckpointOptions{Storage: st, Owner: "durable", Grace: checkpoint.NoGrace,
		Changelog: &ChangelogOptions{MaterializationInterval: -1}}
	r := &modelRun{t: t, w: crashWorkloadDef(false), rng: rand.New(rand.NewPCG(3, 4)), m: newModel(), dir: "/db",
		opts: opts, adjust: adjust, fault: fault}
	if err := r.openStore(); err != nil {
		t.Fatal(err)
	}
	defer r.st.s.Close()
	r.writes(1000)
	if _, err := r.st.s.Checkpoint(ctx, 1, nil); err != nil {
		t.Fatal(err)
	}
	if err := r.st.s.NotifyCheckpointComplete(1); err != nil {
		t.Fatal(err)
	}
	r.writes(1000)
	h2, err := r.st.s.Checkpoint(ctx, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, on := range []bool{true, false} {
		o := opts
		o.Checkpoint.Owner = fmt.Sprintf("restored-%v", on)
		if !on {
			o.Checkpoint.Changelog = nil
		}
		dir := fmt.Sprintf("/restored-%v", on)
		s, err := Restore(dir, o, st, h2)
		if err != nil {
			t.Fatal(err)
		}
		if s.RestoreStats().ChangelogRecords == 0 {
			t.Fatal("checkpoint 2 replayed no changelog record")
		}
		// The process dies: only what was synced is left.
		clone := vfs.NewFaultFS(mem.CrashClone())
		s.Discard()
		o.fs = clone
		o.Checkpoint.Storage, o.Checkpoint.Changelog = nil, nil
		s2, err := Open(dir, o)
		if err != nil {
			t.Fatalf("open after a crash right after Restore (changelog on %v): %v", on, err)
		}
		ms, err := registerModel(s2, r.w.u)
		if err == nil {
			err = ms.checkAll(r.m)
		}
		s2.Close()
		if err != nil {
			t.Fatalf("reopened after a crash right after Restore (changelog on %v): %v", on, err)
		}
	}
}
