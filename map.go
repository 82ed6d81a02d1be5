package strata

import (
	"iter"

	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/internal/engine"
)

// MapDescriptor describes a map state: a map from user keys UK to values UV per key and
// namespace, as Flink's MapStateDescriptor.
type MapDescriptor[UK, UV any] struct {
	Name       string    // unique per Store
	KeyCodec   Codec[UK] // user-key codec, required; equal user keys must encode equally
	ValueCodec Codec[UV] // value codec, required
	// TTL, when not nil, gives each entry a time to live (TTLConfig, Flink's
	// StateTtlConfig); nil: entries never expire.
	TTL *TTLConfig
}

// MapState is a map of user keys to values per key and namespace, as Flink's MapState.
// Each (key, namespace) map is a nested index in the FreshTable, so Get, Put and Remove of one
// user key touch only that entry. User keys are hashed with go-metro, independently of the
// xxh3 key hash. Use from the Store's goroutine only.
//
// With a TTL (MapDescriptor.TTL) each entry's value carries its last write time
// (base.TTLMap), and Get, Contains, IsEmpty and iteration follow Flink's TtlMapState: they skip
// the expired entries they meet and remove them (writes), see TTLConfig.
type MapState[UK, UV any] struct {
	stateBase
	kc  Codec[UK]
	vc  Codec[UV]
	eit MapIterator[UK, UV] // IsEmpty's iteration with a TTL
}

// NewMapState registers d on s, or returns the map state registered under d.Name before (same
// codecs). Errors: ErrIncompatibleState (another kind, codec or type), ErrClosed.
func NewMapState[UK, UV any](s *Store, d MapDescriptor[UK, UV]) (*MapState[UK, UV], error) {
	return registerTTL(s, d.Name, kindMap, [2]any{d.KeyCodec, d.ValueCodec}, d.TTL, func(b stateBase) *MapState[UK, UV] {
		return &MapState[UK, UV]{stateBase: b, kc: d.KeyCodec, vc: d.ValueCodec}
	})
}

// Get returns the value of user key uk in the map of k and true, or the zero UV and false when
// absent, as Flink's MapState.get returning null. Errors: ErrKeyGroupOutOfRange, ErrClosed,
// ErrCorruption.
func (m *MapState[UK, UV]) Get(k Key, uk UK) (UV, bool, error) {
	s := m.s
	mk, hm, err := s.beginHot(k, m.idAt(k))
	defer s.exit()
	var zero UV
	if err != nil {
		return zero, false, m.wrap("get", err)
	}
	s.ubuf = m.kc.Append(s.ubuf[:0], uk)
	var b []byte
	var st status
	if m.ttl != nil {
		if b, st, err = m.getTTL(mk, hm); err != nil {
			return zero, false, m.wrap("get", err)
		}
	} else if b, st, err = m.mapGet(mk, hm); err != nil {
		return zero, false, m.wrap("get", err)
	}
	if st != found {
		if st == failed {
			return zero, false, m.wrap("get", s.e.TakeErr())
		}
		return zero, false, nil
	}
	v, err := m.vc.Decode(b)
	if err != nil {
		return zero, false, m.wrap("get", err)
	}
	return v, true, nil
}

// Contains reports whether the map of k has user key uk, as Flink's MapState.contains.
// Errors: ErrKeyGroupOutOfRange, ErrClosed.
func (m *MapState[UK, UV]) Contains(k Key, uk UK) (bool, error) {
	s := m.s
	mk, hm, err := s.beginHot(k, m.idAt(k))
	defer s.exit()
	if err != nil {
		return false, m.wrap("contains", err)
	}
	s.ubuf = m.kc.Append(s.ubuf[:0], uk)
	var st status
	if m.ttl != nil {
		if _, st, err = m.getTTL(mk, hm); err != nil {
			return false, m.wrap("contains", err)
		}
	} else if _, st, err = m.mapGet(mk, hm); err != nil {
		return false, m.wrap("contains", err)
	}
	if st == failed {
		return false, m.wrap("contains", s.e.TakeErr())
	}
	return st == found, nil
}

// getTTL reads the entry of the user key in s.ubuf in map mk (hash hm) of a map with a TTL,
// as Flink's TtlMapState.getWrapped: an expired entry is removed (and returned, copied, only
// with TTLReturnExpiredIfNotCleanedUp), an unexpired one returned, rewritten with the current
// time first with TTLOnReadAndWrite. It returns the codec bytes, valid until the next write.
// Inside the guard.
func (m *MapState[UK, UV]) getTTL(mk []byte, hm uint64) ([]byte, status, error) {
	s, t := m.s, m.ttl
	if err := m.ttlAccess(); err != nil {
		return nil, failed, err
	}
	raw, st := s.e.MapGet(hm, mk, base.HashUserKey(s.ubuf), s.ubuf)
	if st != found {
		if st == failed {
			return nil, failed, s.e.TakeErr()
		}
		return nil, st, nil
	}
	ts, ok := base.TS(raw)
	if !ok {
		return nil, failed, m.shortTTL(len(raw))
	}
	now := s.clock()
	if base.Expired(ts, t.ms, now) {
		return m.expiredEntry(mk, hm, raw)
	}
	if t.onRead {
		s.vbuf = append(base.AppendTS(s.vbuf[:0], now), raw[base.TSLen:]...)
		if err := s.apply(engine.OpMapPut, mk, hm, s.ubuf, s.vbuf); err != nil {
			return nil, failed, err
		}
		return s.vbuf[base.TSLen:], found, nil
	}
	return raw[base.TSLen:], found, nil
}

// expiredEntry removes the expired entry of the user key in s.ubuf (value raw) and returns
// a copy of its codec bytes with TTLReturnExpiredIfNotCleanedUp, or absent.
//
//go:noinline
func (m *MapState[UK, UV]) expiredEntry(mk []byte, hm uint64, raw []byte) ([]byte, status, error) {
	var keep []byte
	if m.ttl.returnExpired {
		keep = append([]byte{}, raw[base.TSLen:]...)
	}
	if err := m.s.apply(engine.OpMapRemove, mk, hm, m.s.ubuf, nil); err != nil {
		return nil, failed, err
	}
	if keep == nil {
		return nil, absent, nil
	}
	return keep, found, nil
}

// Put sets user key uk to uv in the map of k, as Flink's MapState.put. Errors:
// ErrKeyGroupOutOfRange, ErrClosed, ErrKeyTooLarge, ErrValueTooLarge, ErrMemoryBudget.
func (m *MapState[UK, UV]) Put(k Key, uk UK, uv UV) error {
	s := m.s
	mk, hm, err := s.beginHot(k, m.idAt(k))
	defer s.exit()
	if err != nil {
		return m.wrap("put", err)
	}
	return m.put(mk, hm, uk, uv)
}

// put writes uk = uv into the map mk (hash hm), inside a begin/exit of the guard; with a TTL,
// stamped with the clock.
func (m *MapState[UK, UV]) put(mk []byte, hm uint64, uk UK, uv UV) error {
	s := m.s
	s.vbuf = s.vbuf[:0]
	if m.ttl != nil {
		if err := m.ttlAccess(); err != nil {
			return m.wrap("put", err)
		}
		s.vbuf = base.AppendTS(s.vbuf, s.clock())
	}
	s.ubuf = m.kc.Append(s.ubuf[:0], uk)
	s.vbuf = m.vc.Append(s.vbuf, uv)
	if err := m.mapWrite(engine.OpMapPut, mk, hm, s.vbuf); err != nil {
		return m.wrap("put", err)
	}
	return nil
}

// mapGet reads the user key in s.ubuf of map mk (hash hm) through the state's hot table, or
// from the engine when it has none (no TTL). Inside beginHot.
func (m *MapState[UK, UV]) mapGet(mk []byte, hm uint64) ([]byte, status, error) {
	s := m.s
	if t := m.hotTab(); t != nil {
		v, st := s.hotMapGet(t, hm, mk, s.ubuf)
		return v, st, nil
	}
	v, st := s.e.MapGet(hm, mk, base.HashUserKey(s.ubuf), s.ubuf)
	return v, st, nil
}

// mapWrite writes kind (OpMapPut with v, OpMapRemove) of the user key in s.ubuf to map mk
// (hash hm) through the state's hot table, or to the engine when it has none.
func (m *MapState[UK, UV]) mapWrite(kind engine.OpKind, mk []byte, hm uint64, v []byte) error {
	s := m.s
	if t := m.hotTab(); t != nil {
		return s.hotWrite(t, kind, mk, hm, s.ubuf, v)
	}
	return s.apply(kind, mk, hm, s.ubuf, v)
}

// PutAll puts every entry of entries into the map of k, as Flink's MapState.putAll, stopping
// at the first error: the entries put before it stay (Flink's putAll is not atomic either).
// k is checked before entries is started, so an empty entries still reports
// ErrKeyGroupOutOfRange and ErrClosed. entries runs on the caller's goroutine and may use the
// Store. Errors as Put.
func (m *MapState[UK, UV]) PutAll(k Key, entries iter.Seq2[UK, UV]) error {
	s := m.s
	s.enter(opHot) // point writes: the hot tier stays (hot.go)
	err := s.check(k)
	s.exit()
	if err != nil {
		return m.wrap("put all", err)
	}
	entries(func(uk UK, uv UV) bool {
		var mk []byte
		var hm uint64
		if mk, hm, err = s.beginHot(k, m.idAt(k)); err == nil { // again: entries may have closed the Store
			err = m.put(mk, hm, uk, uv)
		} else {
			err = m.wrap("put", err)
		}
		s.exit()
		return err == nil
	})
	return err
}

// Remove deletes user key uk from the map of k, as Flink's MapState.remove; removing an
// absent user key is not an error. Errors: ErrKeyGroupOutOfRange, ErrClosed, ErrKeyTooLarge,
// ErrMemoryBudget.
func (m *MapState[UK, UV]) Remove(k Key, uk UK) error {
	s := m.s
	mk, hm, err := s.beginHot(k, m.idAt(k))
	defer s.exit()
	if err != nil {
		return m.wrap("remove", err)
	}
	if m.ttl != nil {
		if err := m.ttlAccess(); err != nil {
			return m.wrap("remove", err)
		}
	}
	s.ubuf = m.kc.Append(s.ubuf[:0], uk)
	if err := m.mapWrite(engine.OpMapRemove, mk, hm, nil); err != nil {
		return m.wrap("remove", err)
	}
	return nil
}

// IsEmpty reports whether the map of k has no entry, as Flink's MapState.isEmpty: true for an
// absent or cleared map and after every entry was removed. Errors: ErrKeyGroupOutOfRange,
// ErrClosed. With a TTL, true when every entry has expired (IsEmpty then removes them, as an
// iteration does).
func (m *MapState[UK, UV]) IsEmpty(k Key) (bool, error) {
	if m.ttl != nil {
		// Flink's !iterator().hasNext(): expired entries met on the way are removed. The
		// iterator is the state's own, for its buffers (IsEmpty calls no user code).
		it := &m.eit
		*it = MapIterator[UK, UV]{mk: it.mk[:0], kept: it.kept[:0]}
		m.iterator(k, it)
		empty := !it.Next()
		it.it.Close()
		if err := it.Err(); err != nil {
			return false, m.wrap("is empty", err)
		}
		return empty, nil
	}
	s := m.s
	mk, hm, err := s.begin(k, m.idAt(k))
	defer s.exit()
	if err != nil {
		return false, m.wrap("is empty", err)
	}
	it := s.e.MapIter(hm, mk)
	empty := !it.Next()
	it.Close()
	if empty && it.Err() != nil {
		return false, m.wrap("is empty", it.Err())
	}
	return empty, nil
}

// Clear removes the whole map of k (its key in its namespace only), as Flink's State.clear;
// clearing an absent map is not an error. Errors: ErrKeyGroupOutOfRange, ErrClosed,
// ErrMemoryBudget.
func (m *MapState[UK, UV]) Clear(k Key) error {
	s := m.s
	mk, hm, err := s.begin(k, m.idAt(k))
	defer s.exit()
	if err != nil {
		return m.wrap("clear", err)
	}
	if m.ttl != nil {
		if err := m.ttlAccess(); err != nil {
			return m.wrap("clear", err)
		}
	}
	if err := s.apply(engine.OpMapClear, mk, hm, nil, nil); err != nil {
		return m.wrap("clear", err)
	}
	return nil
}

// Iterator returns an iterator over the entries of the map of k, in no particular order, as
// Flink's MapState.iterator. The Store (this map included) may be written while iterating:
// MapIterator.Remove removes the current entry, and Put of the current user key updates it,
// without disturbing the iteration; entries put during the iteration may or may not be seen.
// Errors are reported by the iterator's Err.
func (m *MapState[UK, UV]) Iterator(k Key) *MapIterator[UK, UV] {
	it := &MapIterator[UK, UV]{}
	m.iterator(k, it)
	return it
}

func (m *MapState[UK, UV]) iterator(k Key, it *MapIterator[UK, UV]) {
	s := m.s
	mk, hm, err := s.begin(k, m.idAt(k))
	defer s.exit()
	it.m = m
	if err != nil {
		it.err = m.wrap("iterate", err)
		return
	}
	if m.ttl != nil {
		if err := m.ttlAccess(); err != nil {
			it.err = m.wrap("iterate", err)
			return
		}
	}
	it.mk = append(it.mk[:0], mk...)
	it.hm = hm
	it.it = s.e.MapIter(hm, it.mk)
	it.it.Hold()
	it.ok = true
}

// Entries returns the entries of the map of k as a sequence, as Flink's MapState.entries, and
// a function that reports the error that ended the last range over the sequence early:
// ErrKeyGroupOutOfRange, ErrClosed, ErrCorruption (a damaged file, a codec's Decode),
// ErrIteratorInvalidated — nil when the range ran to its end or the loop broke out of it. A
// sequence that stops early is never silent (Flink's FLINK-9373 hid such errors): check the
// function after every range.
//
//	seq, errf := m.Entries(k)
//	for uk, uv := range seq { ... }
//	if err := errf(); err != nil { ... }
//
// Writes during the iteration behave as for Iterator; each range starts a new iteration.
func (m *MapState[UK, UV]) Entries(k Key) (iter.Seq2[UK, UV], func() error) {
	var err error
	return func(yield func(UK, UV) bool) {
		err = m.each(k, func(it *MapIterator[UK, UV]) bool {
			uk, uv := it.Key(), it.Value()
			return it.err == nil && yield(uk, uv)
		})
	}, func() error { return err }
}

// Keys returns the user keys of the map of k, as Flink's MapState.keys, with the error
// function of Entries.
func (m *MapState[UK, UV]) Keys(k Key) (iter.Seq[UK], func() error) {
	var err error
	return func(yield func(UK) bool) {
		err = m.each(k, func(it *MapIterator[UK, UV]) bool {
			uk := it.Key()
			return it.err == nil && yield(uk)
		})
	}, func() error { return err }
}

// Values returns the values of the map of k, as Flink's MapState.values, with the error
// function of Entries.
func (m *MapState[UK, UV]) Values(k Key) (iter.Seq[UV], func() error) {
	var err error
	return func(yield func(UV) bool) {
		err = m.each(k, func(it *MapIterator[UK, UV]) bool {
			uv := it.Value()
			return it.err == nil && yield(uv)
		})
	}, func() error { return err }
}

// each runs f on every entry of the map of k until f returns false, and returns the error
// that ended the iteration or that f's Key/Value calls recorded (nil at the end or when f
// stopped without one).
func (m *MapState[UK, UV]) each(k Key, f func(*MapIterator[UK, UV]) bool) error {
	var it MapIterator[UK, UV]
	m.iterator(k, &it)
	defer it.it.Close()
	for it.Next() {
		if !f(&it) {
			break
		}
	}
	return it.Err()
}

// MapIterator iterates the entries of one map, as returned by MapState.Iterator:
//
//	it := m.Iterator(k)
//	for it.Next() {
//		if drop(it.Key()) {
//			if err := it.Remove(); err != nil { ... }
//		}
//	}
//	if err := it.Err(); err != nil { ... }
//
// Key and Value decode on each call; Value reflects writes to the current user key made since
// Next (see Value). Use from the Store's goroutine only.
type MapIterator[UK, UV any] struct {
	m   *MapState[UK, UV]
	mk  []byte // composite map key (own copy: the Store's scratch is reused while iterating)
	hm  uint64
	it  engine.MapIter
	ok  bool   // it is valid and not exhausted
	has bool   // there is a current entry (Next returned true and Remove was not called)
	seq uint64 // the table's sequence number when Next moved to the current entry
	err error
	// TTL: the current entry was expired and is removed already; its user key and value
	// (without the timestamp) are copies in kept (TTLReturnExpiredIfNotCleanedUp).
	gone bool
	kept []byte
	kuk  int // len of the user key at the start of kept
}

// Next advances to the next entry and reports whether there is one; false at the end and
// after an error (see Err).
func (it *MapIterator[UK, UV]) Next() bool {
	if !it.ok || it.Err() != nil {
		return false
	}
	if it.m.s.closed {
		it.err = it.m.wrap("iterate", ErrClosed)
		return false
	}
	it.m.s.enter(opCall)
	ok := it.it.Next()
	if ok && it.m.ttl != nil {
		ok = it.nextTTL()
	}
	it.seq = it.m.s.e.Seq()
	it.m.s.exit()
	it.ok, it.has = ok, ok
	if !ok && it.err == nil && it.it.Err() != nil {
		it.err = it.m.wrap("iterate", it.it.Err())
	}
	return ok
}

// nextTTL applies the TTL to the entry the engine iterator is on and the ones after, as the
// EntriesIterator of Flink's TtlMapState: an expired entry is removed (and is the current
// entry, from a copy, with TTLReturnExpiredIfNotCleanedUp; otherwise the iteration moves on),
// an unexpired one is the current entry, rewritten with the current time first with
// TTLOnReadAndWrite. It reports whether there is a current entry. Inside the guard.
func (it *MapIterator[UK, UV]) nextTTL() bool {
	s, t := it.m.s, it.m.ttl
	now := s.clock()
	it.gone = false
	for {
		raw := it.it.Value()
		ts, ok := base.TS(raw)
		if !ok {
			it.err = it.m.wrap("iterate", it.m.shortTTL(len(raw)))
			return false
		}
		s.ubuf = append(s.ubuf[:0], it.it.UserKey()...)
		if base.Expired(ts, t.ms, now) {
			if t.returnExpired {
				it.kept = append(append(it.kept[:0], s.ubuf...), raw[base.TSLen:]...)
				it.kuk = len(s.ubuf)
			}
			if err := s.apply(engine.OpMapRemove, it.mk, it.hm, s.ubuf, nil); err != nil {
				it.err = it.m.wrap("iterate", err)
				return false
			}
			if t.returnExpired {
				it.gone = true
				return true
			}
		} else {
			if t.onRead {
				s.vbuf = append(base.AppendTS(s.vbuf[:0], now), raw[base.TSLen:]...)
				if err := s.apply(engine.OpMapPut, it.mk, it.hm, s.ubuf, s.vbuf); err != nil {
					it.err = it.m.wrap("iterate", err)
					return false
				}
			}
			return true
		}
		if !it.it.Next() {
			return false
		}
	}
}

// Key returns the current user key, decoded (zero UK without a current entry or after a
// decode error, see Err).
func (it *MapIterator[UK, UV]) Key() UK {
	if !it.ok || it.closed() || (!it.gone && it.invalid()) {
		var zero UK
		return zero
	}
	ukb := it.it.UserKey()
	if it.gone {
		ukb = it.kept[:it.kuk]
	}
	uk, err := it.m.kc.Decode(ukb)
	if err != nil && it.err == nil {
		it.err = it.m.wrap("iterate", err)
	}
	return uk
}

// Value returns the current value, decoded (zero UV without a current entry or after a decode
// error, see Err). When the Store was written since Next, Value looks the user key up again
// and returns its value now, as the entry of Flink's heap MapState iterator reflects a put of
// its key (MapState.Put of the current user key may rewrite its bytes in place), or zero UV
// when the entry has been removed since (MapIterator.Remove, MapState.Remove or Clear).
// Values of aliasing codecs (Bytes) are valid until the next write to the Store.
func (it *MapIterator[UK, UV]) Value() UV {
	var zero UV
	if it.gone && it.ok && !it.closed() {
		uv, err := it.m.vc.Decode(it.kept[it.kuk:])
		if err != nil && it.err == nil {
			it.err = it.m.wrap("iterate", err)
		}
		return uv
	}
	if !it.ok || it.closed() || it.invalid() {
		return zero
	}
	b := it.it.Value()
	if it.m.ttl != nil {
		b = b[base.TSLen:] // nextTTL checked its length
	}
	if t := it.m.hotTab(); t != nil {
		// A put or remove of this user key since Next is in the hot tier (hot.go, H1).
		if v, present, ok := it.m.s.hotMapLookup(t, it.hm, it.mk, it.it.UserKey()); ok {
			if !present {
				return zero
			}
			uv, err := it.m.vc.Decode(v)
			if err != nil && it.err == nil {
				it.err = it.m.wrap("iterate", err)
			}
			return uv
		}
	}
	if s := it.m.s; s.e.Seq() != it.seq {
		s.enter(opCall)
		uk := it.it.UserKey() // user-key bytes are never rewritten in place
		v, st := s.e.MapGet(it.hm, it.mk, base.HashUserKey(uk), uk)
		s.exit()
		if st != found {
			if st == failed && it.err == nil {
				it.err = it.m.wrap("iterate", s.e.TakeErr())
			}
			return zero
		}
		b = v
		if it.m.ttl != nil {
			if len(b) < base.TSLen {
				if it.err == nil {
					it.err = it.m.wrap("iterate", it.m.shortTTL(len(b)))
				}
				return zero
			}
			b = b[base.TSLen:]
		}
	}
	uv, err := it.m.vc.Decode(b)
	if err != nil && it.err == nil {
		it.err = it.m.wrap("iterate", err)
	}
	return uv
}

// Remove removes the current entry from the map without disturbing the iteration, as the
// remove of Flink's MapState iterator. Without a current entry (before Next, after the end,
// or a second Remove of one entry) it returns ErrNoEntry, as Flink's IllegalStateException.
// Errors: ErrNoEntry, ErrClosed, ErrMemoryBudget.
func (it *MapIterator[UK, UV]) Remove() error {
	if !it.has {
		return it.m.wrap("iterator remove", ErrNoEntry)
	}
	s := it.m.s
	if s.closed {
		return it.m.wrap("iterator remove", ErrClosed)
	}
	if it.invalid() {
		return it.err
	}
	s.enter(opCall)
	defer s.exit()
	// Copied: a write may install background work that frees the memory the entry aliases.
	s.ubuf = append(s.ubuf[:0], it.it.UserKey()...)
	uk := s.ubuf
	if err := s.apply(engine.OpMapRemove, it.mk, it.hm, uk, nil); err != nil {
		return it.m.wrap("iterator remove", err)
	}
	it.has = false
	return nil
}

// closed reports (and records in Err) that the Store was closed under the iterator: its
// entries point into unmapped memory now.
func (it *MapIterator[UK, UV]) closed() bool {
	if !it.m.s.closed {
		return false
	}
	if it.err == nil {
		it.err = it.m.wrap("iterate", ErrClosed)
	}
	return true
}

// invalid reports (and records in Err) that background work moved or freed the memory the
// iteration walks (ErrIteratorInvalidated).
func (it *MapIterator[UK, UV]) invalid() bool {
	if it.it.Valid() {
		return false
	}
	it.ok, it.has = false, false
	if it.err == nil {
		it.err = it.m.wrap("iterate", it.it.Err())
	}
	return true
}

// Err returns the error that ended the iteration or a decode error of Key or Value, or nil:
// ErrKeyGroupOutOfRange, ErrClosed, ErrCorruption, or ErrIteratorInvalidated when the Store
// had to move the map's memory during a long iteration.
func (it *MapIterator[UK, UV]) Err() error { return it.err }
