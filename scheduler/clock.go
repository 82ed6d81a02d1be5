package scheduler

import (
	"sync"
	"sync/atomic"
	"time"
)

// The coarse clock: a process-wide millisecond clock read with one atomic load, for the TTL
// of state (its default processing time), where a clock read per state access would cost as
// much as the access itself (a monotonic clock read is 25–60 ns on a virtual machine).
//
// Invariants:
//
//  1. While at least one holder has acquired it (AcquireClock without its release), one
//     goroutine — the ticker — stores the current time into clock.now about every
//     millisecond. It is the only goroutine this file starts; the release that drops the
//     last hold stops it and waits for it to return, so no goroutine outlives the holders.
//  2. The time is the wall clock read once per process (at the first acquire) plus the
//     monotonic time elapsed since, plus the largest forward step of the wall clock seen since
//     (clock.skew): it never goes back, whatever NTP does to the wall clock, across ticker
//     restarts too, and it follows the wall clock when that steps forward (a fresh machine
//     whose clock is synchronised after the process started, a VM resumed from a pause) — as
//     Flink's processing time, System.currentTimeMillis, does. A backward step is not
//     followed: the clock runs on at the monotonic rate until the wall clock passes it again.
//  3. Every acquire stores the current time before it returns, so a new holder never reads a
//     time older than its acquire. Between ticks a reader sees the time of the last tick: it
//     lags the wall clock by up to one tick, longer when every P is busy and the ticker waits
//     to run (Go's scheduler preempts a running goroutine after 10 ms).
var clock struct {
	mu      sync.Mutex
	holders int
	stop    chan struct{}
	done    chan struct{}
	base    time.Time    // the first acquire's time.Now (with its monotonic reading)
	baseMs  int64        // base as milliseconds since the epoch
	skew    atomic.Int64 // the largest forward step of the wall clock past base+monotonic, ms (≥ 0)
	now     atomic.Int64
	started bool
}

// ClockTick is the coarse clock's period.
const ClockTick = time.Millisecond

// AcquireClock returns the coarse clock — now reports milliseconds since the epoch — and the
// function that releases the hold. The clock is the wall clock at the process's first
// acquire advanced by the monotonic clock (it never goes back), updated every ClockTick by
// one goroutine that runs while any hold is open; now costs one atomic load and lags real
// time by up to a tick (more when every P is busy: Go preempts a running goroutine after
// 10 ms). It is the default processing time of state TTL, whose semantics need milliseconds,
// not nanoseconds — as RocksDB's TTL reads its clock in seconds.
//
// now is safe for concurrent use and keeps working after release (it then returns the time
// of the last tick); release must be called once — it stops the ticker when it drops the
// last hold and waits for it to return. Safe for concurrent use.
func AcquireClock() (now func() int64, release func()) {
	clock.mu.Lock()
	defer clock.mu.Unlock()
	if !clock.started {
		clock.base = time.Now()
		clock.baseMs = clock.base.UnixMilli()
		clock.started = true
	}
	advance()
	if clock.holders++; clock.holders == 1 {
		clock.stop, clock.done = make(chan struct{}), make(chan struct{})
		go tick(clock.stop, clock.done)
	}
	var once sync.Once
	return clockLoad, func() { once.Do(releaseClock) }
}

// clockLoad is the coarse clock's reader.
func clockLoad() int64 { return clock.now.Load() }

// clockNow is the base plus the monotonic time since plus the wall clock's largest forward
// step, in milliseconds (invariant 2).
func clockNow() int64 {
	n := time.Now()
	mono := clock.baseMs + n.Sub(clock.base).Milliseconds()
	step := wallMillis(n) - mono
	for {
		old := clock.skew.Load()
		if step <= old || clock.skew.CompareAndSwap(old, step) {
			return mono + max(old, step)
		}
	}
}

// wallMillis is n's wall-clock reading in milliseconds since the epoch, plus testWallStep.
func wallMillis(n time.Time) int64 { return n.UnixMilli() + testWallStep.Load() }

// testWallStep steps the wall clock in tests (export_test.go); 0 otherwise.
var testWallStep atomic.Int64

// advance stores the current time unless a racing store put a later one (an acquire and a
// tick may compute in one order and store in the other): now never goes back (invariant 2).
func advance() {
	t := clockNow()
	for {
		old := clock.now.Load()
		if t <= old || clock.now.CompareAndSwap(old, t) {
			return
		}
	}
}

// releaseClock drops one hold and, with the last, stops the ticker and waits for it.
func releaseClock() {
	clock.mu.Lock()
	clock.holders--
	if clock.holders > 0 {
		clock.mu.Unlock()
		return
	}
	stop, done := clock.stop, clock.done
	clock.stop, clock.done = nil, nil
	close(stop)
	<-done // under mu: an acquire racing this release starts no second ticker before it ends
	clock.mu.Unlock()
}

// tick is the ticker goroutine (invariant 1).
func tick(stop, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(ClockTick)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			advance()
		case <-stop:
			return
		}
	}
}
