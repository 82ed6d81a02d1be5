package lsm

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"

	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/internal/vfs"
)

// faultOps are the operations a full disk fails.
var faultOps = vfs.Ops(vfs.OpCreate, vfs.OpWrite, vfs.OpSync, vfs.OpRename)

// TestNoSpace makes the k-th write operation after Open fail with ENOSPC
// (and every later one: the disk stays full), for every k across a workload
// of flushes and compactions, with and without short writes. Every failure
// must be base.ErrNoSpace (and syscall.ENOSPC), leave no partial file, and keep
// every installed batch readable; once space is back the pending install is
// retried, later writes succeed, and a reopen sees exactly the installed
// batches.
func TestNoSpace(t *testing.T) {
	seed := testSeed(t)
	// Count the matching operations of a fault-free run.
	total := func() int64 {
		ffs := vfs.NewFaultFS(vfs.NewMem())
		d, err := Open(smallOptions(ffs))
		if err != nil {
			t.Fatal(err)
		}
		before, after := ffs.Count(faultOps), int64(0)
		if err := noSpaceWorkload(d, seed, nil, func() { after = ffs.Count(faultOps) }); err != nil {
			t.Fatal(err)
		}
		return after - before
	}()
	t.Logf("workload: %d create/write/sync/rename operations", total)
	step := int64(1)
	if testing.Short() {
		step = 5
	}
	for _, short := range []bool{false, true} {
		for k := int64(1); k <= total; k += step {
			t.Run(fmt.Sprintf("short=%v/k=%d", short, k), func(t *testing.T) {
				ffs := vfs.NewFaultFS(vfs.NewMem())
				d, err := Open(smallOptions(ffs))
				if err != nil {
					t.Fatal(err)
				}
				defer func() { d.Close() }()
				ffs.Inject(vfs.Fault{Ops: faultOps, Nth: k, Sticky: true, Err: syscall.ENOSPC, ShortWrite: short})
				f := &noSpace{t: t, ffs: ffs}
				if err := noSpaceWorkload(d, seed, f, nil); err != nil {
					t.Fatal(err)
				}
				if f.failures == 0 {
					t.Fatalf("no operation failed")
				}
			})
		}
	}
}

// noSpace is the fault side of noSpaceWorkload: it checks each failure and
// clears the fault after a few of them.
type noSpace struct {
	t        *testing.T
	ffs      *vfs.FaultFS
	failures int
	pending  []*PendingFile
	pendES   [][]base.Entry
}

// noSpaceWorkload runs flushes and compactions on d. With f nil every
// operation must succeed; otherwise failures are checked by f.
func noSpaceWorkload(d *DB, seed uint64, f *noSpace, loopEnd func()) error {
	rng := rand.New(rand.NewPCG(seed, 7))
	g := newGen(rng, crashKeys)
	m := newModel()
	fail := func(what string, err error) error {
		if f == nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if !errors.Is(err, base.ErrNoSpace) || !errors.Is(err, syscall.ENOSPC) {
			return fmt.Errorf("%s: %v is not base.ErrNoSpace", what, err)
		}
		f.failures++
		if err := diffAll(d, m, g.keys); err != nil {
			return fmt.Errorf("after failed %s: %w", what, err)
		}
		if err := noPartialFiles(d, f.pending); err != nil {
			return fmt.Errorf("after failed %s: %w", what, err)
		}
		if f.failures == 3 {
			f.ffs.ClearFaults()
		}
		return nil
	}
	for step := range 20 {
		if f != nil && f.failures >= 3 && len(f.pending) > 0 {
			// Space is back: retry the installs that failed.
			for i, p := range f.pending {
				if err := d.InstallL0(p, g.seq); err != nil {
					return fmt.Errorf("retry of a failed install: %w", err)
				}
				m.add(f.pendES[i])
			}
			f.pending, f.pendES = nil, nil
		}
		es := g.batch(4 + rng.IntN(16))
		p, err := d.WriteL0(&sliceIter{es: es})
		if err != nil {
			if err := fail("WriteL0", err); err != nil {
				return err
			}
			continue
		}
		if err := d.InstallL0(p, g.seq); err != nil {
			if f != nil {
				if step%2 == 0 {
					d.Discard(p)
				} else {
					f.pending = append(f.pending, p)
					f.pendES = append(f.pendES, es)
				}
			}
			if err := fail("InstallL0", err); err != nil {
				return err
			}
			continue
		}
		m.add(es)
		if step%4 == 3 {
			if err := d.Persist(g.seq, []byte(fmt.Sprint("meta", step))); err != nil {
				if err := fail("Persist", err); err != nil {
					return err
				}
			}
		}
		if step%3 == 2 {
			j := d.PickCompaction()
			if j == nil {
				j = d.CompactLevel(1 + step%3)
			}
			if j == nil {
				continue
			}
			err := j.Run(context.Background())
			if ierr := d.InstallCompaction(j); err == nil {
				err = ierr
			}
			if err != nil {
				if err := fail("compaction", err); err != nil {
					return err
				}
			}
		}
	}
	if loopEnd != nil {
		loopEnd()
	}
	if f != nil {
		f.ffs.ClearFaults()
		for i, p := range f.pending {
			if err := d.InstallL0(p, g.seq); err != nil {
				return fmt.Errorf("final retry of a failed install: %w", err)
			}
			m.add(f.pendES[i])
		}
		// One more successful install: its manifest write replaces any
		// manifest a failed write left in doubt.
		es := g.batch(5)
		p, err := d.WriteL0(&sliceIter{es: es})
		if err != nil {
			return fmt.Errorf("WriteL0 after the disk has space: %w", err)
		}
		if err := d.InstallL0(p, g.seq); err != nil {
			return fmt.Errorf("InstallL0 after the disk has space: %w", err)
		}
		m.add(es)
	}
	for {
		j := d.PickCompaction()
		if j == nil {
			break
		}
		if err := j.Run(context.Background()); err != nil {
			return fmt.Errorf("compaction after the disk has space: %w", err)
		}
		if err := d.InstallCompaction(j); err != nil {
			return fmt.Errorf("compaction install after the disk has space: %w", err)
		}
	}
	if err := diffAll(d, m, g.keys); err != nil {
		return err
	}
	if stray, err := strayFiles(d); err != nil || len(stray) > 0 {
		return fmt.Errorf("stray files %v %v", stray, err)
	}
	opts := d.opts
	// Once space is back Persist succeeds, whatever failed before.
	if err := d.Persist(g.seq, []byte("final")); err != nil {
		return fmt.Errorf("Persist after the disk has space: %w", err)
	}
	if err := d.Close(); err != nil {
		return err
	}
	d2, err := Open(opts)
	if err != nil {
		return fmt.Errorf("reopen: %w", err)
	}
	defer d2.Close()
	if seq, meta, ok := d2.PersistedMeta(); !ok || seq != g.seq || string(meta) != "final" {
		return fmt.Errorf("after reopen: PersistedMeta = %d, %q, %v; want %d, \"final\", true", seq, meta, ok, g.seq)
	}
	if err := diffAll(d2, m, g.keys); err != nil {
		return fmt.Errorf("after reopen: %w", err)
	}
	if stray, err := strayFiles(d2); err != nil || len(stray) > 0 {
		return fmt.Errorf("stray files after reopen %v %v", stray, err)
	}
	return nil
}

// noPartialFiles checks that every table file in the directory is live,
// pending, or deferred (named by a manifest write whose fate is unknown).
func noPartialFiles(d *DB, pending []*PendingFile) error {
	names, err := d.fs.List(d.dir)
	if err != nil {
		return err
	}
	ok := liveNums(d)
	for _, p := range pending {
		ok[p.t.meta.Num] = true
	}
	for _, n := range d.deferred {
		ok[n] = true
	}
	for _, n := range names {
		if kind, num := parseFileName(n); kind == kindTable && !ok[num] {
			return fmt.Errorf("partial or orphan table file %s", n)
		}
		if kind, _ := parseFileName(n); kind == kindTemp {
			return fmt.Errorf("temporary file %s left behind", n)
		}
	}
	return nil
}
