package scheduler_test

import (
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/strata-db/strata/scheduler"
)

// TestClock: the coarse clock follows the wall clock within a few ticks, never goes back,
// keeps one ticker for many holders, and leaves no goroutine once the last hold is released.
func TestClock(t *testing.T) {
	waitNoLeak(t, runtime.NumGoroutine())
	before := runtime.NumGoroutine()
	now, release := scheduler.AcquireClock()
	now2, release2 := scheduler.AcquireClock()
	if got := runtime.NumGoroutine(); got != before+1 {
		t.Fatalf("goroutines with two holds: %d, want %d (one ticker)", got, before+1)
	}
	if d := time.Now().UnixMilli() - now(); d < -1 || d > 1 {
		t.Fatalf("right after acquire the clock is %d ms off the wall clock", d)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			last := now2()
			for range 20000 {
				if n := now2(); n < last {
					t.Errorf("the clock went back: %d after %d", n, last)
					return
				} else {
					last = n
				}
			}
		}()
	}
	wg.Wait()
	t0 := now()
	deadline := time.Now().Add(5 * time.Second)
	for now() < t0+20 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if now() < t0+20 {
		t.Fatalf("the clock did not advance 20 ms in 5 s")
	}
	if d := time.Now().UnixMilli() - now(); d < -1 || d > 50 {
		t.Fatalf("the clock lags the wall clock by %d ms", d)
	}
	release()
	release() // a second call of one release is a no-op
	if got := runtime.NumGoroutine(); got != before+1 {
		t.Fatalf("goroutines with one hold left: %d, want %d", got, before+1)
	}
	release2()
	waitNoLeak(t, before) // the ticker has returned; the runtime may still be ending it
	last := now()
	now3, release3 := scheduler.AcquireClock() // a new ticker goes on from where the last stopped
	defer release3()
	if now3() < last {
		t.Fatalf("the clock went back across a restart: %d after %d", now3(), last)
	}
}

// BenchmarkClockRead: what a TTL state pays per clock read (one atomic load) against the
// monotonic read it replaces.
func BenchmarkClockRead(b *testing.B) {
	now, release := scheduler.AcquireClock()
	defer release()
	var sink int64
	b.Run("clock=coarse", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			sink += now()
		}
	})
	start := time.Now()
	b.Run("clock=monotonic", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			sink += time.Since(start).Milliseconds()
		}
	})
	_ = sink
}

// TestClockFollowsForwardWallStep: a wall clock stepped forward (a fresh machine's clock
// synchronised after the process started — CI saw 11.7 s) is followed within a tick or two; a
// step back is not, and the clock never goes back.
func TestClockFollowsForwardWallStep(t *testing.T) {
	now, release := scheduler.AcquireClock()
	defer release()
	back, reset := scheduler.StepWallClock(12 * time.Second)
	defer reset()
	stepped := func() int64 { return time.Now().Add(12 * time.Second).UnixMilli() }
	deadline := time.Now().Add(5 * time.Second)
	d := stepped() - now()
	for (d > 50 || d < -1) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
		d = stepped() - now()
	}
	if d > 50 || d < -1 {
		t.Fatalf("after a forward step of 12 s the clock is %d ms off the stepped wall clock", d)
	}
	before := now()
	back() // the wall clock steps back 12 s: the clock runs on from where it is
	time.Sleep(20 * time.Millisecond)
	if n := now(); n < before {
		t.Fatalf("the clock went back with the wall clock: %d after %d", n, before)
	} else if n < before+10 {
		t.Fatalf("the clock stopped after a backward wall step: %d, was %d 20 ms ago", n, before)
	}
}
