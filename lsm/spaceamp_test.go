package lsm

import (
	"math/rand/v2"
	"testing"

	"github.com/strata-db/strata/internal/vfs"
)

// spaceAmp returns the bytes above the bottom level over the bottom's.
func spaceAmp(d *DB) float64 {
	ls := d.Metrics().Levels
	bottom := len(ls) - 1
	for bottom > 0 && ls[bottom].Files == 0 {
		bottom--
	}
	var above int64
	for l := range bottom {
		above += ls[l].Bytes
	}
	return float64(above) / float64(ls[bottom].Bytes)
}

// TestSpaceAmplificationBound: a key space updated in place keeps, once compactions settle,
// at most MaxSpaceAmplification − 1 of the bottom's bytes in the levels above it (the static
// level targets alone leave more), and every key reads its newest value.
func TestSpaceAmplificationBound(t *testing.T) {
	run := func(amp float64) float64 {
		opts := smallOptions(vfs.NewMem())
		opts.MaxSpaceAmplification = amp
		d, err := Open(opts)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		g := newGen(rand.New(rand.NewPCG(5, 9)), keySpace{values: 3000, orderBits: 64})
		m := newModel()
		worst := 0.0
		for range 40 {
			es := g.batch(800)
			p, _ := d.WriteL0(&sliceIter{es: es})
			if err := d.InstallL0(p, g.seq); err != nil {
				t.Fatal(err)
			}
			m.add(es)
			compactAll(t, d)
			worst = max(worst, spaceAmp(d))
		}
		checkAll(t, d, m, g.keys, "after the updates")
		return worst
	}
	off, on := run(-1), run(1.25)
	t.Logf("levels above the bottom over the bottom, worst after settling: %.2f off, %.2f at 1.25", off, on)
	if on > 0.25+1e-9 {
		t.Fatalf("with MaxSpaceAmplification 1.25 the levels above the bottom reached %.2f× the bottom", on)
	}
	if off <= 0.25 {
		t.Fatalf("without the bound the levels above the bottom stayed at %.2f× the bottom: the test shows nothing", off)
	}
}
