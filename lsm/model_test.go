package lsm

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/strata-db/strata/internal/vfs"
	"github.com/strata-db/strata/lsm/sstable"
	"github.com/strata-db/strata/memory"
)

// TestModel drives a DB with random WriteL0 batches (some discarded),
// compactions (some run concurrently with installs), persist points, reopens
// (which go back to the last persist point) and manifest rotations, and after
// each step compares every key's resolved value with a Go map model of the
// installed history; every file of the persisted version must stay on disk. It prints its seed; -seed=N
// replays.
func TestModel(t *testing.T) {
	seed := testSeed(t)
	for round := range 4 {
		rng := rand.New(rand.NewPCG(seed, uint64(round)))
		runModel(t, rng, round)
	}
}

func runModel(t *testing.T, rng *rand.Rand, round int) {
	fs := vfs.NewMem()
	opts := smallOptions(fs)
	if round%2 == 1 {
		budget := memory.NewBudget(64 << 20)
		c, err := sstable.NewCache(budget, 64<<10, opts.BlockSize)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		opts.Cache = c
	}
	ks := keySpace{values: 60, lists: 30, maps: 15, userKeys: 12, orderBits: 10}
	if round >= 2 {
		ks.orderBits = 64
	}
	g := newGen(rng, ks)
	m := newModel()
	pm := newModel() // the model as of the last persist point
	var pmSeq uint64
	d, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if d != nil {
			d.Close()
		}
	}()
	steps := 300
	if testing.Short() {
		steps = 100
	}
	for step := range steps {
		switch r := rng.IntN(100); {
		case r < 60:
			es := g.batch(1 + rng.IntN(60))
			p, err := d.WriteL0(&sliceIter{es: es})
			if err != nil {
				t.Fatalf("step %d: WriteL0: %v", step, err)
			}
			if rng.IntN(20) == 0 {
				d.Discard(p)
				continue
			}
			if err := d.InstallL0(p, g.seq); err != nil {
				t.Fatalf("step %d: InstallL0: %v", step, err)
			}
			m.add(es)
		case r < 80:
			j := d.PickCompaction()
			if j == nil {
				j = d.CompactLevel(rng.IntN(opts.NumLevels - 1))
			}
			if j == nil {
				continue
			}
			if rng.IntN(3) == 0 {
				// Run in the background while the owner installs L0 files.
				done := make(chan error, 1)
				go func() { done <- j.Run(context.Background()) }()
				for range 1 + rng.IntN(3) {
					es := g.batch(1 + rng.IntN(30))
					p, err := d.WriteL0(&sliceIter{es: es})
					if err != nil {
						t.Fatalf("step %d: WriteL0: %v", step, err)
					}
					if err := d.InstallL0(p, g.seq); err != nil {
						t.Fatalf("step %d: InstallL0: %v", step, err)
					}
					m.add(es)
					if err := diffAll(d, m, g.keys); err != nil {
						t.Fatalf("step %d: during compaction: %v", step, err)
					}
				}
				if err := <-done; err != nil {
					t.Fatalf("step %d: compaction %v: %v", step, j, err)
				}
			} else if rng.IntN(10) == 0 {
				// A job that never runs releases its inputs.
				if err := d.InstallCompaction(j); err == nil {
					t.Fatalf("step %d: InstallCompaction of a job that did not run succeeded", step)
				}
				continue
			} else if err := j.Run(context.Background()); err != nil {
				t.Fatalf("step %d: compaction %v: %v", step, j, err)
			}
			if err := d.InstallCompaction(j); err != nil {
				t.Fatalf("step %d: install %v: %v", step, j, err)
			}
		case r < 83:
			if rng.IntN(2) == 0 {
				if err := d.Persist(g.seq, nil); err != nil {
					t.Fatalf("step %d: Persist: %v", step, err)
				}
				pm, pmSeq = m.clone(), g.seq
			}
			if err := d.Close(); err != nil {
				t.Fatal(err)
			}
			if d, err = Open(opts); err != nil {
				d = nil
				t.Fatalf("step %d: reopen: %v", step, err)
			}
			if stray, _ := strayFiles(d); len(stray) > 0 {
				t.Fatalf("step %d: stray files after reopen: %v", step, stray)
			}
			// Installs since the last persist point are gone; numbering
			// continues after the persisted sequence number.
			m = pm.clone()
			if got := d.LastSeq(); got != pmSeq {
				t.Fatalf("step %d: LastSeq %d after reopen, persisted %d", step, got, pmSeq)
			}
			g.seq = pmSeq
			if err := diffAll(d, m, g.keys); err != nil {
				t.Fatalf("step %d: after reopen: %v", step, err)
			}
		case r < 88:
			if err := d.Persist(g.seq, []byte{byte(step)}); err != nil {
				t.Fatalf("step %d: Persist: %v", step, err)
			}
			pm, pmSeq = m.clone(), g.seq
			if mt := d.Metrics(); mt.PersistPinnedFiles != 0 {
				t.Fatalf("step %d: %d files pinned right after Persist", step, mt.PersistPinnedFiles)
			}
			if stray, _ := strayFiles(d); len(stray) > 0 {
				t.Fatalf("step %d: stray files after Persist: %v", step, stray)
			}
		default:
			if err := diffAll(d, m, g.keys); err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
			if err := checkIter(d, rng); err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
		}
		if msg := d.current.checkLevels(); msg != "" {
			t.Fatalf("step %d: %s", step, msg)
		}
		if err := persistedOnDisk(d); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
	}
	checkAll(t, d, m, g.keys, "end")
	compactAll(t, d)
	checkAll(t, d, m, g.keys, "after compactAll")
	compactToBottom(t, d)
	checkAll(t, d, m, g.keys, "after full compaction")
	mt := d.Metrics()
	t.Logf("round %d: levels %+v flushes %d compactions %d WA %.2f rotations %d", round, mt.Levels,
		mt.Flushes, mt.Compactions, mt.WriteAmplification, mt.ManifestRotations)
	if d.jobs != 0 {
		t.Fatalf("%d jobs not released", d.jobs)
	}
	if stray, _ := strayFiles(d); len(stray) > 0 {
		t.Fatalf("stray files: %v", stray)
	}
}
