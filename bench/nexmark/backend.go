package nexmark

import (
	"encoding/binary"
	"fmt"

	"github.com/strata-db/strata"
)

// Backend holds the keyed state and timers of one query: Strata (StrataBackend) or the plain
// Go model (ModelBackend). The queries are written once over the state kinds below (Value,
// List, Timers), whose constructors (NewValue, NewList, NewTimers) take either back-end, so
// that the two run the same operator code and differ only in where the state lives.
//
// Keys are any comparable K (with a strata.Codec[K] for Strata); namespaces are int64 (a
// window's end, a day; Void outside windows). Use a Backend from one goroutine.
type Backend interface {
	// Name is "strata" or "model".
	Name() string
}

// Void is the namespace of state outside any window (Flink's VoidNamespace): the empty
// namespace on Strata.
const Void int64 = 0

// ModelBackend keeps state in Go maps and timers in a binary heap, as plain Go values: no
// serialization, no budget, nothing durable. It is the ratio's denominator, like the flight
// demo's Go model.
type ModelBackend struct{}

// Name returns "model".
func (*ModelBackend) Name() string { return "model" }

// StrataBackend keeps state in a Strata Store: a ValueState, ListState or TimerService per
// state of the query, keys encoded by their codecs and namespaces as 8 bytes big-endian.
type StrataBackend struct{ Store *strata.Store }

// Name returns "strata".
func (*StrataBackend) Name() string { return "strata" }

// Value is a value per key and namespace, as Flink's ValueState. Errors are the back-end's
// (Strata's ErrMemoryBudget, ErrCorruption, ...); the model never fails.
type Value[K comparable, T any] interface {
	Get(k K, ns int64) (T, bool, error)
	Put(k K, ns int64, v T) error
	Clear(k K, ns int64) error
}

// List is a list per key and namespace, as Flink's ListState: Add appends; ForEach calls fn
// for each element, oldest first (fn must not write the back-end).
type List[K comparable, T any] interface {
	Add(k K, ns int64, v T) error
	ForEach(k K, ns int64, fn func(T) error) error
	Clear(k K, ns int64) error
}

// Map is a map per key and namespace, as Flink's MapState: Get, Put and Remove one user key;
// ForEach calls fn for each entry, in an order of the back-end's (fn must not write the
// back-end; the value is valid during the call).
type Map[K, UK comparable, UV any] interface {
	Get(k K, ns int64, uk UK) (UV, bool, error)
	Put(k K, ns int64, uk UK, v UV) error
	Remove(k K, ns int64, uk UK) error
	ForEach(k K, ns int64, fn func(UK, UV) error) error
}

// Timers are the timers of one service, as Flink's InternalTimerService of one time domain:
// at most one per (key, namespace, timestamp). Advance fires, in timestamp order, every timer
// at or before t and removes it (ties in an order of the back-end's: the queries' outputs do
// not depend on it). fn must not register timers at or before t.
type Timers[K comparable] interface {
	Register(k K, ns, ts int64) error
	Delete(k K, ns, ts int64) error
	Advance(t int64, fn func(k K, ns, ts int64) error) error
	Len() int
}

// NewValue returns the value state name of b; kc and vc serialize keys and values on Strata.
func NewValue[K comparable, T any](b Backend, name string, kc strata.Codec[K], vc strata.Codec[T]) (Value[K, T], error) {
	switch b := b.(type) {
	case *ModelBackend:
		return mValue[K, T]{}, nil
	case *StrataBackend:
		st, err := strata.NewValueState(b.Store, strata.ValueDescriptor[T]{Name: name, Codec: vc})
		if err != nil {
			return nil, err
		}
		return &sValue[K, T]{sKey: sKey[K]{s: b.Store, kc: kc}, st: st}, nil
	}
	return nil, fmt.Errorf("nexmark: unknown back-end %T", b)
}

// NewList returns the list state name of b.
func NewList[K comparable, T any](b Backend, name string, kc strata.Codec[K], vc strata.Codec[T]) (List[K, T], error) {
	switch b := b.(type) {
	case *ModelBackend:
		return mList[K, T]{}, nil
	case *StrataBackend:
		st, err := strata.NewListState(b.Store, strata.ListDescriptor[T]{Name: name, Codec: vc})
		if err != nil {
			return nil, err
		}
		return &sList[K, T]{sKey: sKey[K]{s: b.Store, kc: kc}, st: st}, nil
	}
	return nil, fmt.Errorf("nexmark: unknown back-end %T", b)
}

// NewMap returns the map state name of b; kc, ukc and vc serialize keys, user keys and values
// on Strata.
func NewMap[K, UK comparable, UV any](b Backend, name string, kc strata.Codec[K], ukc strata.Codec[UK], vc strata.Codec[UV]) (Map[K, UK, UV], error) {
	switch b := b.(type) {
	case *ModelBackend:
		return mMap[K, UK, UV]{}, nil
	case *StrataBackend:
		st, err := strata.NewMapState(b.Store, strata.MapDescriptor[UK, UV]{Name: name, KeyCodec: ukc, ValueCodec: vc})
		if err != nil {
			return nil, err
		}
		return &sMap[K, UK, UV]{sKey: sKey[K]{s: b.Store, kc: kc}, st: st}, nil
	}
	return nil, fmt.Errorf("nexmark: unknown back-end %T", b)
}

// NewTimers returns the timer service name of b, in event time, or in processing time when
// processing is set (Strata's RegisterProcessingTimeTimer and AdvanceProcessingTime).
func NewTimers[K comparable](b Backend, name string, kc strata.Codec[K], processing bool) (Timers[K], error) {
	switch b := b.(type) {
	case *ModelBackend:
		return &mTimers[K]{set: map[mTimer[K]]struct{}{}}, nil
	case *StrataBackend:
		ts, err := strata.NewTimerService(b.Store, strata.TimerServiceDescriptor[int64]{Name: name, NamespaceCodec: strata.Int64})
		if err != nil {
			return nil, err
		}
		t := &sTimers[K]{sKey: sKey[K]{s: b.Store, kc: kc}, ts: ts, proc: processing}
		t.fire = func(tm strata.Timer[int64]) error {
			k, err := t.kc.Decode(tm.Key.Bytes())
			if err != nil {
				return err
			}
			return t.fn(k, tm.Namespace, tm.Timestamp)
		}
		return t, nil
	}
	return nil, fmt.Errorf("nexmark: unknown back-end %T", b)
}

// --- the Go model ---

type mKey[K comparable] struct {
	k  K
	ns int64
}

type mValue[K comparable, T any] map[mKey[K]]T

func (m mValue[K, T]) Get(k K, ns int64) (T, bool, error) {
	v, ok := m[mKey[K]{k, ns}]
	return v, ok, nil
}
func (m mValue[K, T]) Put(k K, ns int64, v T) error { m[mKey[K]{k, ns}] = v; return nil }
func (m mValue[K, T]) Clear(k K, ns int64) error    { delete(m, mKey[K]{k, ns}); return nil }

type mList[K comparable, T any] map[mKey[K]][]T

func (m mList[K, T]) Add(k K, ns int64, v T) error {
	mk := mKey[K]{k, ns}
	m[mk] = append(m[mk], v)
	return nil
}
func (m mList[K, T]) ForEach(k K, ns int64, fn func(T) error) error {
	for _, v := range m[mKey[K]{k, ns}] {
		if err := fn(v); err != nil {
			return err
		}
	}
	return nil
}
func (m mList[K, T]) Clear(k K, ns int64) error { delete(m, mKey[K]{k, ns}); return nil }

type mMap[K, UK comparable, UV any] map[mKey[K]]map[UK]UV

func (m mMap[K, UK, UV]) Get(k K, ns int64, uk UK) (UV, bool, error) {
	v, ok := m[mKey[K]{k, ns}][uk]
	return v, ok, nil
}
func (m mMap[K, UK, UV]) Put(k K, ns int64, uk UK, v UV) error {
	mk := mKey[K]{k, ns}
	um := m[mk]
	if um == nil {
		um = map[UK]UV{}
		m[mk] = um
	}
	um[uk] = v
	return nil
}
func (m mMap[K, UK, UV]) Remove(k K, ns int64, uk UK) error {
	mk := mKey[K]{k, ns}
	if um := m[mk]; um != nil {
		delete(um, uk)
		if len(um) == 0 {
			delete(m, mk)
		}
	}
	return nil
}
func (m mMap[K, UK, UV]) ForEach(k K, ns int64, fn func(UK, UV) error) error {
	for uk, v := range m[mKey[K]{k, ns}] {
		if err := fn(uk, v); err != nil {
			return err
		}
	}
	return nil
}

type mTimer[K comparable] struct {
	ts, ns int64
	k      K
}

// mTimers is a binary min-heap by timestamp with the pending set beside it: Delete removes
// from the set only, and Advance skips heap entries no longer in it.
type mTimers[K comparable] struct {
	set map[mTimer[K]]struct{}
	h   []mTimer[K]
}

func (t *mTimers[K]) Len() int { return len(t.set) }

func (t *mTimers[K]) Register(k K, ns, ts int64) error {
	x := mTimer[K]{ts, ns, k}
	if _, ok := t.set[x]; ok {
		return nil
	}
	t.set[x] = struct{}{}
	t.h = append(t.h, x)
	for i := len(t.h) - 1; i > 0; {
		p := (i - 1) / 2
		if t.h[p].ts <= t.h[i].ts {
			break
		}
		t.h[p], t.h[i] = t.h[i], t.h[p]
		i = p
	}
	return nil
}

func (t *mTimers[K]) Delete(k K, ns, ts int64) error {
	delete(t.set, mTimer[K]{ts, ns, k})
	return nil
}

func (t *mTimers[K]) pop() mTimer[K] {
	x := t.h[0]
	n := len(t.h) - 1
	t.h[0] = t.h[n]
	t.h = t.h[:n]
	for i := 0; ; {
		l, s := 2*i+1, i
		if l < n && t.h[l].ts < t.h[s].ts {
			s = l
		}
		if r := l + 1; r < n && t.h[r].ts < t.h[s].ts {
			s = r
		}
		if s == i {
			break
		}
		t.h[i], t.h[s] = t.h[s], t.h[i]
		i = s
	}
	return x
}

func (t *mTimers[K]) Advance(now int64, fn func(k K, ns, ts int64) error) error {
	for len(t.h) > 0 && t.h[0].ts <= now {
		x := t.pop()
		if _, ok := t.set[x]; !ok {
			continue
		}
		delete(t.set, x)
		if err := fn(x.k, x.ns, x.ts); err != nil {
			return err
		}
	}
	return nil
}

// --- Strata ---

// sKey makes the strata.Key of a key and namespace in buffers it reuses: the Key is valid
// until the next call.
type sKey[K comparable] struct {
	s  *strata.Store
	kc strata.Codec[K]
	kb []byte
	nb [8]byte
}

func (s *sKey[K]) key(k K, ns int64) strata.Key {
	s.kb = s.kc.Append(s.kb[:0], k)
	key := s.s.Key(s.kb)
	if ns != Void {
		binary.BigEndian.PutUint64(s.nb[:], uint64(ns))
		key = key.In(s.nb[:])
	}
	return key
}

type sValue[K comparable, T any] struct {
	sKey[K]
	st *strata.ValueState[T]
}

func (v *sValue[K, T]) Get(k K, ns int64) (T, bool, error) { return v.st.Get(v.key(k, ns)) }
func (v *sValue[K, T]) Put(k K, ns int64, x T) error       { return v.st.Put(v.key(k, ns), x) }
func (v *sValue[K, T]) Clear(k K, ns int64) error          { return v.st.Clear(v.key(k, ns)) }

type sMap[K, UK comparable, UV any] struct {
	sKey[K]
	st *strata.MapState[UK, UV]
}

func (m *sMap[K, UK, UV]) Get(k K, ns int64, uk UK) (UV, bool, error) {
	return m.st.Get(m.key(k, ns), uk)
}
func (m *sMap[K, UK, UV]) Put(k K, ns int64, uk UK, v UV) error {
	return m.st.Put(m.key(k, ns), uk, v)
}
func (m *sMap[K, UK, UV]) Remove(k K, ns int64, uk UK) error {
	return m.st.Remove(m.key(k, ns), uk)
}
func (m *sMap[K, UK, UV]) ForEach(k K, ns int64, fn func(UK, UV) error) error {
	it := m.st.Iterator(m.key(k, ns))
	for it.Next() {
		if err := fn(it.Key(), it.Value()); err != nil {
			return err
		}
	}
	return it.Err()
}

type sList[K comparable, T any] struct {
	sKey[K]
	st *strata.ListState[T]
}

func (l *sList[K, T]) Add(k K, ns int64, x T) error { return l.st.Add(l.key(k, ns), x) }
func (l *sList[K, T]) Clear(k K, ns int64) error    { return l.st.Clear(l.key(k, ns)) }
func (l *sList[K, T]) ForEach(k K, ns int64, fn func(T) error) error {
	it := l.st.Get(l.key(k, ns))
	for it.Next() {
		if err := fn(it.Value()); err != nil {
			return err
		}
	}
	return it.Err()
}

type sTimers[K comparable] struct {
	sKey[K]
	ts   *strata.TimerService[int64]
	proc bool
	fn   func(k K, ns, ts int64) error
	fire func(strata.Timer[int64]) error
}

func (t *sTimers[K]) Len() int {
	if t.proc {
		return t.ts.NumProcessingTimeTimers()
	}
	return t.ts.NumEventTimeTimers()
}

func (t *sTimers[K]) Register(k K, ns, ts int64) error {
	if t.proc {
		return t.ts.RegisterProcessingTimeTimer(t.key(k, Void), ns, ts)
	}
	return t.ts.RegisterEventTimeTimer(t.key(k, Void), ns, ts)
}

func (t *sTimers[K]) Delete(k K, ns, ts int64) error {
	if t.proc {
		return t.ts.DeleteProcessingTimeTimer(t.key(k, Void), ns, ts)
	}
	return t.ts.DeleteEventTimeTimer(t.key(k, Void), ns, ts)
}

func (t *sTimers[K]) Advance(now int64, fn func(k K, ns, ts int64) error) error {
	t.fn = fn
	if t.proc {
		return t.ts.AdvanceProcessingTime(now, t.fire)
	}
	return t.ts.AdvanceWatermark(now, t.fire)
}
