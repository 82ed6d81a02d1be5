package strata

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/strata-db/strata/checkpoint"
	"github.com/strata-db/strata/internal/checkpointfs"
	"github.com/strata-db/strata/internal/engine"
	"github.com/strata-db/strata/internal/vfs"
)

// ckCrashOutcome is what the workload of TestCheckpointCrash acknowledged.
type ckCrashOutcome struct {
	m1, m2   *model // the models at the cuts of checkpoints 1 and 2
	durable2 bool   // checkpoint 2's Wait returned nil
	stage    string // the stage that stopped it ("" if none did)
	err      error
}

// ckCrashWorkloadDef is the workload of TestCheckpointCrash: crashWorkloadDef's with the
// operator state steps (an even-split list, a union list, a broadcast map in every checkpoint)
// and the timer steps (event-time and processing-time timers in every checkpoint).
//
// Its seeded draw (ckCrashWorkload) is what gives both checkpoints operator state and timers of
// both domains (TestCheckpointCrash checks it did), so it leaves out the batched-access steps
// that came later: they would change the draw. TestModel and TestCrash draw them.
func ckCrashWorkloadDef() *modelWorkload {
	w := crashWorkloadDef(false)
	w.weights = w.weights.withOps().withTimers().with(0, stepValBatch, stepValPutBatch, stepMapBatch)
	return w
}

// ckCrashWorkload, over fault (a MemFS): a Store with keyed state in all three tiers and
// operator state, checkpoint 1 completed and collected; then, with the crash point armed (arm), checkpoint 2 (cut, upload,
// commit), its completion and GC (checkpoint 1 deleted), and a restore of checkpoint 2 into
// a new directory. Background work is quiet during the armed part (evictions only when asked),
// so its writes are the same in every run.
func ckCrashWorkload(t *testing.T, fault *vfs.FaultFS, arm func()) (out ckCrashOutcome) {
	ctx := context.Background()
	st, err := checkpointfs.NewDirStorage(fault, "/ck")
	if err != nil {
		t.Fatal(err)
	}
	opts, adjust := lsmModelOptions(fault)
	opts.Checkpoint = CheckpointOptions{Storage: st, Owner: "crash", Grace: checkpoint.NoGrace}
	r := &modelRun{t: t, w: ckCrashWorkloadDef(), rng: rand.New(rand.NewPCG(5, 7)), m: newModel(), dir: "/db",
		opts: opts, adjust: adjust, fault: fault}
	if err := r.openStore(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		fault.Crash()
		r.st.s.Discard()
	}()
	r.writes(1500)
	if err := r.pushDown(0); err != nil {
		t.Fatal(err)
	}
	r.writes(300)
	if _, err := r.st.s.Checkpoint(ctx, 1, nil); err != nil {
		t.Fatal(err)
	}
	out.m1 = r.m.clone()
	if err := r.st.s.NotifyCheckpointComplete(1); err != nil {
		t.Fatal(err)
	}
	r.writes(300)
	if err := r.st.s.WaitBackground(); err != nil {
		t.Fatal(err)
	}
	if err := r.st.s.WaitCheckpointGC(); err != nil {
		t.Fatal(err)
	}
	arm()
	stop := func(stage string, err error) ckCrashOutcome {
		if !fault.Crashed() {
			t.Fatalf("%s failed before the crash: %v", stage, err)
		}
		out.stage, out.err = stage, err
		return out
	}
	h2, err := r.st.s.Checkpoint(ctx, 2, []byte("two"))
	out.m2 = r.m.clone()
	if err != nil {
		return stop("checkpoint", err)
	}
	out.durable2 = true
	if err := r.st.s.NotifyCheckpointComplete(2); err != nil {
		return stop("complete", err)
	}
	if err := r.st.s.WaitCheckpointGC(); err != nil {
		return stop("gc", err)
	}
	s, err := Restore("/restored", r.opts, st, h2)
	if err != nil {
		return stop("restore", err)
	}
	if err := s.Close(); err != nil {
		s.Discard() // a Close that fails for the crash keeps the Store open
		return stop("close of the restored Store", err)
	}
	return out
}

// TestCheckpointCrash crashes at every write of a checkpoint (upload, commit), its
// completion's GC and a restore: after each crash the newest committed checkpoint restores
// exactly, operator state and timers included (checkpoint 2 once its manifest is durable — never a part of it — else checkpoint
// 1), nothing of a failed checkpoint is left after the next GC, and a torn restore is redone.
func TestCheckpointCrash(t *testing.T) {
	var base, total int64
	{
		fault := vfs.NewFaultFS(vfs.NewMem())
		out := ckCrashWorkload(t, fault, func() { base = fault.Count(vfs.WriteOps) })
		total = fault.Count(vfs.WriteOps)
		if out.stage != "" || !out.durable2 {
			t.Fatalf("the workload without a crash stopped at %s: %v", out.stage, out.err)
		}
		if len(out.m1.opl)+len(out.m1.opu) == 0 || len(out.m2.opl)+len(out.m2.opu) == 0 || len(out.m2.opb) == 0 {
			t.Fatalf("checkpoints without operator state: %v %v %v", out.m2.opl, out.m2.opu, out.m2.opb)
		}
		for _, m := range []*model{out.m1, out.m2} {
			if len(m.tim[0]) == 0 || len(m.tim[1]) == 0 {
				t.Fatalf("a checkpoint without timers of both domains: %d, %d", len(m.tim[0]), len(m.tim[1]))
			}
		}
	}
	w := total - base
	t.Logf("%d writes in checkpoint 2, its GC and the restore", w)
	if w < 20 {
		t.Fatalf("only %d writes: the workload does not reach the storage", w)
	}
	step := int64(1)
	if n := int64(raceScale(150)); (testing.Short() || raceEnabled) && w > n {
		// About 150 crash points in -short, a quarter with -race (whose run is about the
		// background work racing the checkpoint); every one otherwise (scripts/test.sh runs
		// the crash tests without -race for that).
		step = w / n
	}
	ctx := context.Background()
	stages := map[string]int{}
	for n := int64(1); n <= w; n += step {
		mem := vfs.NewMem()
		fault := vfs.NewFaultFS(mem)
		out := ckCrashWorkload(t, fault, func() { fault.CrashAt(n) })
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
		want := out.m1
		switch {
		case latest.ID == 2:
			want = out.m2
		case latest.ID != 1:
			fail("latest checkpoint %d", latest.ID)
		case out.durable2:
			fail("checkpoint 2 was acknowledged durable, but the newest after the crash is 1")
		}
		opts, _ := lsmModelOptions(clone)
		opts.Checkpoint = CheckpointOptions{Storage: st, Owner: "crash", Grace: checkpoint.NoGrace}
		dir := fmt.Sprintf("/after-%d", n)
		s, err := Restore(dir, opts, st, latest)
		if err != nil {
			fail("restore of checkpoint %d: %v", latest.ID, err)
		}
		r := &modelRun{w: ckCrashWorkloadDef()}
		ms, err := r.register(s)
		if err == nil {
			err = ms.checkAll(want)
		}
		if err == nil {
			err = ms.checkOps(want)
		}
		if err == nil {
			err = ms.checkTimers(want)
		}
		if err != nil {
			s.Close()
			fail("checkpoint %d restored: %v", latest.ID, err)
		}
		// The next GC (after the grace period) leaves only what the kept checkpoints reach:
		// nothing of a torn upload, temporaries included.
		if _, err := checkpoint.GC(ctx, st, checkpoint.GCOptions{Owner: "crash", LastCompleted: latest.ID, Grace: checkpoint.NoGrace}); err != nil {
			fail("GC after the crash: %v", err)
		}
		if err := ckOnlyReachable(ctx, st, "crash"); err != nil {
			fail("%v", err)
		}
		if err := s.Close(); err != nil {
			fail("close: %v", err)
		}
		// A torn restore (no CURRENT in /restored) is refused by Open and redone after removal.
		if out.stage == "restore" {
			engine.RemoveRestored(clone, "/restored")
			s, err := Restore("/restored", opts, st, latest)
			if err != nil {
				fail("restore again into the torn restore's directory: %v", err)
			}
			s.Close()
		}
	}
	t.Logf("crash points by the stage they stopped: %v", stages)
	for _, stage := range []string{"checkpoint", "restore"} {
		if stages[stage] == 0 {
			t.Errorf("no crash point stopped the %s", stage)
		}
	}
}

// ckOnlyReachable checks that every object under owner is a kept manifest or named by one.
func ckOnlyReachable(ctx context.Context, st checkpoint.Storage, owner string) error {
	ids, err := checkpoint.ListCheckpoints(ctx, st, owner)
	if err != nil {
		return err
	}
	reach := map[string]bool{}
	for _, id := range ids {
		m, err := checkpoint.ReadManifest(ctx, st, owner, id)
		if err != nil {
			return err
		}
		reach[checkpoint.ManifestName(owner, id)] = true
		for _, o := range m.Objects {
			reach[o.Name] = true
		}
	}
	objs, err := st.List(ctx, owner+"/")
	if err != nil {
		return err
	}
	for _, o := range objs {
		if !reach[o.Name] {
			return errors.New("unreachable object left after GC: " + o.Name)
		}
	}
	return nil
}
