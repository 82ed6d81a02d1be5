package lsm

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/strata-db/strata/internal/entry"
	"github.com/strata-db/strata/internal/vfs"
)

var crashKeys = keySpace{values: 24, lists: 10, maps: 6, userKeys: 6, orderBits: 8}

// crashResult is what a workload acknowledged before it stopped.
type crashResult struct {
	acked    *model
	inflight []entry.Entry // the batch whose InstallL0 failed (maybe durable, maybe not)
	keys     []testKey
	err      error // the error that stopped it, nil if it completed
}

// crashWorkload opens a DB on fs and runs a fixed sequence of WriteL0 /
// InstallL0 batches, compactions (due and forced, covering every level) and
// reopens, with manifests small enough to rotate often. It stops at the
// first error.
func crashWorkload(fs vfs.FS, seed uint64) crashResult {
	rng := rand.New(rand.NewPCG(seed, 99))
	g := newGen(rng, crashKeys)
	g.vlen = 12
	res := crashResult{acked: newModel(), keys: g.keys}
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
	for step := range 24 {
		es := g.batch(4 + rng.IntN(16))
		p, err := d.WriteL0(&sliceIter{es: es})
		if err != nil {
			res.err = err
			return res
		}
		if err := d.InstallL0(p, g.seq); err != nil {
			res.inflight, res.err = es, err
			return res
		}
		res.acked.add(es)
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
				d.Close()
				if d, err = Open(opts); err != nil {
					res.err = err
					d = &DB{closed: true}
					return res
				}
			}
		}
	}
	return res
}

// TestCrash crashes the workload at its n-th write operation for every n,
// then reopens a crash clone of the file system: the DB must open, hold
// every acknowledged batch (and possibly the one whose install was cut off),
// nothing more, no stray files, and keep working.
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
	checked := 0
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
		errA := diffAll(d, res.acked, res.keys)
		if errA != nil && res.inflight != nil {
			withInflight := res.acked.clone()
			withInflight.add(res.inflight)
			if errB := diffAll(d, withInflight, res.keys); errB != nil {
				t.Fatalf("crash at %d: state matches neither the acknowledged batches (%v) nor those plus the cut-off one (%v)", n, errA, errB)
			}
			res.acked = withInflight
		} else if errA != nil {
			t.Fatalf("crash at %d: %v", n, errA)
		}
		if stray, err := strayFiles(d); err != nil || len(stray) > 0 {
			t.Fatalf("crash at %d: stray files after reopen: %v %v", n, stray, err)
		}
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
		res.acked.add(es)
		compactAll(t, d)
		d.Close()
		if d, err = Open(opts); err != nil {
			t.Fatalf("crash at %d: second reopen: %v", n, err)
		}
		if err := diffAll(d, res.acked, res.keys); err != nil {
			t.Fatalf("crash at %d: after second reopen: %v", n, err)
		}
		d.Close()
		checked++
	}
	t.Logf("checked %d crash points", checked)
}
