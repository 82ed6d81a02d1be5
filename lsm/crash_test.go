package lsm

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/strata-db/strata/internal/vfs"
)

var crashKeys = keySpace{values: 24, lists: 10, maps: 6, userKeys: 6, orderBits: 8}

// crashResult is what a workload made durable before it stopped.
type crashResult struct {
	persisted *model // the installed history as of the last completed Persist
	// inflight, if not nil, is the history of a Persist that failed (cut
	// off): its record may or may not have become durable.
	inflight *model
	keys     []testKey
	err      error // the error that stopped it, nil if it completed
}

// crashWorkload opens a DB on fs and runs a fixed sequence of WriteL0 /
// InstallL0 batches, compactions (due and forced, covering every level),
// persist points and reopens (with and without a Persist before Close), with
// manifests small enough to rotate often. It stops at the first error.
func crashWorkload(fs vfs.FS, seed uint64) crashResult {
	rng := rand.New(rand.NewPCG(seed, 99))
	g := newGen(rng, crashKeys)
	g.vlen = 12
	acked := newModel() // installed, persisted or not
	res := crashResult{persisted: newModel(), keys: g.keys}
	opts := smallOptions(fs)
	opts.MaxManifestBytes = 600
	d, err := Open(opts)
	if err != nil {
		res.err = err
		return res
	}
	defer func() { d.Close() }()
	compact := func(j *CompactionJob) error {
		if j == nil {
			return nil
		}
		if err := j.Run(context.Background()); err != nil {
			d.InstallCompaction(j)
			return err
		}
		return d.InstallCompaction(j)
	}
	persist := func() error {
		if err := d.Persist(g.seq, []byte{byte(g.seq)}); err != nil {
			res.inflight = acked.clone()
			return err
		}
		res.persisted = acked.clone()
		return nil
	}
	for step := range 31 { // the last steps install after the last Persist
		es := g.batch(4 + rng.IntN(16))
		p, err := d.WriteL0(&sliceIter{es: es})
		if err != nil {
			res.err = err
			return res
		}
		if err := d.InstallL0(p, g.seq); err != nil {
			res.err = err
			return res
		}
		acked.add(es)
		if step%4 == 1 || step%7 == 6 {
			if err := persist(); err != nil {
				res.err = err
				return res
			}
		}
		switch step % 6 {
		case 2, 5:
			if err := compact(d.PickCompaction()); err != nil {
				res.err = err
				return res
			}
		case 3:
			if err := compact(d.CompactLevel(1 + step%3)); err != nil {
				res.err = err
				return res
			}
		case 4:
			if step%12 == 4 {
				if step%24 == 4 {
					if err := persist(); err != nil {
						res.err = err
						return res
					}
				}
				d.Close()
				if d, err = Open(opts); err != nil {
					res.err = err
					d = &DB{closed: true}
					return res
				}
				acked = res.persisted.clone()
				g.seq = d.LastSeq()
			}
		}
	}
	return res
}

// TestCrash crashes the workload at its n-th write operation for every n,
// then reopens a crash clone of the file system: the DB must open and hold
// exactly the installed history as of the last completed Persist (or, if a
// Persist was cut off, possibly as of that one) — not the installs after it
// — with no stray files, and keep working.
func TestCrash(t *testing.T) {
	seed := testSeed(t)
	mem := vfs.NewMem()
	ffs := vfs.NewFaultFS(mem)
	full := crashWorkload(ffs, seed)
	if full.err != nil {
		t.Fatalf("workload without faults: %v", full.err)
	}
	total := ffs.Count(vfs.WriteOps)
	t.Logf("workload: %d write operations", total)
	step := int64(1)
	if testing.Short() {
		step = 7
	}
	checked, inflightSeen := 0, 0
	for n := int64(1); n <= total+1; n += step {
		mem := vfs.NewMem()
		ffs := vfs.NewFaultFS(mem)
		ffs.CrashAt(n)
		res := crashWorkload(ffs, seed)
		if n <= total && !ffs.Crashed() {
			t.Fatalf("crash at %d: the crash point was not reached", n)
		}
		if res.err != nil && !errors.Is(res.err, vfs.ErrCrashed) {
			t.Fatalf("crash at %d: workload stopped by %v, not the crash", n, res.err)
		}
		clone := mem.CrashClone()
		opts := smallOptions(clone)
		d, err := Open(opts)
		if err != nil {
			t.Fatalf("crash at %d (workload stopped by %v): reopen: %v", n, res.err, err)
		}
		want := res.persisted
		errA := diffAll(d, res.persisted, res.keys)
		if errA != nil && res.inflight != nil {
			if errB := diffAll(d, res.inflight, res.keys); errB != nil {
				t.Fatalf("crash at %d: state matches neither the last persist point (%v) nor the cut-off one (%v)", n, errA, errB)
			}
			want = res.inflight
			inflightSeen++
		} else if errA != nil {
			t.Fatalf("crash at %d: state is not the last persist point's: %v", n, errA)
		}
		if stray, err := strayFiles(d); err != nil || len(stray) > 0 {
			t.Fatalf("crash at %d: stray files after reopen: %v %v", n, stray, err)
		}
		res.persisted = want
		// The recovered DB keeps working: one more batch, a compaction, reopen.
		g := newGen(rand.New(rand.NewPCG(uint64(n), 1)), crashKeys)
		g.seq = d.LastSeq() + 1000
		es := g.batch(10)
		p, err := d.WriteL0(&sliceIter{es: es})
		if err != nil {
			t.Fatalf("crash at %d: WriteL0 after recovery: %v", n, err)
		}
		if err := d.InstallL0(p, g.seq); err != nil {
			t.Fatalf("crash at %d: InstallL0 after recovery: %v", n, err)
		}
		res.persisted.add(es)
		compactAll(t, d)
		persistClose(t, d)
		if d, err = Open(opts); err != nil {
			t.Fatalf("crash at %d: second reopen: %v", n, err)
		}
		if err := diffAll(d, res.persisted, res.keys); err != nil {
			t.Fatalf("crash at %d: after second reopen: %v", n, err)
		}
		d.Close()
		checked++
	}
	t.Logf("checked %d crash points (%d recovered a cut-off Persist)", checked, inflightSeen)
}
