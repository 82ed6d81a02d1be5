package fresh

import (
	"flag"
	"testing"

	"github.com/strata-db/strata/memory"
	"github.com/zeebo/xxh3"
)

var seedFlag = flag.Int64("seed", 0, "seed for the model-based test (0 = time-based)")

func hashOf(b []byte) uint64 { return xxh3.Hash(b) }

// newTestTable returns a Table over its own budget; dataLimit > 0 forces
// small segments.
func newTestTable(tb testing.TB, budget int64, segSize, dataLimit int) (*Table, *memory.Pool) {
	tb.Helper()
	p, err := memory.NewPool(memory.NewBudget(budget), segSize)
	if err != nil {
		tb.Fatal(err)
	}
	t, err := New(Options{Pool: p, dataLimit: dataLimit})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if !t.closed {
			if err := t.Close(); err != nil {
				tb.Error(err)
			}
		}
		p.Close()
		if u := p.Budget().Used(); u != 0 {
			tb.Errorf("budget still has %d bytes mapped after Close", u)
		}
	})
	return t, p
}

func must(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}
