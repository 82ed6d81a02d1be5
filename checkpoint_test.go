package strata

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-db/strata/checkpoint"
	"github.com/strata-db/strata/internal/checkpointfs"
	"github.com/strata-db/strata/internal/engine"
	"github.com/strata-db/strata/internal/vfs"
)

// ckEnv is a Store with a directory and a checkpoint storage on one file system, driven by
// the model's write steps.
type ckEnv struct {
	t     *testing.T
	fs    vfs.FS
	root  string
	st    *checkpoint.DirStorage
	opts  Options
	w     *modelWorkload
	rng   *rand.Rand
	dirs  int
	evict bool
}

func newCkEnv(t *testing.T, fsys vfs.FS, root string, maxP int) *ckEnv {
	t.Helper()
	st, err := checkpointfs.NewDirStorage(fsys, filepath.Join(root, "checkpoints"))
	if err != nil {
		t.Fatal(err)
	}
	e := &ckEnv{t: t, fs: fsys, root: root, st: st, rng: rand.New(rand.NewPCG(1, 2))}
	e.opts = Options{MaxParallelism: maxP, MemoryBudget: 64 << 20, SegmentSize: 16 << 20, BackgroundWorkers: 2,
		Checkpoint: CheckpointOptions{Storage: st, Grace: checkpoint.NoGrace}}
	e.opts.fs = fsys
	e.w = attackWorkload(600, 200)
	return e
}

// newDir returns a fresh directory name.
func (e *ckEnv) newDir() string {
	e.dirs++
	return filepath.Join(e.root, fmt.Sprintf("store-%d", e.dirs))
}

// open opens a Store in a new directory with opts adjusted by kg (nil: all key groups).
func (e *ckEnv) open(kg *KeyGroupRange) *modelRun {
	e.t.Helper()
	o := e.opts
	o.KeyGroups = kg
	s, err := open(e.newDir(), o, func(eo *engine.Options) { eo.EvictionBatch, eo.BucketBits = 16<<10, 2 })
	if err != nil {
		e.t.Fatal(err)
	}
	return e.run(s)
}

// run registers the model's states on s.
func (e *ckEnv) run(s *Store) *modelRun {
	e.t.Helper()
	ms, err := registerModel(s, e.w.u)
	if err != nil {
		e.t.Fatal(err)
	}
	return &modelRun{t: e.t, w: e.w, rng: e.rng, m: newModel(), st: ms}
}

// writes runs n write steps on r (slots outside the Store's key groups are skipped by the
// workload's universe: all keys are drawn, and a refused key group is an error).
func (r *modelRun) writes(n int) {
	r.t.Helper()
	for range n {
		if err := r.step(); err != nil {
			r.t.Fatal(err)
		}
	}
}

// owns reports whether s holds slot's key group.
func (st *modelStates) owns(slot int32) bool {
	return st.s.KeyGroups().Contains(st.key(slot).KeyGroup())
}

// checkOwned compares every slot s owns with m and checks that the others are refused.
func (st *modelStates) checkOwned(m *model) error {
	for slot := range st.u.slots() {
		if !st.owns(slot) {
			if _, _, err := st.val.Get(st.key(slot)); !errors.Is(err, ErrKeyGroupOutOfRange) {
				return fmt.Errorf("slot %d outside %v: Get = %v, want ErrKeyGroupOutOfRange", slot, st.s.KeyGroups(), err)
			}
			continue
		}
		if err := st.checkSlot(m, slot, nil); err != nil {
			return err
		}
	}
	return nil
}

// restore restores handles into a new directory with key groups kg and registers the model.
func (e *ckEnv) restore(kg *KeyGroupRange, mode RestoreMode, handles ...CheckpointHandle) *modelRun {
	e.t.Helper()
	o := e.opts
	o.KeyGroups = kg
	o.Checkpoint.RestoreMode = mode
	s, err := Restore(e.newDir(), o, e.st, handles...)
	if err != nil {
		e.t.Fatal(err)
	}
	return e.run(s)
}

// TestCheckpointRestore: checkpoints of a Store whose state spans the three tiers restore to
// exactly the state at their cut (writes after the cut are not in it), the second one is
// incremental, completed checkpoints beyond Retain are collected, and the restored Store goes
// on (writes, checkpoints of its own).
func TestCheckpointRestore(t *testing.T) {
	ctx := context.Background()
	e := newCkEnv(t, vfs.Default(), t.TempDir(), 128)
	r := e.open(nil)
	defer r.st.s.Close()
	r.writes(raceScale(20000))
	if err := r.pushDown(0); err != nil { // LSM files to share
		t.Fatal(err)
	}
	r.writes(raceScale(4000)) // and some state in memory
	h1, err := r.st.s.Checkpoint(ctx, 1, []byte("offset-1"))
	if err != nil {
		t.Fatal(err)
	}
	m1 := r.m.clone()
	if err := r.st.s.NotifyCheckpointComplete(1); err != nil {
		t.Fatal(err)
	}
	if h1.Stats.UploadedObjects < 2 || h1.Stats.ReusedObjects != 0 || string(h1.InputPosition) != "offset-1" {
		t.Fatalf("checkpoint 1: %+v", h1)
	}
	r.writes(raceScale(3000))
	p, err := r.st.s.StartCheckpoint(2, []byte("offset-2"))
	if err != nil {
		t.Fatal(err)
	}
	m2 := r.m.clone()
	r.writes(raceScale(3000)) // during the upload: not in checkpoint 2
	h2, err := p.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if h2.Stats.ReusedObjects == 0 || h2.Stats.ReusedBytes == 0 {
		t.Fatalf("checkpoint 2 is not incremental: %+v", h2.Stats)
	}
	t.Logf("checkpoint 1: %+v; checkpoint 2: %+v", h1.Stats, h2.Stats)
	if err := r.st.s.NotifyCheckpointComplete(2); err != nil {
		t.Fatal(err)
	}
	if err := r.st.s.WaitCheckpointGC(); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadCheckpoint(ctx, e.st, h1.Owner, 1); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Fatalf("checkpoint 1 after completing 2 with Retain 1: %v, want ErrNotFound", err)
	}
	latest, err := LatestCheckpoint(ctx, e.st, h2.Owner)
	if err != nil || latest.ID != 2 || string(latest.InputPosition) != "offset-2" {
		t.Fatalf("LatestCheckpoint = %+v, %v", latest, err)
	}
	_ = m1
	// Restore: exactly the state at the cut of checkpoint 2.
	r2 := e.restore(nil, Claim, h2)
	defer r2.st.s.Close()
	r2.m = m2.clone()
	if err := r2.st.checkAll(r2.m); err != nil {
		t.Fatalf("restored checkpoint 2: %v", err)
	}
	// The restored Store goes on, and checkpoints under a new owner.
	r2.writes(raceScale(2000))
	h3, err := r2.st.s.Checkpoint(ctx, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	m3 := r2.m.clone()
	r3 := e.restore(nil, NoClaim, h3)
	defer r3.st.s.Close()
	r3.m = m3
	if err := r3.st.checkAll(r3.m); err != nil {
		t.Fatalf("restored checkpoint 3 (of a restored Store): %v", err)
	}
	if st := r3.st.s.RestoreStats(); st.Tables == 0 || st.Linked == 0 {
		t.Fatalf("restore stats %+v: want linked tables", st)
	}
}

// TestCheckpointRescale: one checkpoint restored into 1, 2 and 3 Stores splitting its key
// groups (scale out), each holding exactly its part; then the parts' checkpoints restored into
// one Store (scale in).
func TestCheckpointRescale(t *testing.T) {
	ctx := context.Background()
	const maxP = 128
	e := newCkEnv(t, vfs.Default(), t.TempDir(), maxP)
	r := e.open(nil)
	r.writes(raceScale(15000))
	if err := r.pushDown(0); err != nil {
		t.Fatal(err)
	}
	r.writes(raceScale(3000))
	h, err := r.st.s.Checkpoint(ctx, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := r.m.clone()
	r.st.s.Close()
	for _, par := range []int{1, 2, 3} {
		t.Run(fmt.Sprintf("parallelism=%d", par), func(t *testing.T) {
			e.t = t
			var parts []*modelRun
			var hs []CheckpointHandle
			for i := range par {
				kg := ComputeKeyGroupRangeForOperatorIndex(maxP, par, i)
				p := e.restore(&kg, NoClaim, h)
				defer p.st.s.Close()
				p.m = m.clone()
				if err := p.st.checkOwned(p.m); err != nil {
					t.Fatalf("part %d of %d (%v): %v", i, par, kg, err)
				}
				// Writes to the part's own keys, then a checkpoint of the part.
				for range raceScale(2000) {
					slot := p.rng.Int32N(p.w.u.slots())
					if !p.st.owns(slot) {
						continue
					}
					if err := p.valPut(slot); err != nil {
						t.Fatal(err)
					}
				}
				hp, err := p.st.s.Checkpoint(ctx, 10, nil)
				if err != nil {
					t.Fatal(err)
				}
				parts, hs = append(parts, p), append(hs, hp)
			}
			// The union of the parts' models is the model of the scaled-in Store.
			union := m.clone()
			for _, p := range parts {
				for slot := range p.w.u.slots() {
					if p.st.owns(slot) {
						union.setSlot(slot, p.m.slot(slot))
					}
				}
			}
			one := e.restore(nil, NoClaim, hs...)
			defer one.st.s.Close()
			one.m = union
			if err := one.st.checkAll(one.m); err != nil {
				t.Fatalf("scale-in of %d parts: %v", par, err)
			}
			// Compactions of the restored Store drop the clipped entries and keep the rest.
			if err := one.pushDown(0); err != nil {
				t.Fatal(err)
			}
			if err := one.st.checkAll(one.m); err != nil {
				t.Fatalf("scale-in of %d parts, after a push-down: %v", par, err)
			}
		})
	}
}

// TestRestoreErrors: what Restore refuses, each with its typed error, leaving no Store behind.
func TestRestoreErrors(t *testing.T) {
	ctx := context.Background()
	e := newCkEnv(t, vfs.Default(), t.TempDir(), 128)
	r := e.open(nil)
	r.writes(500)
	h, err := r.st.s.Checkpoint(ctx, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.st.s.Close()
	o := e.opts
	bad := o
	bad.MaxParallelism = 256
	if _, err := Restore(e.newDir(), bad, e.st, h); !errors.Is(err, ErrMaxParallelismMismatch) {
		t.Errorf("restore into MaxParallelism 256: %v, want ErrMaxParallelismMismatch", err)
	}
	if _, err := Restore(e.newDir(), o, e.st, h, h); !errors.Is(err, ErrOverlappingHandles) {
		t.Errorf("restore of one handle twice: %v, want ErrOverlappingHandles", err)
	}
	if _, err := Restore("", o, e.st, h); !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("restore in memory: %v, want ErrInvalidOptions", err)
	}
	if _, err := Restore(e.newDir(), o, e.st, CheckpointHandle{Owner: h.Owner, ID: 99}); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Errorf("restore of a missing checkpoint: %v, want checkpoint.ErrNotFound", err)
	}
	used := e.newDir()
	s, err := Open(used, o)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := Restore(used, o, e.st, h); !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("restore into a used directory: %v, want ErrInvalidOptions (not empty)", err)
	}
	// A zombie: a second Store of the same lineage committing the same id is fenced.
	z := e.open(nil)
	defer z.st.s.Close()
	if _, err := z.st.s.Checkpoint(ctx, 1, nil); !errors.Is(err, ErrCheckpointExists) {
		t.Errorf("second commit of checkpoint 1: %v, want ErrCheckpointExists", err)
	}
	// No storage, id 0, one at a time.
	n, err := Open(e.newDir(), Options{MaxParallelism: 128, MemoryBudget: 64 << 20, SegmentSize: 16 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if _, err := n.Checkpoint(ctx, 1, nil); !errors.Is(err, ErrNoCheckpointStorage) {
		t.Errorf("checkpoint without storage: %v", err)
	}
	if _, err := z.st.s.StartCheckpoint(0, nil); !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("checkpoint id 0: %v", err)
	}
	p, err := z.st.s.StartCheckpoint(2, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := z.st.s.StartCheckpoint(3, nil); !errors.Is(err, ErrCheckpointInProgress) {
		<-p.Done()
		if _, err2 := z.st.s.StartCheckpoint(4, nil); !errors.Is(err2, ErrCheckpointInProgress) && err == nil {
			t.Logf("checkpoint 2 finished before 3 started (%v)", err)
		}
	}
	if _, err := p.Wait(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestCheckpointRetention: Retain, pins, aborted checkpoints and NO_CLAIM vs CLAIM, by the
// objects left in the storage (FLINK-7268: nothing reachable deleted; FLINK-30461: nothing of
// an aborted checkpoint left behind).
func TestCheckpointRetention(t *testing.T) {
	ctx := context.Background()
	e := newCkEnv(t, vfs.Default(), t.TempDir(), 128)
	e.opts.Checkpoint.Retain = 2
	r := e.open(nil)
	defer r.st.s.Close()
	s := r.st.s
	var hs []CheckpointHandle
	for id := uint64(1); id <= 6; id++ {
		r.writes(1500)
		if id%2 == 0 {
			if err := r.pushDown(0); err != nil {
				t.Fatal(err)
			}
		}
		h, err := s.Checkpoint(ctx, id, nil)
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
		switch id {
		case 2:
			s.PinCheckpoint(2)
		case 5:
			if err := s.NotifyCheckpointAborted(5); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := s.NotifyCheckpointComplete(id); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.WaitCheckpointGC(); err != nil {
		t.Fatal(err)
	}
	ids, err := checkpoint.ListCheckpoints(ctx, e.st, hs[0].Owner)
	if err != nil {
		t.Fatal(err)
	}
	// Retain 2 of the completed {1, 2, 3, 4, 6}: 4 and 6; 2 is pinned; 5 was aborted.
	if want := []uint64{2, 4, 6}; !slices.Equal(ids, want) {
		t.Fatalf("checkpoints kept: %v, want %v", ids, want)
	}
	// Every object stored is reachable from a kept manifest.
	reach := map[string]bool{}
	for _, id := range ids {
		m, err := checkpoint.ReadManifest(ctx, e.st, hs[0].Owner, id)
		if err != nil {
			t.Fatal(err)
		}
		reach[checkpoint.ManifestName(hs[0].Owner, id)] = true
		for _, o := range m.Objects {
			reach[o.Name] = true
		}
	}
	objs, err := e.st.List(ctx, hs[0].Owner+"/")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if !reach[o.Name] {
			t.Errorf("object %s is unreachable and was not collected", o.Name)
		}
	}
	for n := range reach {
		if !slices.ContainsFunc(objs, func(o checkpoint.ObjectInfo) bool { return o.Name == n }) {
			t.Errorf("object %s of a kept checkpoint is missing", n)
		}
	}
}

// TestCheckpointInMemoryStore: a Store without a directory checkpoints too (its memory table
// is written through a temporary file), and restores into a Store with one; a checkpoint still
// uploading when the Store closes ends with the Store, which closes normally.
func TestCheckpointInMemoryStore(t *testing.T) {
	ctx := context.Background()
	e := newCkEnv(t, vfs.Default(), t.TempDir(), 128)
	o := e.opts
	o.fs = nil
	s, err := Open("", o)
	if err != nil {
		t.Fatal(err)
	}
	r := e.run(s)
	r.writes(3000)
	h, err := s.Checkpoint(ctx, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Checkpoints.Completed != 1 || st.Checkpoints.Running != 0 || st.Checkpoints.PinnedBytes != 0 {
		t.Fatalf("stats after a checkpoint: %d checkpoints, %d running, %d pinned bytes", st.Checkpoints.Completed, st.Checkpoints.Running, st.Checkpoints.PinnedBytes)
	}
	m := r.m.clone()
	r.writes(500)
	if _, err := s.StartCheckpoint(2, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil { // with checkpoint 2 possibly uploading
		t.Fatal(err)
	}
	r2 := e.restore(nil, NoClaim, h)
	defer r2.st.s.Close()
	if err := r2.st.checkAll(m); err != nil {
		t.Fatalf("in-memory Store's checkpoint restored: %v", err)
	}
}

// gatedStorage holds every Create (a manifest's commit) until gate is closed.
type gatedStorage struct {
	checkpoint.Storage
	gate chan struct{}
}

func (g *gatedStorage) Create(ctx context.Context, name string, data []byte) error {
	<-g.gate
	return g.Storage.Create(ctx, name, data)
}

// gatedTmpFS holds every Create in a Store's checkpoint-tmp directory (internal/engine
// checkpoint.go: an upload's memory table, written first, then its timers) until gate is
// closed: the state a slow disk under the memory table puts a checkpoint in. held counts the
// Creates waiting.
type gatedTmpFS struct {
	vfs.FS
	gate chan struct{}
	held atomic.Int32
}

func (g *gatedTmpFS) Create(name string) (vfs.File, error) {
	if filepath.Base(filepath.Dir(name)) == "checkpoint-tmp" {
		g.held.Add(1)
		<-g.gate
		g.held.Add(-1)
	}
	return g.FS.Create(name)
}

// TestCheckpointPinsMemory: while a checkpoint writes its memory table, the task goes on
// writing and the tiers go on moving data; the slices and segments freed meanwhile stay
// counted (PinnedBytes) until the memory table is written — not until the upload ends, which
// may take long (here: the commit is held) — and the checkpoint holds exactly the state at
// its cut.
func TestCheckpointPinsMemory(t *testing.T) {
	ctx := context.Background()
	memGate := make(chan struct{})
	var memOnce sync.Once
	openMem := func() { memOnce.Do(func() { close(memGate) }) }
	gfs := &gatedTmpFS{FS: vfs.Default(), gate: memGate}
	e := newCkEnv(t, gfs, t.TempDir(), 128)
	e.opts.MemoryBudget = 256 << 20
	g := &gatedStorage{Storage: e.st, gate: make(chan struct{})}
	var once sync.Once
	openGate := func() { once.Do(func() { close(g.gate) }) }
	e.opts.Checkpoint.Storage = g
	r := e.open(nil)
	defer r.st.s.Close()
	defer openGate() // a failure must not leave Close waiting for the upload
	defer openMem()
	s := r.st.s
	r.writes(5000)
	if err := s.WaitBackground(); err != nil {
		t.Fatal(err)
	}
	p, err := s.StartCheckpoint(1, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := r.m.clone()
	r.writes(2000) // the task goes on during the upload
	// Move data down meanwhile (WaitBackground would wait for the checkpoint's memory table):
	// the cut's sealed segment is transformed and dropped, slices are evicted.
	for i := 0; s.Stats().Checkpoints.PinnedBytes == 0; i++ {
		if i > 2000 {
			t.Fatalf("nothing pinned while the memory table is held: %+v", s.Stats())
		}
		s.Evict()
		r.writes(20)
		time.Sleep(time.Millisecond)
	}
	for i := 0; gfs.held.Load() == 0; i++ { // the upload task reaches the memory table
		if i > 2000 {
			t.Fatal("the checkpoint's upload never created its memory table")
		}
		time.Sleep(time.Millisecond)
	}
	if st := s.Stats(); st.Checkpoints.Running != 1 || gfs.held.Load() != 1 {
		t.Fatalf("while the memory table is written: %d running, %d files held", st.Checkpoints.Running, gfs.held.Load())
	}
	openMem()
	for i := 0; s.Stats().Checkpoints.PinnedBytes != 0; i++ { // released at an install, the upload still held
		if i > 1000 {
			t.Fatalf("memory still pinned after the memory table was written: %d bytes", s.Stats().Checkpoints.PinnedBytes)
		}
		time.Sleep(5 * time.Millisecond)
		r.writes(1)
	}
	if st := s.Stats(); st.Checkpoints.Running != 1 {
		t.Fatalf("the upload ended with its commit held: %d running", st.Checkpoints.Running)
	}
	openGate()
	h, err := p.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Checkpoints.PinnedBytes != 0 || st.Checkpoints.Running != 0 {
		t.Fatalf("after the install: %d pinned bytes, %d running", st.Checkpoints.PinnedBytes, st.Checkpoints.Running)
	}
	if err := r.st.checkAll(r.m); err != nil {
		t.Fatal(err)
	}
	r2 := e.restore(nil, NoClaim, h)
	defer r2.st.s.Close()
	if err := r2.st.checkAll(m); err != nil {
		t.Fatalf("checkpoint cut before 2000 more writes: %v", err)
	}
}
