package strata

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/strata-db/strata/checkpoint"
	"github.com/strata-db/strata/internal/checkpointfs"
	"github.com/strata-db/strata/internal/engine"
	"github.com/strata-db/strata/internal/vfs"
	"github.com/strata-db/strata/scheduler"
)

// remoteStorage is a checkpoint.Storage that is not a DirStorage (so a restore copies, as from
// an object store) and that can hold, fail and damage the lazy-restore prefetch's reads, which
// it tells from the reads of lazy files by their task's pprof label.
type remoteStorage struct {
	checkpoint.Storage
	hold     chan struct{} // a prefetch read takes a token from it, all once it is closed (nil: none wait)
	passed   atomic.Int64  // prefetch reads let through
	fail     atomic.Int64  // the next fail prefetch reads fail with a transient error
	failed   atomic.Int64
	reads    atomic.Int64 // reads not from the prefetch
	mu       sync.Mutex
	damaged  string // an object whose byte at damageAt every read sees flipped
	damageAt int64
	started  []string // the objects of the prefetch reads, in the order they came (before hold)
	readOf   []string // the objects of the other reads but the restore's warm-up, in order
}

func isPrefetch(ctx context.Context) bool {
	v, _ := pprof.Label(ctx, scheduler.LabelName)
	return v == "lazy-restore prefetch"
}

func (r *remoteStorage) GetRange(ctx context.Context, name string, off, n int64) ([]byte, error) {
	if isPrefetch(ctx) {
		r.mu.Lock()
		r.started = append(r.started, name)
		r.mu.Unlock()
		if r.hold != nil {
			select {
			case <-r.hold:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if r.fail.Load() > 0 && r.fail.Add(-1) >= 0 {
			r.failed.Add(1)
			return nil, fmt.Errorf("test: flaky storage: %w", syscall.ETIMEDOUT)
		}
		r.passed.Add(1)
	} else {
		r.reads.Add(1)
		if v, _ := pprof.Label(ctx, scheduler.LabelName); v != "lazy-restore warm" {
			r.mu.Lock()
			r.readOf = append(r.readOf, name)
			r.mu.Unlock()
		}
	}
	b, err := r.Storage.GetRange(ctx, name, off, n)
	r.mu.Lock()
	damaged, at := r.damaged, r.damageAt
	r.mu.Unlock()
	if err == nil && name == damaged && at >= off && at < off+int64(len(b)) {
		b = append([]byte(nil), b...)
		b[at-off] ^= 0x5a
	}
	return b, err
}

// lazySource writes a Store whose state is mostly in LSM tables, checkpoints it and returns
// the environment, the handle and the model at the cut.
func lazySource(t *testing.T, fsys vfs.FS, root string) (*ckEnv, CheckpointHandle, *model) {
	t.Helper()
	e := newCkEnv(t, fsys, root, 128)
	r := e.open(nil)
	defer r.st.s.Close()
	r.writes(raceScale(20000))
	if err := r.pushDown(0); err != nil {
		t.Fatal(err)
	}
	r.writes(raceScale(2000))
	h, err := r.st.s.Checkpoint(context.Background(), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	return e, h, r.m.clone()
}

// restoreLazy restores h lazily from storage into a new directory of e.
func (e *ckEnv) restoreLazy(storage checkpoint.Storage, h CheckpointHandle) (*modelRun, string) {
	e.t.Helper()
	o := e.opts
	o.Checkpoint.LazyRestore = true
	o.Checkpoint.Storage = e.st
	dir := e.newDir()
	s, err := Restore(dir, o, storage, h)
	if err != nil {
		e.t.Fatal(err)
	}
	return e.run(s), dir
}

// waitLazy waits until s's prefetch is done (or has a corrupt file, when corrupt).
func waitLazy(t *testing.T, s *Store, corrupt bool) LazyRestoreStats {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st := s.Stats().LazyRestore
		if st.Done || (corrupt && st.Corrupt > 0 && st.Local+st.Corrupt == st.Files) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("lazy restore not done after 30 s: %+v", st)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestLazyRestore: a lazy restore from a remote storage answers every read at once, while the
// prefetch is held, with the state of a full restore (the model at the cut); a checkpoint
// taken during the prefetch copies the lazy files through their reads; once released, the
// prefetch makes every file local, completes the directory, and a reopen sees the same state.
func TestLazyRestore(t *testing.T) {
	e, h, m := lazySource(t, vfs.Default(), t.TempDir())
	full := e.restore(nil, NoClaim, h)
	full.m = m.clone()
	if err := full.st.checkAll(full.m); err != nil {
		t.Fatalf("full restore: %v", err)
	}
	full.st.s.Close()

	rs := &remoteStorage{Storage: e.st, hold: make(chan struct{})}
	r, dir := e.restoreLazy(rs, h)
	r.m = m.clone()
	st := r.st.s.Stats().LazyRestore
	if st.Files == 0 || st.Done || st.Local != 0 {
		t.Fatalf("lazy restore before the prefetch: %+v", st)
	}
	if rst := r.st.s.RestoreStats(); rst.Linked != 0 {
		t.Fatalf("restore from a remote storage linked files: %+v", rst)
	}
	if err := r.st.checkAll(r.m); err != nil {
		t.Fatalf("lazy restore, every read before the prefetch: %v", err)
	}
	if st := r.st.s.Stats().LazyRestore; st.RemoteReads == 0 || st.Local != 0 {
		t.Fatalf("reads before the prefetch: %+v, want remote reads and nothing local", st)
	}
	// A checkpoint during the prefetch: its tables are read through the lazy files.
	h2, err := r.st.s.Checkpoint(context.Background(), 2, nil)
	if err != nil {
		t.Fatalf("checkpoint during the prefetch: %v", err)
	}
	if _, err := Open(dir, e.opts); !errors.Is(err, ErrRestoreIncomplete) && !errors.Is(err, ErrLocked) {
		t.Fatalf("Open of a directory during its prefetch: %v, want ErrRestoreIncomplete (or ErrLocked)", err)
	}
	close(rs.hold)
	st = waitLazy(t, r.st.s, false)
	if st.Local != st.Files || st.FetchedBytes == 0 || st.Corrupt != 0 {
		t.Fatalf("prefetch done: %+v", st)
	}
	if err := r.st.checkAll(r.m); err != nil {
		t.Fatalf("after the prefetch: %v", err)
	}
	t.Logf("lazy restore: %+v", st)
	if err := r.st.s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := open(dir, e.opts, nil)
	if err != nil {
		t.Fatalf("reopen after the prefetch: %v", err)
	}
	r2 := e.run(s)
	r2.m = m.clone()
	if err := r2.st.checkAll(r2.m); err != nil {
		t.Fatalf("reopened: %v", err)
	}
	s.Close()
	r3 := e.restore(nil, NoClaim, h2)
	defer r3.st.s.Close()
	r3.m = m.clone()
	if err := r3.st.checkAll(r3.m); err != nil {
		t.Fatalf("checkpoint taken during the prefetch: %v", err)
	}
}

// TestLazyRestoreLinked: from a DirStorage on the same file system the tables are hard links
// at once and the prefetch only checks their CRC32C.
func TestLazyRestoreLinked(t *testing.T) {
	e, h, m := lazySource(t, vfs.Default(), t.TempDir())
	r, _ := e.restoreLazy(e.st, h)
	defer r.st.s.Close()
	r.m = m
	if err := r.st.checkAll(r.m); err != nil {
		t.Fatal(err)
	}
	st := waitLazy(t, r.st.s, false)
	if rst := r.st.s.RestoreStats(); rst.Linked == 0 || st.VerifiedBytes == 0 || st.FetchedBytes != 0 || st.RemoteReads != 0 {
		t.Fatalf("restore %+v, prefetch %+v: want links verified in place", rst, st)
	}
	if err := r.st.checkAll(r.m); err != nil {
		t.Fatal(err)
	}
}

// TestLazyRestoreTransient: prefetch reads that fail transiently are retried; the Store reads
// on and the prefetch completes.
func TestLazyRestoreTransient(t *testing.T) {
	e, h, m := lazySource(t, vfs.Default(), t.TempDir())
	rs := &remoteStorage{Storage: e.st}
	rs.fail.Store(5)
	r, _ := e.restoreLazy(rs, h)
	defer r.st.s.Close()
	r.m = m
	if err := r.st.checkAll(r.m); err != nil {
		t.Fatal(err)
	}
	st := waitLazy(t, r.st.s, false)
	if st.Retries != 5 || rs.failed.Load() != 5 || st.LastError == "" {
		t.Fatalf("prefetch %+v after 5 failed reads", st)
	}
	if err := r.st.checkAll(r.m); err != nil {
		t.Fatal(err)
	}
}

// TestLazyRestoreCorrupt: a table object damaged in storage is found when it arrives: the
// reads that need it fail with ErrCorruption naming the object, Stats count it, and the
// directory stays incomplete.
func TestLazyRestoreCorrupt(t *testing.T) {
	e, h, m := lazySource(t, vfs.Default(), t.TempDir())
	mf, err := checkpoint.ReadManifest(context.Background(), e.st, h.Owner, h.ID)
	if err != nil {
		t.Fatal(err)
	}
	var big checkpoint.Object
	for _, o := range mf.Objects {
		if o.Kind == checkpoint.KindTable && o.Size > big.Size {
			big = o
		}
	}
	if big.Size == 0 {
		t.Fatal("no table in the checkpoint")
	}
	rs := &remoteStorage{Storage: e.st, hold: make(chan struct{})}
	r, dir := e.restoreLazy(rs, h)
	r.m = m
	rs.mu.Lock()
	rs.damaged, rs.damageAt = big.Name, big.Size/3
	rs.mu.Unlock()
	close(rs.hold)
	st := waitLazy(t, r.st.s, true)
	if st.Corrupt != 1 || st.Done || st.LastError == "" {
		t.Fatalf("prefetch of a damaged object: %+v", st)
	}
	err = r.st.checkAll(r.m)
	if !errors.Is(err, ErrCorruption) {
		t.Fatalf("reads after the damaged object arrived: %v, want ErrCorruption", err)
	}
	r.st.s.Discard()
	if _, err := Open(dir, e.opts); !errors.Is(err, ErrRestoreIncomplete) {
		t.Fatalf("Open after a corrupt prefetch: %v, want ErrRestoreIncomplete", err)
	}
}

// TestLazyRestoreClose: Close during the prefetch returns (the prefetch's reads are
// cancelled) and leaves the directory incomplete; a restore again is whole.
func TestLazyRestoreClose(t *testing.T) {
	e, h, m := lazySource(t, vfs.Default(), t.TempDir())
	rs := &remoteStorage{Storage: e.st, hold: make(chan struct{})}
	r, dir := e.restoreLazy(rs, h)
	r.m = m.clone()
	done := make(chan error, 1)
	go func() { done <- r.st.s.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Close during the prefetch did not return")
	}
	if _, err := Open(dir, e.opts); !errors.Is(err, ErrRestoreIncomplete) {
		t.Fatalf("Open after Close during the prefetch: %v, want ErrRestoreIncomplete", err)
	}
	r2, _ := e.restoreLazy(&remoteStorage{Storage: e.st}, h)
	defer r2.st.s.Close()
	r2.m = m
	waitLazy(t, r2.st.s, false)
	if err := r2.st.checkAll(r2.m); err != nil {
		t.Fatal(err)
	}
}

// TestLazyRestoreCrash: a crash during the prefetch (one file fetched) leaves a directory Open
// refuses; restored again on the crashed file system the state is whole, and a crash after the
// prefetch finished reopens to it.
func TestLazyRestoreCrash(t *testing.T) {
	mem := vfs.NewMem()
	e, h, m := lazySource(t, mem, "/root")
	rs := &remoteStorage{Storage: e.st, hold: make(chan struct{})}
	r, dir := e.restoreLazy(rs, h)
	rs.hold <- struct{}{} // one read of the prefetch: the first file (they are < 4 MiB)
	deadline := time.Now().Add(30 * time.Second)
	for r.st.s.Stats().LazyRestore.Local == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	crashed := mem.CrashClone()
	r.st.s.Discard()

	e2 := *e
	e2.fs = crashed
	st2, err := checkpointfs.NewDirStorage(crashed, filepath.Join("/root", "checkpoints"))
	if err != nil {
		t.Fatal(err)
	}
	e2.st = st2
	e2.opts.fs = crashed
	e2.opts.Checkpoint.Storage = st2
	if _, err := open(dir, e2.opts, nil); !errors.Is(err, ErrRestoreIncomplete) {
		t.Fatalf("Open after a crash during the prefetch: %v, want ErrRestoreIncomplete", err)
	}
	r2, dir2 := e2.restoreLazy(&remoteStorage{Storage: st2}, h)
	r2.m = m.clone()
	waitLazy(t, r2.st.s, false)
	if err := r2.st.checkAll(r2.m); err != nil {
		t.Fatal(err)
	}
	crashed2 := crashed.CrashClone()
	r2.st.s.Discard()
	o := e2.opts
	o.fs = crashed2
	st3, err := checkpointfs.NewDirStorage(crashed2, filepath.Join("/root", "checkpoints"))
	if err != nil {
		t.Fatal(err)
	}
	o.Checkpoint.Storage = st3
	s, err := open(dir2, o, nil)
	if err != nil {
		t.Fatalf("Open after a crash once the prefetch finished: %v", err)
	}
	r3 := e2.run(s)
	defer s.Close()
	r3.m = m
	if err := r3.st.checkAll(r3.m); err != nil {
		t.Fatal(err)
	}
}

// waitStarted waits until r has seen n prefetch reads and returns their objects.
func (r *remoteStorage) waitStarted(t *testing.T, n int) []string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r.mu.Lock()
		s := append([]string(nil), r.started...)
		r.mu.Unlock()
		if len(s) >= n {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d prefetch reads after 30 s, want %d: %q", len(s), n, s)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestLazyRestorePromotion (invariant 25): with one prefetch lane held on its first file,
// reads of the other files are served by the storage and promote those files, so that the
// lane fetches them next, in the order they were first read; a transient failure of the
// promoted file's fetch is retried while reads of it go on; every read matches the model
// before, during and after.
func TestLazyRestorePromotion(t *testing.T) {
	e, h, m := lazySource(t, vfs.Default(), t.TempDir())
	e.opts.adjust = func(eo *engine.Options) { eo.RemotePrefetchLanes = 1 }
	rs := &remoteStorage{Storage: e.st, hold: make(chan struct{})}
	r, _ := e.restoreLazy(rs, h)
	defer r.st.s.Close()
	r.m = m
	rs.mu.Lock()
	rs.readOf = nil // Restore's own reads (manifests, timers)
	rs.mu.Unlock()
	first := rs.waitStarted(t, 1)[0] // the lane holds the queue's head
	if err := r.st.checkAll(r.m); err != nil {
		t.Fatalf("reads while the lane is held: %v", err)
	}
	st := r.st.s.Stats().LazyRestore
	if st.Files < 3 || st.Promoted < 2 || st.Local != 0 {
		t.Fatalf("after reading every key with the prefetch held: %+v, want 2 files or more promoted, none local", st)
	}
	// The files in the order the reads first went to the storage, but the held one.
	var order []string
	rs.mu.Lock()
	for _, n := range rs.readOf {
		if n != first && !slices.Contains(order, n) {
			order = append(order, n)
		}
	}
	rs.mu.Unlock()
	// Files promoted before readOf was reset (a background compaction's read, slow runs)
	// come first, in an order the test does not know.
	early := int(st.Promoted) - len(order)
	if early < 0 || len(order) == 0 {
		t.Fatalf("%d files read from the storage (but the held one), %d promoted", len(order), st.Promoted)
	}
	for k := 1; k <= early; k++ {
		rs.hold <- struct{}{}
		rs.waitStarted(t, k+1)
	}
	rs.hold <- struct{}{} // the held file arrives (one range: the test's tables are small)
	if got := rs.waitStarted(t, early+2)[early+1]; early > 0 && slices.Contains(order, got) {
		// An early file was read again after the reset: order[0] may come later.
		t.Logf("%d files promoted before the reads: fetch order checked as a set", early)
		close(rs.hold)
		if st := waitLazy(t, r.st.s, false); st.Local != st.Files {
			t.Fatalf("prefetch done: %+v", st)
		}
		if err := r.st.checkAll(r.m); err != nil {
			t.Fatalf("after the prefetch: %v", err)
		}
		return
	} else if got != order[0] {
		t.Fatalf("prefetch after %s fetches %s, want the first file read, %s; order %q stats %+v", first, got, order[0], order, st)
	}
	// A failure mid-promotion: the promoted file's read fails once, and it is fetched again.
	rs.fail.Store(1)
	rs.hold <- struct{}{}
	if got := rs.waitStarted(t, early+3)[early+2]; got != order[0] {
		t.Fatalf("prefetch after a failed read of %s fetches %s, want it again", order[0], got)
	}
	if err := r.st.checkAll(r.m); err != nil {
		t.Fatalf("reads while the promoted file's fetch is retried: %v", err)
	}
	close(rs.hold)
	st = waitLazy(t, r.st.s, false)
	if st.Retries != 1 || rs.failed.Load() != 1 || st.Local != st.Files || st.Corrupt != 0 {
		t.Fatalf("prefetch done: %+v, want one retry and every file local", st)
	}
	started := rs.waitStarted(t, 0)
	// After the retried read, the other promoted files in their order, then the rest.
	if len(order) > 1 && started[early+3] != order[1] {
		t.Fatalf("prefetch order %q: want %s fourth (second file read)", started, order[1])
	}
	if err := r.st.checkAll(r.m); err != nil {
		t.Fatalf("after the prefetch: %v", err)
	}
}
