package strata

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/strata-db/strata/checkpoint"
	"github.com/strata-db/strata/internal/checkpointfs"
	"github.com/strata-db/strata/internal/engine"
	"github.com/strata-db/strata/internal/vfs"
)

// tailGate holds the lazy tail's driver (hook, the restore's engine.Options.TailHook) until
// open is called, or until a long timeout so that a test whose read waits for the tail too
// early fails instead of hanging.
type tailGate struct {
	ready, hold chan struct{}
	released    atomic.Bool
	held        atomic.Bool // the driver reached hook
}

func newTailGate() *tailGate {
	g := &tailGate{ready: make(chan struct{}), hold: make(chan struct{})}
	go func() {
		select {
		case <-g.ready:
			time.Sleep(20 * time.Millisecond) // the reads start first and wait
		case <-time.After(20 * time.Second):
		}
		g.released.Store(true)
		close(g.hold)
	}()
	return g
}

// open lets the driver go (after a short delay); hook holds it until then.
func (g *tailGate) open() { close(g.ready) }
func (g *tailGate) hook() { g.held.Store(true); <-g.hold }

// lazyTail is the engine adjustment (Options.adjust) of these tests' restores: the changelog
// tail lazy (engine.Options.LazyTail) without lazy tables, split into parts even when small
// (BulkParallelMin 1, invariant 30), and hook (nil: none) run first by its driver.
func lazyTail(hook func()) func(*engine.Options) {
	return func(eo *engine.Options) { eo.LazyTail, eo.BulkParallelMin, eo.TailHook = true, 1, hook }
}

// lazyTailSetup is TestBulkReplayMatchesApply's source: a changelog checkpoint 2 over a
// native checkpoint 1, its tail of every write kind, and the model at its cut.
func lazyTailSetup(t *testing.T, seed uint64) (root string, st checkpoint.Storage, opts Options, r *modelRun, h2 CheckpointHandle, want *model) {
	root = t.TempDir()
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
	r = &modelRun{t: t, w: w, rng: rand.New(rand.NewPCG(seed, 25)), m: newModel(), now: now,
		dir: filepath.Join(root, "db"), opts: opts, adjust: adjust}
	h2, want = bulkReplaySource(t, r, raceScale(3000))
	return root, st, opts, r, h2, want
}

// TestLazyTail: a restore whose changelog tail is lazy (engine tail.go; doc.go "Lazy tail")
// returns before the tail is installed — its driver held by a hook — and then: value puts
// written before the install win over the tail's versions of their keys, and every read
// started before the install — answered by the tail's value index (a value Get: engine
// invariant 39), or waiting for the install (the others) — reads as the model at the checkpoint's cut
// with those puts — as a synchronous bulk replay reads (TestBulkReplayMatchesApply) — into
// all the key groups and a sub-range, with the tail split into parts (invariant 30). A
// checkpoint taken right after such a restore (its cut waits for the tail too) restores,
// synchronously, to the same state. Without the waits the reads and the checkpoint miss the
// tail. Seed 1 restores with one background worker, which the driver holds: its parts take
// no other lane (forEachInTask).
func TestLazyTail(t *testing.T) {
	ctx := context.Background()
	for seed := range uint64(2) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			root, st, opts, r, h2, want := lazyTailSetup(t, seed)
			for ki, kg := range []*KeyGroupRange{nil, {Start: 10, End: 41}} {
				for _, ckpt := range []bool{false, true} {
					o := opts
					o.KeyGroups = kg
					o.Checkpoint.Owner = fmt.Sprintf("lazy-%d-%v", ki, ckpt)
					if seed == 1 {
						o.BackgroundWorkers = 1
					}
					g := newTailGate()
					o.adjust = lazyTail(g.hook)
					s, err := Restore(filepath.Join(root, o.Checkpoint.Owner), o, st, h2)
					if err != nil {
						g.open()
						t.Fatal(err)
					}
					what := fmt.Sprintf("key groups %v, checkpoint %v", kg, ckpt)
					rr := &modelRun{t: t, w: r.w, rng: rand.New(rand.NewPCG(seed, 99)), m: want.clone(), now: r.now}
					if rr.st, err = rr.register(s); err != nil {
						t.Fatal(err)
					}
					// Writes before the install: value puts of a third of the owned slots.
					puts := 0
					for slot := range rr.st.u.slots() {
						if rr.st.owns(slot) && slot%3 == 0 {
							if err := rr.valPut(slot); err != nil {
								t.Fatal(err)
							}
							puts++
						}
					}
					if ts := s.e.TailStats(); !ts.Pending || g.released.Load() || puts == 0 || ts.Records == 0 {
						t.Fatalf("%s: after Restore and %d puts: tail %+v, released %v: want pending, held",
							what, puts, ts, g.released.Load())
					}
					g.open()
					if ckpt {
						h3, err := s.Checkpoint(ctx, 3, nil)
						if err == nil {
							err = s.NotifyCheckpointComplete(3)
						}
						if err != nil {
							t.Fatal(err)
						}
						if !g.released.Load() {
							t.Fatalf("%s: the checkpoint was cut before the tail was installed", what)
						}
						s.Discard()
						o.Checkpoint.Owner += "-again"
						o.adjust = func(eo *engine.Options) { eo.BulkParallelMin = 1 } // synchronous
						s, err = Restore(filepath.Join(root, o.Checkpoint.Owner), o, st, h3)
						if err != nil {
							t.Fatal(err)
						}
						if rr.st, err = rr.register(s); err != nil {
							t.Fatal(err)
						}
					}
					err = rr.st.checkOwned(rr.m)
					ts := s.e.TailStats()
					released := g.released.Load()
					s.Close()
					if err != nil {
						t.Fatalf("%s: %v", what, err)
					}
					if !released || !g.held.Load() {
						t.Fatalf("%s: the reads returned before the tail was installed (the driver held: %v)", what, g.held.Load())
					}
					if !ckpt && (ts.Pending || ts.Files < 2 || ts.Waited == 0 || ts.Applied+ts.Skipped != ts.Records) {
						t.Fatalf("%s: tail %+v: want installed in parts, waited for, every record counted", what, ts)
					}
				}
			}
		})
	}
}

// TestLazyTailFailure: the lazy tail's driver fails — a full disk refuses its L0 files
// (FaultFS) — after Restore returned: the next read once the driver has ended (a value Get
// before then is answered by the tail's index, engine invariant 39) reports the failure (ENOSPC), so do every
// later read and write (sticky, invariant 35) and Close, no partial tail is ever read, and
// the directory keeps its RESTORING marker, before (a crash right after Restore) and after the
// failure; restoring the checkpoint again gives its state (nothing lost).
func TestLazyTailFailure(t *testing.T) {
	mem := vfs.NewMem()
	fault := vfs.NewFaultFS(mem)
	st, err := checkpointfs.NewDirStorage(fault, "/ck")
	if err != nil {
		t.Fatal(err)
	}
	opts, adjust := lsmModelOptions(fault)
	opts.Checkpoint = CheckpointOptions{Storage: st, Owner: "bulk", Grace: checkpoint.NoGrace,
		Changelog: &ChangelogOptions{MaterializationInterval: -1}}
	r := &modelRun{t: t, w: crashWorkloadDef(false), rng: rand.New(rand.NewPCG(9, 25)), m: newModel(), dir: "/db",
		opts: opts, adjust: adjust, fault: fault}
	h2, want := bulkReplaySource(t, r, 1500)

	o := opts
	o.Checkpoint.Owner = "restored"
	g := newTailGate()
	o.adjust = lazyTail(func() {
		// A full disk for the restored Store's table files, from the driver's first file on.
		fault.Inject(vfs.Fault{Ops: 1 << vfs.OpCreate, Sticky: true, Err: syscall.ENOSPC, Path: func(p string) bool {
			return strings.HasPrefix(p, "/restored/lsm/") && strings.HasSuffix(p, ".sst")
		}})
		g.hook()
	})
	s, err := Restore("/restored", o, st, h2)
	if err != nil {
		g.open()
		t.Fatal(err)
	}
	if _, err := Open("/restored", Options{MaxParallelism: o.MaxParallelism, fs: mem.CrashClone()}); !errors.Is(err, ErrRestoreIncomplete) {
		t.Fatalf("Open after a crash while the tail is pending: %v, want ErrRestoreIncomplete", err)
	}
	ms, err := registerModel(s, r.w.u)
	if err != nil {
		t.Fatal(err)
	}
	g.open()
	// Value reads do not wait for a pending tail (engine invariant 39): the first one after
	// the driver ended (here: failed) installs it, and reports the failure.
	for s.e.TailStats().Written == 0 {
		time.Sleep(time.Millisecond)
	}
	var k [8]byte
	for i := range 3 {
		_, _, err := ms.val.Get(s.Key(k[:]))
		if !errors.Is(err, ErrNoSpace) {
			t.Fatalf("read %d after the tail failed: %v, want ErrNoSpace", i, err)
		}
	}
	if err := ms.val.Put(s.Key(k[:]), []byte("x")); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("write after the tail failed: %v, want ErrNoSpace", err)
	}
	if ts, rs := s.e.TailStats(), s.RestoreStats(); ts.Files != 0 || ts.Pending || rs.BulkFiles != 0 {
		t.Fatalf("tail %+v, %d bulk files installed: want none", ts, rs.BulkFiles)
	}
	if err := s.Close(); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("Close after the tail failed: %v, want ErrNoSpace", err)
	}
	fault.ClearFaults()
	if _, err := Open("/restored", Options{MaxParallelism: o.MaxParallelism, fs: fault}); !errors.Is(err, ErrRestoreIncomplete) {
		t.Fatalf("Open after the tail failed: %v, want ErrRestoreIncomplete", err)
	}
	o.adjust = lazyTail(nil)
	o.Checkpoint.Owner = "again"
	s, err = Restore("/again", o, st, h2)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if ms, err = registerModel(s, r.w.u); err == nil {
		err = ms.checkAll(want.clone())
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestLazyTailClose: a Store closed while its lazy tail is held (the driver not done) waits
// for it, installs it and persists: the directory reopens (Open) to the checkpoint's state
// with the puts written meanwhile. One discarded meanwhile (Discard, as a process that dies;
// the driver is dropped if it did not start) installs nothing and leaves the directory
// refused (ErrRestoreIncomplete: invariant 36).
func TestLazyTailClose(t *testing.T) {
	root, st, opts, r, h2, want := lazyTailSetup(t, 7)
	for _, discard := range []bool{false, true} {
		o := opts
		o.Checkpoint.Owner = fmt.Sprintf("close-%v", discard)
		dir := filepath.Join(root, o.Checkpoint.Owner)
		g := newTailGate()
		o.adjust = lazyTail(g.hook)
		s, err := Restore(dir, o, st, h2)
		if err != nil {
			g.open()
			t.Fatal(err)
		}
		rr := &modelRun{t: t, w: r.w, rng: rand.New(rand.NewPCG(7, 99)), m: want.clone(), now: r.now}
		if rr.st, err = rr.register(s); err != nil {
			t.Fatal(err)
		}
		for slot := range rr.st.u.slots() {
			if slot%4 == 1 {
				if err := rr.valPut(slot); err != nil {
					t.Fatal(err)
				}
			}
		}
		if ts := s.e.TailStats(); !ts.Pending {
			t.Fatalf("discard %v: tail %+v after Restore: want pending", discard, ts)
		}
		g.open()
		if discard {
			err = s.Discard()
		} else {
			err = s.Close()
		}
		released := g.released.Load()
		if err != nil {
			t.Fatal(err)
		}
		if !discard && !released { // a Discard may drop the driver before it ran
			t.Fatalf("Close returned before the driver ended")
		}
		o.Checkpoint = CheckpointOptions{}
		s, err = Open(dir, o)
		if discard {
			if !errors.Is(err, ErrRestoreIncomplete) {
				t.Fatalf("Open after a Discard during the tail: %v, want ErrRestoreIncomplete", err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if rr.st, err = rr.register(s); err == nil {
			err = rr.st.checkOwned(rr.m)
		}
		s.Close()
		if err != nil {
			t.Fatalf("reopened after a Close during the tail: %v", err)
		}
	}
}
