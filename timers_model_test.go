package strata

// The model's timer steps: register, delete, advance (fire) and check, against a plain map of
// pending timers per time domain. Firing is checked timer by timer against the documented
// order (timerOrder: timestamp, key group, hash, key, namespace), callbacks register timers
// (due ones must fire in the same advance) and delete pending ones, and every check compares
// the Store's pending timers with the model's. The checkpoint, restore, rescale, reopen and
// crash steps carry the timers in the model's clones like any state; the watermark is the
// Store's (it restarts at math.MinInt64 in every new Store, as Flink's does).

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/strata-db/strata/timer"
)

// mtimer is a model timer: its slot (key and namespace) and timestamp.
type mtimer struct {
	slot int32
	ts   int64
}

// timerCounts are what a run's timer steps did.
type timerCounts struct {
	registered, fired, sameAdvance, deleted, budgetFails int
}

// registerTimers registers the model's timer service.
func (st *modelStates) registerTimers() error {
	var err error
	st.tim, err = NewTimerService(st.s, TimerServiceDescriptor[string]{Name: "model-timers", NamespaceCodec: String})
	return err
}

// slotOf returns the slot of a timer's key and namespace.
func (st *modelStates) slotOf(key []byte, ns string) (int32, error) {
	for slot := range st.u.slots() {
		if k, n := st.u.kn(slot); k == string(key) && n == ns {
			return slot, nil
		}
	}
	return 0, fmt.Errorf("%w: a timer of key %q namespace %q, of no slot", errMismatch, key, ns)
}

// timerCmp is the documented firing order of model timers on st's Store.
func (st *modelStates) timerCmp(a, b mtimer) int {
	ka, na := st.u.kn(a.slot)
	kb, nb := st.u.kn(b.slot)
	return timerOrder(st.s)(ft{ka, na, a.ts}, ft{kb, nb, b.ts})
}

// checkTimers compares the Store's pending timers of both domains with m's of its key groups.
func (st *modelStates) checkTimers(m *model) error {
	if st.tim == nil {
		return nil
	}
	for d := range 2 {
		want := map[mtimer]bool{}
		for x := range m.tim[d] {
			if st.owns(x.slot) {
				want[x] = true
			}
		}
		got := map[mtimer]bool{}
		var derr error
		fn := func(x Timer[string]) error {
			slot, err := st.slotOf(x.Key.Bytes(), x.Namespace)
			if err != nil {
				return err
			}
			if string(x.Key.Namespace()) != x.Namespace {
				return fmt.Errorf("%w: a timer's Key is in namespace %q, the timer in %q", errMismatch, x.Key.Namespace(), x.Namespace)
			}
			if got[mtimer{slot, x.Timestamp}] {
				derr = fmt.Errorf("%w: timer %v twice", errMismatch, mtimer{slot, x.Timestamp})
			}
			got[mtimer{slot, x.Timestamp}] = true
			return nil
		}
		var err error
		var n int
		if d == int(timer.EventTime) {
			err, n = st.tim.ForEachEventTimeTimer(fn), st.tim.NumEventTimeTimers()
		} else {
			err, n = st.tim.ForEachProcessingTimeTimer(fn), st.tim.NumProcessingTimeTimers()
		}
		if err == nil {
			err = derr
		}
		if err != nil {
			return fmt.Errorf("timers: %w", err)
		}
		if !maps.Equal(got, want) || n != len(want) {
			return fmt.Errorf("%w: %v timers: the Store holds %d (counts %d), the model %d of its key groups %v",
				errMismatch, timer.Domain(d), len(got), n, len(want), st.s.KeyGroups())
		}
	}
	return nil
}

// timerNow is the service's time in domain d, 0 before the first advance.
func (st *modelStates) timerNow(d int) int64 {
	now := st.tim.CurrentWatermark()
	if d == int(timer.ProcessingTime) {
		now = st.tim.CurrentProcessingTime()
	}
	return max(now, 0)
}

func (st *modelStates) timerRegister(d int, slot int32, ts int64) error {
	k, ns := st.u.kn(slot)
	if d == int(timer.EventTime) {
		return st.tim.RegisterEventTimeTimer(st.s.Key([]byte(k)), ns, ts)
	}
	return st.tim.RegisterProcessingTimeTimer(st.s.Key([]byte(k)), ns, ts)
}

func (st *modelStates) timerDelete(d int, slot int32, ts int64) error {
	k, ns := st.u.kn(slot)
	if d == int(timer.EventTime) {
		return st.tim.DeleteEventTimeTimer(st.s.Key([]byte(k)), ns, ts)
	}
	return st.tim.DeleteProcessingTimeTimer(st.s.Key([]byte(k)), ns, ts)
}

// budgetOK reports whether err is an ErrMemoryBudget the run allows (budget pressure), and
// counts it.
func (r *modelRun) budgetOK(err error) bool {
	if r.pressure && errors.Is(err, ErrMemoryBudget) {
		r.timers.budgetFails++
		r.budgetFails++
		return true
	}
	return false
}

// timerRegister registers a timer of slot in a random domain, around the domain's time (some
// in the past: they fire at the next advance).
func (r *modelRun) timerRegister(slot int32) error {
	d := r.rng.IntN(2)
	ts := r.st.timerNow(d) - 3 + r.rng.Int64N(40)
	return r.write(slot, func() error { return r.st.timerRegister(d, slot, ts) }, func() {
		r.m.tim[d][mtimer{slot, ts}] = true
		r.timers.registered++
	})
}

// pendingTimer draws one of the model's pending timers of domain d, or false.
func (r *modelRun) pendingTimer(d int) (mtimer, bool) {
	if len(r.m.tim[d]) == 0 {
		return mtimer{}, false
	}
	xs := slices.SortedFunc(maps.Keys(r.m.tim[d]), func(a, b mtimer) int {
		return cmp.Or(cmp.Compare(a.slot, b.slot), cmp.Compare(a.ts, b.ts))
	})
	return xs[r.rng.IntN(len(xs))], true
}

// timerDelete deletes a pending timer (or, one time in three, one that is not).
func (r *modelRun) timerDelete(slot int32) error {
	d := r.rng.IntN(2)
	x, ok := r.pendingTimer(d)
	if !ok || r.rng.IntN(3) == 0 {
		x = mtimer{slot, r.st.timerNow(d) + r.rng.Int64N(40)}
	}
	return r.write(x.slot, func() error { return r.st.timerDelete(d, x.slot, x.ts) }, func() {
		if r.m.tim[d][x] {
			r.timers.deleted++
		}
		delete(r.m.tim[d], x)
	})
}

// timerAdvance advances one domain's time: every due timer must fire once, in the documented
// order, the model's next due timer each time; a callback sometimes registers a timer (one
// due fires in this advance too) and deletes a pending one.
func (r *modelRun) timerAdvance(int32) error {
	if err := r.invalidate(); err != nil { // an advance is a write
		return err
	}
	st := r.st
	d := r.rng.IntN(2)
	to := st.timerNow(d) + r.rng.Int64N(25)
	inCallback := map[mtimer]bool{}
	fn := func(x Timer[string]) error {
		slot, err := st.slotOf(x.Key.Bytes(), x.Namespace)
		if err != nil {
			return err
		}
		got := mtimer{slot, x.Timestamp}
		var want mtimer
		found := false
		for y := range r.m.tim[d] {
			if y.ts <= to && (!found || st.timerCmp(y, want) < 0) {
				want, found = y, true
			}
		}
		if !found || got != want {
			return fmt.Errorf("%w: %v advance to %d fired %v, the model's next due timer is %v (%v)", errMismatch, timer.Domain(d), to, got, want, found)
		}
		delete(r.m.tim[d], got)
		r.timers.fired++
		if inCallback[got] {
			r.timers.sameAdvance++
		}
		if r.rng.IntN(3) == 0 {
			y := mtimer{r.pick(), x.Timestamp - 2 + r.rng.Int64N(to-x.Timestamp+12)}
			if err := st.timerRegister(d, y.slot, y.ts); err == nil {
				r.m.tim[d][y] = true
				r.timers.registered++
				inCallback[y] = true
			} else if !r.budgetOK(err) {
				return fmt.Errorf("register inside a callback: %w", err)
			}
		}
		if r.rng.IntN(6) == 0 {
			dd := r.rng.IntN(2)
			if y, ok := r.pendingTimer(dd); ok {
				if err := st.timerDelete(dd, y.slot, y.ts); err == nil {
					delete(r.m.tim[dd], y)
					r.timers.deleted++
				} else if !r.budgetOK(err) {
					return fmt.Errorf("delete inside a callback: %w", err)
				}
			}
		}
		return nil
	}
	var err error
	if d == int(timer.EventTime) {
		err = st.tim.AdvanceWatermark(to, fn)
	} else {
		err = st.tim.AdvanceProcessingTime(to, fn)
	}
	if err != nil {
		if r.budgetOK(err) {
			return nil // the timers fired before the refusal are fired in the model too
		}
		return err
	}
	for y := range r.m.tim[d] {
		if y.ts <= to {
			return fmt.Errorf("%w: %v advance to %d left due timer %v pending", errMismatch, timer.Domain(d), to, y)
		}
	}
	return nil
}

// timerFinale registers an event-time timer due now and advances the watermark to fire it
// (TestModel, when a short run's draws fired none).
func (r *modelRun) timerFinale() error {
	slot := r.pick()
	ts := r.st.timerNow(int(timer.EventTime))
	if err := r.write(slot, func() error { return r.st.timerRegister(int(timer.EventTime), slot, ts) }, func() {
		r.m.tim[timer.EventTime][mtimer{slot, ts}] = true
		r.timers.registered++
	}); err != nil {
		return err
	}
	for r.timers.fired == 0 {
		if err := r.timerAdvance(0); err != nil {
			return err
		}
		if len(r.m.tim[0])+len(r.m.tim[1]) == 0 && r.timers.fired == 0 {
			return errors.New("no timer pending and none fired")
		}
	}
	return nil
}
