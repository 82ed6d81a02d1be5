package scheduler

import "time"

// StepWallClock makes the wall clock read d ahead of the real one (a test of invariant 2 of
// the coarse clock) and returns two functions: back steps the wall clock back (the clock must
// not follow), reset then also forgets the step, for the next test (the clock goes back: a
// test-only break of invariant 2).
func StepWallClock(d time.Duration) (back, reset func()) {
	testWallStep.Store(d.Milliseconds())
	back = func() { testWallStep.Store(0) }
	reset = func() {
		back()
		clock.mu.Lock()
		defer clock.mu.Unlock()
		clock.skew.Store(0)
		clock.now.Store(clockNow())
	}
	return back, reset
}
