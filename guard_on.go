//go:build race || invariants

package strata

import "sync/atomic"

// guard detects overlapping use of a Store from two goroutines (builds with -race or the
// "invariants" tag): every operation enters and exits it, and entering a busy guard panics.
// It cannot see two goroutines that take turns without synchronisation (the race detector
// does), only operations that overlap.
type guard struct{ busy atomic.Int32 }

func (g *guard) enter() {
	if !g.busy.CompareAndSwap(0, 1) {
		panic("strata: invariant: Store used by two goroutines at once (a Store and its states belong to one goroutine at a time)")
	}
}

func (g *guard) exit() { g.busy.Store(0) }
