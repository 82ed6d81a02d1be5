package strata

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/strata-db/strata/internal/engine"
	"github.com/strata-db/strata/internal/vfs"
)

var errNoSpaceErrno = syscall.ENOSPC

// lsmModelOptions are the options of the model and crash tests over an LsmStore: a small map of
// buckets (long chains, compactions), small eviction batches (many L0 files, LSM compactions),
// evictions only when the test asks.
func lsmModelOptions(fs vfs.FS) (Options, func(*engine.Options)) {
	opts := Options{MaxParallelism: 64, MemoryBudget: 128 << 20, SegmentSize: 16 << 20, BackgroundWorkers: 2,
		BlockCacheSize: 1 << 20, RowCacheSize: 8 << 10, fs: fs}
	return opts, func(o *engine.Options) { o.EvictionBatch, o.BucketBits, o.EvictionWatermark = 16<<10, 2, 0 }
}

// crashWorkloadDef is the workload of TestCrash and TestNoSpace: every write and read, and
// (TestCrash) seals, drains and evictions into the LsmStore, and timers (each Close writes a
// timer file before its persist point).
func crashWorkloadDef(tiers bool) *modelWorkload {
	w := readWeights.with(0, stepSeal, stepDrain, stepWait)
	if tiers {
		w = w.with(8, stepSeal).with(4, stepDrain, stepEvictDrain).with(6, stepEvict).withTimers()
	}
	return &modelWorkload{u: plainUniverse("key-%d", 40, "", "w1", "w2", "window-3"), maxVal: 48, weights: w}
}

// crashWorkload runs three sessions of model steps over fault (Open, steps with seals, drains
// and evictions, Close), the last without Close, and returns the model as of the last Close
// that succeeded, and, if a Close failed, the model as of that Close (nil otherwise): its
// persist point may or may not have become durable before the failure. Once a step fails
// after the file system crashed it stops; a step that fails before is a test failure.
func crashWorkload(t *testing.T, fault *vfs.FaultFS, seed int64, opsPerSession int, writes *int64) (persisted, maybe *model, closes int) {
	opts, adjust := lsmModelOptions(fault)
	r := &modelRun{t: t, w: crashWorkloadDef(true), rng: rand.New(rand.NewPCG(uint64(seed), 7)), m: newModel(),
		dir: "/db", opts: opts, adjust: adjust, fault: fault}
	persisted = newModel()
	defer func() {
		if r.st != nil {
			// The process dies: what it did not persist is lost, and Close must not persist it.
			if !fault.Crashed() {
				*writes = fault.Count(vfs.WriteOps)
			}
			fault.Crash()
			r.st.s.Discard()
		}
	}()
	for session := range 3 {
		if err := r.openStore(); err != nil {
			r.st = nil
			if !fault.Crashed() {
				t.Fatalf("seed %d session %d: %v", seed, session, err)
			}
			return persisted, nil, closes
		}
		for r.op = range opsPerSession {
			if err := r.step(); err != nil {
				if !fault.Crashed() {
					t.Fatalf("seed %d session %d step %d: %v", seed, session, r.op, err)
				}
				return persisted, nil, closes
			}
		}
		if session == 2 {
			break // the last session ends without Close
		}
		if err := r.invalidate(); err != nil {
			t.Fatalf("seed %d session %d: %v", seed, session, err)
		}
		if err := r.st.s.Close(); err != nil {
			if !r.st.s.closed {
				r.st.s.Discard() // a Close that failed for a fault that may pass leaves it open
			}
			r.st = nil
			return persisted, r.m.clone(), closes
		}
		r.st = nil
		persisted = r.m.clone()
		closes++
	}
	return persisted, nil, closes
}

// TestCrash crashes a workload of three sessions (writes through every tier, evictions to the
// LsmStore, Close, reopen) at its n-th file-system write, for every n up to the number of
// writes a run without a crash makes (every third n under -short or -race: the test command's
// plain step runs every n), including the writes inside Open and Close; the crash clone (only
// synced bytes and directory entries) must reopen, and every read (value, list, map, reducing,
// aggregating state, pending timers) must give the model's state as of the last Close that
// returned.
func TestCrash(t *testing.T) {
	const seed = 42
	ops := 600
	stride := int64(1)
	if testing.Short() {
		ops, stride = 300, 3
	}
	if raceEnabled {
		stride = 3
	}
	mem := vfs.NewMem()
	fault := vfs.NewFaultFS(mem)
	var writes int64
	_, _, closes := crashWorkload(t, fault, seed, ops, &writes)
	if closes != 2 {
		t.Fatalf("the workload without a crash completed %d closes, want 2", closes)
	}
	t.Logf("%d file-system writes in a run without a crash; crashing at every %d", writes, stride)
	var checked, atOpen, ambiguous int
	for n := int64(1); n <= writes+5; n += stride {
		mem := vfs.NewMem()
		fault := vfs.NewFaultFS(mem)
		fault.CrashAt(n)
		var w int64
		persisted, maybe, closes := crashWorkload(t, fault, seed, ops, &w)
		clone := mem.CrashClone()
		opts, adjust := lsmModelOptions(clone)
		s, err := open("/db", opts, adjust)
		if err != nil {
			t.Fatalf("crash at write %d (after %d closes): reopen: %v", n, closes, err)
		}
		st, err := registerModel(s, crashWorkloadDef(true).u)
		if err == nil {
			err = st.registerTimers()
		}
		if err != nil {
			t.Fatal(err)
		}
		check := func(m *model) error {
			if err := st.checkAll(m); err != nil {
				return err
			}
			return st.checkTimers(m)
		}
		if maybe != nil && check(maybe) != nil {
			maybe = nil
		}
		if maybe != nil {
			ambiguous++
		} else if err := check(persisted); err != nil {
			t.Fatalf("crash at write %d (after %d closes): %v", n, closes, err)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("crash at write %d: close after the check: %v", n, err)
		}
		checked++
		if closes == 0 {
			atOpen++
		}
	}
	t.Logf("%d crash points checked (%d before the first Close completed, %d recovered the persist point of a Close that failed)",
		checked, atOpen, ambiguous)
}

// TestNoSpace: ENOSPC injected at the n-th write of every table file (evictions, flushes,
// LSM compactions) and of the manifest, for several n, fails with ErrNoSpace (also matching
// syscall.ENOSPC) where the Store reports it — later writes, and Close, which then leaves the
// Store open — while every read keeps returning the model's state; once space is back the
// Store persists and reopens with everything.
func TestNoSpace(t *testing.T) {
	for _, nth := range []int64{1, 2, 3, 5, 8, 13} {
		t.Run(fmt.Sprintf("nth=%d", nth), func(t *testing.T) {
			mem := vfs.NewMem()
			fault := vfs.NewFaultFS(mem)
			opts, adjust := lsmModelOptions(fault)
			s, err := open("/db", opts, adjust)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { s.Close() }()
			w := crashWorkloadDef(false)
			st, err := registerModel(s, w.u)
			if err != nil {
				t.Fatal(err)
			}
			r := &modelRun{t: t, w: w, rng: rand.New(rand.NewPCG(uint64(nth), 3)), m: newModel(), st: st}
			steps := func(n int) {
				t.Helper()
				for range n {
					if err := r.step(); err != nil {
						t.Fatalf("step %d: %v", r.op, err)
					}
					r.op++
				}
			}
			steps(2000)
			fault.Inject(vfs.Fault{Ops: vfs.Ops(vfs.OpWrite, vfs.OpSync, vfs.OpCreate), Nth: nth, Sticky: true,
				Err: errNoSpaceErrno})
			// Move data down until the disk refuses.
			var seen error
			for i := 0; i < 200 && seen == nil; i++ {
				if err := s.seal(); err != nil {
					seen = err
					break
				}
				s.Evict()
				if err := s.e.Drain(); err != nil {
					seen = err
				}
			}
			if seen == nil {
				seen = s.Close()
			}
			if !errors.Is(seen, ErrNoSpace) || !errors.Is(seen, errNoSpaceErrno) {
				t.Fatalf("got %v, want ErrNoSpace", seen)
			}
			// Reads still work, and so does Close's refusal.
			if err := st.checkAll(r.m); err != nil {
				t.Fatalf("on a full disk: %v", err)
			}
			if err := s.Close(); !errors.Is(err, ErrNoSpace) {
				t.Fatalf("Close on a full disk: %v, want ErrNoSpace", err)
			}
			if err := st.checkAll(r.m); err != nil {
				t.Fatalf("after Close failed on a full disk: %v", err)
			}
			fault.ClearFaults()
			time.Sleep(engine.NoSpaceRetry)
			steps(500)
			if err := s.Close(); err != nil {
				t.Fatalf("Close once space is back: %v", err)
			}
			opts.fs = mem
			if s, err = open("/db", opts, adjust); err != nil {
				t.Fatal(err)
			}
			if st, err = registerModel(s, w.u); err != nil {
				t.Fatal(err)
			}
			if err := st.checkAll(r.m); err != nil {
				t.Fatalf("after reopen: %v", err)
			}
		})
	}
}
