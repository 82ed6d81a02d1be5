package strata

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/strata-db/strata/internal/base"
)

// TTL in the model (TestModel's "ttl" configuration): four states with a TTL of modelTTL
// milliseconds — a value state renewed on reads (TTLOnReadAndWrite), a list, a map with
// incremental cleanup and a reducing state (TTLOnCreateAndWrite), all TTLNeverReturnExpired,
// all cleaned up in compactions and full snapshots — and a clock (Options.Clock) that only the
// clock-jump step moves. The model keeps each value's timestamp and applies Flink's rules at
// every read: an expired value reads as absent and is forgotten (the Store removes it), a
// list skips expired elements and is forgotten when none is left, a map forgets the expired
// entries a read meets, the value state's reads renew it. Compactions, checkpoints and
// incremental cleanup remove only what has expired, which no later read can see (the clock
// never goes back), so the comparison is exact whatever they did.

// modelTTL is the TTL of the model's TTL states, in milliseconds.
const modelTTL = 1000

// modelClockStart is the clock at the start of a TTL run.
const modelClockStart = 1 << 40

// tsv is a model value or element with its timestamp.
type tsv struct {
	v  int64
	ts int64
}

// registerTTL registers the model's TTL states on st's Store.
func (st *modelStates) registerTTL(now func() int64, expired *int) error {
	s, ttl := st.s, modelTTL*time.Millisecond
	cl := TTLCleanup{FullSnapshot: true, QueryTimeAfterNumEntries: 7}
	st.now, st.expired = now, expired
	var err error
	if st.tv, err = NewValueState(s, ValueDescriptor[int64]{Name: "model-ttl-val", Codec: Int64,
		TTL: &TTLConfig{TTL: ttl, UpdateType: TTLOnReadAndWrite, Cleanup: cl}}); err != nil {
		return err
	}
	if st.tl, err = NewListState(s, ListDescriptor[int64]{Name: "model-ttl-lst", Codec: Int64,
		TTL: &TTLConfig{TTL: ttl, Cleanup: cl}}); err != nil {
		return err
	}
	inc := cl
	inc.IncrementalSize = 2
	if st.tm, err = NewMapState(s, MapDescriptor[string, int64]{Name: "model-ttl-map", KeyCodec: String, ValueCodec: Int64,
		TTL: &TTLConfig{TTL: ttl, Cleanup: inc}}); err != nil {
		return err
	}
	st.tr, err = NewReducingState(s, ReducingDescriptor[int64]{Name: "model-ttl-red", Codec: Int64, Reduce: modelReduce,
		TTL: &TTLConfig{TTL: ttl, Cleanup: cl}})
	return err
}

// ttlWrite draws one write of a TTL state, stamped with the clock.
func (r *modelRun) ttlWrite(slot int32) error {
	now := r.now.Load()
	m, st := r.m, r.st
	key := func() Key { return st.key(slot) }
	x := r.rng.Int64N(1 << 20)
	switch r.rng.IntN(11) {
	case 0, 1:
		return r.write(slot, func() error { return st.tv.Put(key(), x) }, func() { m.tv[slot] = tsv{x, now} })
	case 2:
		return r.write(slot, func() error { return st.tv.Clear(key()) }, func() { delete(m.tv, slot) })
	case 3:
		return r.write(slot, func() error { return st.tl.Add(key(), x) }, func() { m.tl[slot] = append(m.tl[slot], tsv{x, now}) })
	case 4, 5:
		xs := r.elems(r.rng.IntN(4))
		update := r.rng.IntN(2) == 0
		return r.write(slot, func() error {
			if update {
				return st.tl.Update(key(), xs)
			}
			return st.tl.AddAll(key(), xs)
		}, func() {
			l := m.tl[slot]
			if update {
				l = nil
			}
			for _, x := range xs {
				l = append(l, tsv{x, now})
			}
			if len(l) == 0 {
				delete(m.tl, slot)
			} else {
				m.tl[slot] = l
			}
		})
	case 6, 7:
		u := uint8(r.rng.IntN(len(modelUserKeys)))
		return r.write(slot, func() error { return st.tm.Put(key(), modelUserKeys[u], x) }, func() {
			if m.tm[slot] == nil {
				m.tm[slot] = map[uint8]tsv{}
			}
			m.tm[slot][u] = tsv{x, now}
		})
	case 8:
		u := uint8(r.rng.IntN(len(modelUserKeys)))
		return r.write(slot, func() error { return st.tm.Remove(key(), modelUserKeys[u]) }, func() {
			delete(m.tm[slot], u)
			if len(m.tm[slot]) == 0 {
				delete(m.tm, slot)
			}
		})
	case 9:
		return r.write(slot, func() error { return st.tr.Add(key(), x) }, func() {
			// Flink's TtlReduceFunction: an expired value is not reduced into.
			if old, ok := m.tr[slot]; ok && !base.Expired(old.ts, modelTTL, now) {
				x = modelReduce(old.v, x)
			}
			m.tr[slot] = tsv{x, now}
		})
	default:
		switch r.rng.IntN(3) {
		case 0:
			return r.write(slot, func() error { return st.tl.Clear(key()) }, func() { delete(m.tl, slot) })
		case 1:
			return r.write(slot, func() error { return st.tm.Clear(key()) }, func() { delete(m.tm, slot) })
		}
		return r.write(slot, func() error { return st.tr.Clear(key()) }, func() { delete(m.tr, slot) })
	}
}

// clockJump moves the clock forward: often to the edge of an expiry (inclusive: a value
// stamped ts expires at ts + modelTTL).
func (r *modelRun) clockJump(int32) error {
	d := []int64{1, 7, 100, modelTTL / 2, modelTTL - 1, modelTTL, modelTTL + 1, 2 * modelTTL}[r.rng.IntN(8)]
	r.now.Add(d)
	return nil
}

// ttlRead reads every TTL state of slot; such reads may write, so the values held before are
// checked and forgotten first.
func (r *modelRun) ttlRead(slot int32) error {
	if err := r.invalidate(); err != nil {
		return err
	}
	return r.st.checkTTL(r.m, slot)
}

// checkTTL compares the TTL states of slot with m at the clock's time, applying to m what the
// reads do to the Store: expired values are forgotten, the value state's is renewed.
func (st *modelStates) checkTTL(m *model, slot int32) error {
	now := st.now()
	k := st.key(slot)
	expired := func(ts int64) bool {
		if base.Expired(ts, modelTTL, now) {
			*st.expired++
			return true
		}
		return false
	}
	// Value, TTLOnReadAndWrite.
	v, ok, err := st.tv.Get(k)
	mv, mok := m.tv[slot]
	if mok && expired(mv.ts) {
		delete(m.tv, slot)
		mok = false
	}
	if err != nil || ok != mok || (ok && v != mv.v) {
		return fmt.Errorf("%w: slot %d TTL value = %d %v %v, model %+v %v (now %d)", errMismatch, slot, v, ok, err, mv, mok, now)
	}
	if mok {
		m.tv[slot] = tsv{mv.v, now}
	}
	// List: expired elements skipped; a list without an unexpired element is removed.
	var got, want []int64
	it := st.tl.Get(k)
	for it.Next() {
		got = append(got, it.Value())
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("slot %d TTL list: %w", slot, err)
	}
	for _, e := range m.tl[slot] {
		if !expired(e.ts) {
			want = append(want, e.v)
		}
	}
	if len(want) == 0 {
		delete(m.tl, slot)
	}
	if !slices.Equal(got, want) {
		return fmt.Errorf("%w: slot %d TTL list = %v, model %v (now %d)", errMismatch, slot, got, m.tl[slot], now)
	}
	// Map: the expired entries a read meets are removed.
	gm := map[uint8]int64{}
	mi := st.tm.Iterator(k)
	for mi.Next() {
		u := slices.Index(modelUserKeys[:], mi.Key())
		if u < 0 {
			return fmt.Errorf("%w: slot %d TTL map: user key %q", errMismatch, slot, mi.Key())
		}
		gm[uint8(u)] = mi.Value()
	}
	if err := mi.Err(); err != nil {
		return fmt.Errorf("slot %d TTL map: %w", slot, err)
	}
	wm := map[uint8]int64{}
	for u, e := range m.tm[slot] {
		if expired(e.ts) {
			delete(m.tm[slot], u)
		} else {
			wm[u] = e.v
		}
	}
	if len(m.tm[slot]) == 0 {
		delete(m.tm, slot)
	}
	if !maps.Equal(gm, wm) {
		return fmt.Errorf("%w: slot %d TTL map = %v, model %v (now %d)", errMismatch, slot, gm, m.tm[slot], now)
	}
	if e, err := st.tm.IsEmpty(k); err != nil || e != (len(wm) == 0) {
		return fmt.Errorf("%w: slot %d TTL map: IsEmpty = %v %v with %d entries", errMismatch, slot, e, err, len(wm))
	}
	// Reducing, TTLOnCreateAndWrite.
	rv, ok, err := st.tr.Get(k)
	mr, mok := m.tr[slot]
	if mok && expired(mr.ts) {
		delete(m.tr, slot)
		mok = false
	}
	if err != nil || ok != mok || (ok && rv != mr.v) {
		return fmt.Errorf("%w: slot %d TTL reducing = %d %v %v, model %+v %v (now %d)", errMismatch, slot, rv, ok, err, mr, mok, now)
	}
	return nil
}
