package strata

import (
	"time"

	"github.com/strata-db/strata/internal/engine"
)

// The task side of the cost accounting (Stats.Task; internal/engine doc.go, "Cost
// accounting"). Every API call of a Store enters and exits it (enter, exit — around the
// misuse guard); one call in engine.SampleEvery is timed with the monotonic clock, and the
// engine times its own parts of that call. A clock read per call would cost as much as a
// point read (25–60 ns on a virtual machine): the common path pays an increment, a mask
// and two predictable branches.

// opPart says which part of the task's time an API call belongs to beyond the engine's.
type opPart uint8

const (
	opCall  opPart = iota // a state, key or checkpoint call: writes the hot tier back first (hot.go, H1)
	opTimer               // a timer call (TaskStats.TimerNanos)
	opHot                 // a point operation through a hot table (beginHot)
	opOps                 // an operator-state call (no keyed state: the hot tier stays)
)

// opMeter holds the root's sampling state and sums (owner goroutine only).
type opMeter struct {
	ops     int64 // API calls since Open
	sampled int64 // of them, timed
	t0      int64 // mono() at the sampled call's enter; 0: none is being timed
	part    opPart
	opNs    int64 // time of the sampled calls, waits excluded
	timerNs int64 // of which timer calls
}

// mono is the monotonic clock in nanoseconds since process start (never 0 after start).
func mono() int64 { return int64(time.Since(monoBase)) + 1 }

var monoBase = time.Now()

// enter begins an API call: the misuse guard, then the sampling counter.
func (s *Store) enter(p opPart) {
	s.guard.enter()
	s.meter.ops++
	if s.meter.ops&(engine.SampleEvery-1) == 0 {
		s.sampleBegin(p)
	}
	if p == opCall && s.hot.dirty > 0 {
		s.enterSync()
	}
}

// enterSync writes the hot tier back for a call that reads or writes beside it (hot.go, H1,
// H2). A failure makes the call fail: check refuses every key (keyGroupError reports it) and
// the cuts ask hotErrCheck, until exit.
//
//go:noinline
func (s *Store) enterSync() {
	if err := s.syncHot(); err != nil {
		s.hot.err, s.liveMaxP = err, ^uint32(0)
		return
	}
	s.hotJudgeAll() // the tier is clean, and the call holds no entry yet (hot.go, H9)
}

// exit ends an API call begun by enter.
func (s *Store) exit() {
	s.guard.exit()
	if s.meter.t0 != 0 {
		s.sampleEnd()
	}
	if s.hot.err != nil {
		s.exitSync()
	}
}

// exitSync clears a write-back failure at the end of the call it failed.
//
//go:noinline
func (s *Store) exitSync() {
	s.hot.err = nil
	if !s.closed {
		s.liveMaxP = s.maxP
	}
}

func (s *Store) sampleBegin(p opPart) {
	if s.e == nil || s.closed {
		return
	}
	s.meter.part = p
	s.e.SampleOn()
	s.meter.t0 = mono()
}

func (s *Store) sampleEnd() {
	d := mono() - s.meter.t0
	s.meter.t0 = 0
	d = max(d-s.e.SampleOff(), 0)
	s.meter.sampled++
	s.meter.opNs += d
	if s.meter.part == opTimer {
		s.meter.timerNs += d
	}
}

// taskStats fills the sampled parts of st.Task from the root's and the engine's sums,
// scaled to every call.
func (m *opMeter) taskStats(st *Stats, e *engine.Stats) {
	t := &st.Task
	t.Ops, t.SampledOps = m.ops, m.sampled
	if m.sampled == 0 {
		return
	}
	scale := func(ns int64) int64 { return int64(float64(ns) * float64(m.ops) / float64(m.sampled)) }
	t.OpNanos, t.TimerNanos = scale(m.opNs), scale(m.timerNs)
	t.ReadNanos, t.WriteNanos, t.ChangelogNanos = scale(e.Task.ReadNanos), scale(e.Task.WriteNanos), scale(e.Task.ChangelogNanos)
	t.APINanos = max(t.OpNanos-t.TimerNanos-t.ReadNanos-t.WriteNanos-t.ChangelogNanos, 0)
}
