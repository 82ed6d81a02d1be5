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

// TestModelLSM is TestModel over the three tiers of a Store with a directory (MemFS): besides
// seals, drains and evictions (to the LsmStore, whose compactions run in the background), it
// reopens the Store (Close + Open: every acknowledged write must survive) and crashes it (the
// file system keeps only what was synced; the Store must reopen to the state of its last
// Close). Replay a failure with go test -run TestModelLSM -seed N.
func TestModelLSM(t *testing.T) {
	seed := *modelSeed
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	t.Logf("seed %d (replay: go test -run TestModelLSM -seed %d)", seed, seed)
	ops := 60000
	if testing.Short() {
		ops = 8000
	}
	bgEvery := 60
	rng := rand.New(rand.NewPCG(uint64(seed), uint64(seed)>>1|1))
	mem := vfs.NewMem()
	fault := vfs.NewFaultFS(mem)
	opts, adjust := lsmModelOptions(fault)
	s, err := open("/db", opts, adjust)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.Close() }()
	m := newModelRun(t, s, rng, seed)
	persisted := m.modelState.clone()
	next := rng.IntN(bgEvery)
	var events [5]int
	var reopens, crashes int
	var total StoreStats
	add := func(st StoreStats) {
		total.Transforms += st.Transforms
		total.Compactions += st.Compactions
		total.Evictions += st.Evictions
		total.LSMCompactions += st.LSMCompactions
		total.PersistFiles += st.PersistFiles
		total.RowCacheHits += st.RowCacheHits
	}
	for i := range ops {
		if i == next {
			next += 1 + rng.IntN(2*bgEvery)
			r := rng.IntN(100)
			// Every run reopens and crashes at least once, whatever the seed draws.
			if reopens == 0 && i >= ops/3 {
				r = 94
			} else if crashes == 0 && i >= 2*ops/3 {
				r = 99
			}
			switch {
			case r < 94:
				m.background(i, &events)
			case r < 98:
				reopens++
				t.Logf("op %d: reopen", i)
				add(s.Stats())
				if err := s.Close(); err != nil {
					m.fatalf(i, "close: %v", err)
				}
				persisted = m.modelState.clone()
				if s, err = open("/db", opts, adjust); err != nil {
					m.fatalf(i, "reopen: %v", err)
				}
				m.attach(s)
				m.checkAll(i)
			default:
				crashes++
				t.Logf("op %d: crash", i)
				add(s.Stats())
				fault.Crash()
				s.Close() // fails: the file system is gone; frees the memory
				mem = mem.CrashClone()
				fault = vfs.NewFaultFS(mem)
				opts.fs = fault
				if s, err = open("/db", opts, adjust); err != nil {
					m.fatalf(i, "reopen after crash: %v", err)
				}
				m.attach(s)
				m.modelState = persisted.clone()
				m.checkAll(i)
			}
		}
		m.step(i)
		if i%10000 == 9999 {
			m.checkAll(i)
		}
	}
	m.checkAll(ops)
	add(s.Stats())
	t.Logf("seed %d: %d ops, background events %v, %d reopens, %d crashes; totals %+v", seed, ops, events,
		reopens, crashes, total)
	if total.Transforms == 0 || total.Compactions == 0 || total.Evictions == 0 || total.LSMCompactions == 0 ||
		total.RowCacheHits == 0 || reopens == 0 || crashes == 0 {
		t.Errorf("seed %d: the run did not exercise every tier and step: %+v, %d reopens, %d crashes", seed, total, reopens, crashes)
	}
}

// crashWorkload runs three sessions of model operations over fault (open, operations with
// seals, drains and evictions, Close), the last without Close, and returns the model as of the
// last Close that succeeded, and, if a Close failed, the model as of that Close (nil
// otherwise): its persist point may or may not have become durable before the failure. Once an
// operation fails (the file system crashed) it stops.
func crashWorkload(t *testing.T, fault *vfs.FaultFS, seed int64, opsPerSession int, writes *int64) (persisted modelState, maybe *modelState, closes int) {
	rng := rand.New(rand.NewPCG(uint64(seed), 7))
	opts, adjust := lsmModelOptions(fault)
	var m *modelRun
	var s *Store
	persisted = modelState{mVal: map[[2]string][]byte{}, mLst: map[[2]string][]string{},
		mMap: map[[2]string]map[string]int64{}, mRed: map[[2]string]int64{}, mAgg: map[[2]string]avgAcc{}}
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(modelStop); !ok {
				panic(r)
			}
		}
		if s != nil {
			// The process dies: what it did not persist is lost, and Close must not persist it.
			if !fault.Crashed() {
				*writes = fault.Count(vfs.WriteOps)
			}
			fault.Crash()
			s.Close()
		}
	}()
	var events [5]int
	for session := range 3 {
		var err error
		if s, err = open("/db", opts, adjust); err != nil {
			s = nil
			return persisted, nil, closes
		}
		if m == nil {
			m = newModelRun(t, s, rng, seed)
			m.tolerant = true
		} else {
			m.attach(s)
		}
		next := rng.IntN(40)
		for i := range opsPerSession {
			if i == next {
				next += 1 + rng.IntN(80)
				m.background(i, &events)
			}
			m.step(i)
		}
		if session == 2 {
			break // the last session ends without Close
		}
		err = s.Close()
		if err != nil {
			if !s.closed {
				s.Close() // ErrNoSpace leaves it open; a crash does not (ErrCrashed)
			}
			s = nil
			ms := m.modelState.clone()
			return persisted, &ms, closes
		}
		s = nil
		persisted = m.modelState.clone()
		closes++
	}
	return persisted, nil, closes
}

// matches reports whether every read agrees with ms (the model is set to ms either way).
func (m *modelRun) matches(ms modelState) (ok bool) {
	m.modelState, m.tolerant = ms, true
	defer func() {
		m.tolerant = false
		if r := recover(); r != nil {
			if _, stop := r.(modelStop); !stop {
				panic(r)
			}
			ok = false
		}
	}()
	m.checkAll(-1)
	return true
}

// TestCrash crashes a workload of three sessions (writes through every tier, evictions to the
// LsmStore, Close, reopen) at its n-th file-system write, for every n up to the number of
// writes a run without a crash makes (every third n under -short), including the writes inside
// Open and Close; the crash clone (only synced bytes and directory entries) must reopen, and
// every read (value, list, map, reducing, aggregating state) must give the model's state as
// of the last Close that returned.
func TestCrash(t *testing.T) {
	const seed = 42
	ops := 600
	stride := int64(1)
	if testing.Short() {
		ops, stride = 300, 3
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
		m := newModelRun(t, s, rand.New(rand.NewPCG(1, 2)), seed)
		if maybe != nil && !m.matches(*maybe) {
			maybe = nil
		}
		if maybe != nil {
			ambiguous++
		} else {
			m.modelState = persisted
			m.checkAll(int(n))
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
			m := newModelRun(t, s, rand.New(rand.NewPCG(uint64(nth), 3)), nth)
			for i := range 2000 {
				m.step(i)
			}
			fault.Inject(vfs.Fault{Ops: vfs.Ops(vfs.OpWrite, vfs.OpSync, vfs.OpCreate), Nth: nth, Sticky: true,
				Err: errNoSpaceErrno})
			// Move data down until the disk refuses.
			var seen error
			for i := 0; i < 200 && seen == nil; i++ {
				if err := s.seal(); err != nil {
					seen = err
					break
				}
				s.e.EvictNow()
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
			m.checkAll(-1)
			if err := s.Close(); !errors.Is(err, ErrNoSpace) {
				t.Fatalf("Close on a full disk: %v, want ErrNoSpace", err)
			}
			m.checkAll(-1)
			fault.ClearFaults()
			time.Sleep(engine.NoSpaceRetry)
			for i := range 500 {
				m.step(2000 + i)
			}
			if err := s.Close(); err != nil {
				t.Fatalf("Close once space is back: %v", err)
			}
			opts.fs = mem
			if s, err = open("/db", opts, adjust); err != nil {
				t.Fatal(err)
			}
			m.attach(s)
			m.checkAll(-2)
		})
	}
}
