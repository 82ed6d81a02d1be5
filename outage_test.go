package strata

// Checkpoint-storage outages (issue 21, item 1): with the changelog on, a checkpoint storage
// that refuses writes for a while (EIO as an object store's outage, ENOSPC as a full
// checkpoint disk) must cost failed materializations, persists and checkpoints — retried once
// it answers — and never a write, a later checkpoint or Close (DESIGN §4: a fault that may
// pass never stops a Store; local durability does not need the checkpoint storage).

import (
	"context"
	"errors"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/strata-db/strata/internal/engine"
	"github.com/strata-db/strata/internal/vfs"
)

// outageFault makes every write of the checkpoint storage under root (newCkEnv's
// root/checkpoints) fail with cause until cleared: reads still answer.
func outageFault(root string, cause error) vfs.Fault {
	return vfs.Fault{Ops: vfs.WriteOps, Path: vfs.PathPrefix(filepath.Join(root, "checkpoints") + "/"), Sticky: true, Err: cause}
}

// outageEnd checks the end of an outage test: after the outage a checkpoint succeeds and
// restores exactly, Close succeeds, and the reopened directory holds every acknowledged write.
func outageEnd(t *testing.T, e *ckEnv, r *modelRun, id uint64) {
	t.Helper()
	ctx := context.Background()
	s := r.st.s
	r.writes(raceScale(300))
	h, err := s.Checkpoint(ctx, id, nil)
	if err != nil {
		t.Fatalf("checkpoint %d after the outage: %v", id, err)
	}
	m := r.m.clone()
	if err := s.NotifyCheckpointComplete(id); err != nil {
		t.Fatal(err)
	}
	r.writes(raceScale(300)) // after the cut: not in the checkpoint
	dir := s.Dir()
	if err := s.Close(); err != nil {
		t.Fatalf("Close after the outage: %v", err)
	}
	o := e.opts
	reopened, err := open(dir, o, func(eo *engine.Options) { eo.EvictionBatch, eo.BucketBits = 16<<10, 2 })
	if err != nil {
		t.Fatalf("reopen after Close: %v", err)
	}
	rr := e.run(reopened)
	if err := rr.st.checkAll(r.m); err != nil {
		t.Fatalf("reopened after the outage: %v", err)
	}
	if err := reopened.Close(); err != nil {
		t.Fatal(err)
	}
	rs := e.restore(nil, NoClaim, h)
	defer rs.st.s.Close()
	if err := rs.st.checkAll(m); err != nil {
		t.Fatalf("restore of checkpoint %d, taken after the outage: %v", id, err)
	}
}

// TestCheckpointStorageOutage: the checkpoint storage refuses writes with EIO, then ENOSPC,
// for longer than MaxMaterializationFailures (2) background materializations (and the
// persists meanwhile): every write goes on being acknowledged, a checkpoint during the outage fails
// with the storage's error (errors.Is its errno, not ErrCorruption), and once the storage
// answers a materialization, a checkpoint and Close succeed, the checkpoint restores exactly
// and the directory reopens with every acknowledged write.
func TestCheckpointStorageOutage(t *testing.T) {
	ctx := context.Background()
	ffs := vfs.NewFaultFS(vfs.NewMem())
	const root = "/outage"
	e := newCkEnv(t, ffs, root, 128)
	e.opts.Checkpoint.Changelog = &ChangelogOptions{MaterializationInterval: 5 * time.Millisecond, MaxMaterializationFailures: 2}
	r := e.open(nil)
	s := r.st.s
	defer func() {
		ffs.ClearFaults()
		s.Close()
	}()
	r.writes(raceScale(2000))
	if _, err := s.Checkpoint(ctx, 1, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.NotifyCheckpointComplete(1); err != nil {
		t.Fatal(err)
	}
	id := uint64(1)
	for _, c := range []struct {
		cause error
		fails int64 // materializations that must fail during the outage
	}{{syscall.EIO, 3}, {syscall.ENOSPC, 1}} {
		ffs.Inject(outageFault(root, c.cause))
		want := s.ChangelogStats().MaterializationFailures + c.fails
		deadline := time.Now().Add(30 * time.Second)
		for s.ChangelogStats().MaterializationFailures < want {
			if time.Now().After(deadline) {
				t.Fatalf("%v: %d materializations failed in 30 s, want %d: %+v", c.cause,
					s.ChangelogStats().MaterializationFailures, want, s.ChangelogStats())
			}
			r.writes(50) // each acknowledged: r.writes fails the test on any error
			time.Sleep(20 * time.Millisecond)
		}
		id++
		_, err := s.Checkpoint(ctx, id, nil)
		if err == nil || !errors.Is(err, c.cause) || errors.Is(err, ErrCorruption) {
			t.Fatalf("checkpoint %d during an outage (%v): %v, want an error matching the cause", id, c.cause, err)
		}
		if st := s.ChangelogStats(); !st.MaterializationFailing && c.fails > 2 {
			t.Fatalf("%d consecutive materializations failed, ChangelogStats does not report it: %+v", c.fails, st)
		}
		ffs.ClearFaults()
	}
	if err := s.e.Materialize(ctx); err != nil {
		t.Fatalf("materialization after the outage: %v", err)
	}
	if st := s.ChangelogStats(); st.MaterializationFailing {
		t.Fatalf("after a durable materialization: %+v", st)
	}
	outageEnd(t, e, r, id+1)
}

// TestChangelogBufferFullOutage: while the checkpoint storage refuses writes the changelog's
// unpersisted bytes reach WriterOptions.Threshold; the next writes wait
// (BackpressureTimeout) and are refused with ErrMemoryBudget without being applied (the
// model, which does not apply them either, checks every read), the refusal is not sticky,
// checkpoints fail with the storage's error, and after the outage everything works: writes,
// a checkpoint that restores exactly, Close, and a reopen holding every acknowledged write.
func TestChangelogBufferFullOutage(t *testing.T) {
	ctx := context.Background()
	ffs := vfs.NewFaultFS(vfs.NewMem())
	const root = "/outage"
	e := newCkEnv(t, ffs, root, 128)
	e.opts.Checkpoint.Owner = "buf"
	e.opts.BackpressureTimeout = 50 * time.Millisecond
	w, err := NewChangelogWriter(ChangelogWriterOptions{Storage: e.st, Prefix: "buf", Threshold: 64 << 10, PreemptiveThreshold: 16 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	e.opts.Checkpoint.Changelog = &ChangelogOptions{Writer: w, MaterializationInterval: -1}
	r := e.open(nil)
	r.pressure = true // a write refused with ErrMemoryBudget must change nothing
	s := r.st.s
	defer func() {
		ffs.ClearFaults()
		s.Close()
	}()
	r.writes(raceScale(1000))
	if _, err := s.Checkpoint(ctx, 1, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.NotifyCheckpointComplete(1); err != nil {
		t.Fatal(err)
	}
	ffs.Inject(outageFault(root, syscall.EIO))
	for n := 0; r.budgetFails < 5; n++ {
		if n > 100000 {
			t.Fatalf("%d writes during the outage, none refused: the buffer never filled", n)
		}
		r.writes(1)
	}
	if err := r.st.checkAll(r.m); err != nil {
		t.Fatalf("during the outage, after %d refused writes: %v", r.budgetFails, err)
	}
	if _, err := s.Checkpoint(ctx, 2, nil); err == nil || !errors.Is(err, syscall.EIO) || errors.Is(err, ErrCorruption) {
		t.Fatalf("checkpoint during the outage: %v, want an error matching EIO", err)
	}
	ffs.ClearFaults()
	// The failed persist is retried once its backoff has passed (at most engine.MaxRetryDelay
	// after the last failure); until then the buffer stays full and a write waiting
	// BackpressureTimeout (50 ms here) may still be refused. After that bound none may be.
	time.Sleep(engine.MaxRetryDelay + 100*time.Millisecond)
	refused := r.budgetFails
	r.writes(raceScale(2000))
	if r.budgetFails != refused {
		t.Fatalf("%d writes refused after the outage", r.budgetFails-refused)
	}
	outageEnd(t, e, r, 3)
}
