package strata

import (
	"bytes"

	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/internal/engine"
)

// ReducingDescriptor describes a reducing state: one value of type T per key and namespace,
// folded with Reduce on every Add, as Flink's ReducingStateDescriptor.
type ReducingDescriptor[T any] struct {
	Name  string   // unique per Store
	Codec Codec[T] // required
	// TTL, when not nil, gives the value a time to live (TTLConfig, Flink's
	// StateTtlConfig); nil: it never expires.
	TTL *TTLConfig
	// Reduce combines the stored value a with the added value b (Flink's
	// ReduceFunction.reduce(value1, value2)); required. It must not use the Store, and must not
	// modify a in place when the codec aliases the Store's memory (Bytes): return a new value.
	Reduce func(a, b T) T
}

// ReducingState keeps one value per key and namespace that Add folds new values into, as
// Flink's ReducingState (and InternalMergingState for MergeNamespaces). Add is a
// read-modify-write in place when the encoding does not grow. Use from the Store's goroutine
// only. With a TTL (ReducingDescriptor.TTL), Get and Add follow Flink's TtlReducingState and
// TtlReduceFunction: see TTLConfig (a Get may write).
type ReducingState[T any] struct {
	stateBase
	codec  Codec[T]
	reduce func(a, b T) T
}

// NewReducingState registers d on s, or returns the reducing state registered under d.Name
// before (same codec; the first registration's Reduce stays in effect). Errors:
// ErrIncompatibleState (another kind, codec or type, or a nil Reduce), ErrClosed.
func NewReducingState[T any](s *Store, d ReducingDescriptor[T]) (*ReducingState[T], error) {
	if d.Reduce == nil {
		return nil, stateError(d.Name, "nil Reduce")
	}
	return registerTTL(s, d.Name, kindReducing, [2]any{d.Codec, nil}, d.TTL, func(b stateBase) *ReducingState[T] {
		return &ReducingState[T]{stateBase: b, codec: d.Codec, reduce: d.Reduce}
	})
}

// Get returns the reduced value of k and true, or the zero T and false when nothing was added
// (or it was cleared), as Flink's ReducingState.get returning null. Errors:
// ErrKeyGroupOutOfRange, ErrClosed, ErrCorruption.
func (r *ReducingState[T]) Get(k Key) (T, bool, error) {
	return getKV(&r.stateBase, r.codec, k)
}

// Add folds x into the value of k: Reduce(old, x), or x when there is no value (or, with a
// TTL, it has expired: Flink's TtlReduceFunction), as Flink's ReducingState.add. Errors: ErrKeyGroupOutOfRange, ErrClosed, ErrCorruption, ErrKeyTooLarge,
// ErrValueTooLarge, ErrMemoryBudget.
func (r *ReducingState[T]) Add(k Key, x T) error {
	s := r.s
	key, h, err := s.beginHot(k, r.idAt(k))
	defer s.exit()
	if err != nil {
		return r.wrap("add", err)
	}
	var now int64
	if r.ttl != nil {
		if err := r.ttlAccess(); err != nil {
			return r.wrap("add", err)
		}
		now = s.clock()
	}
	b, st, err := r.kvGet(h, key)
	if err != nil {
		return r.wrap("add", err)
	}
	if st == found {
		if b, ok, err := r.unexpired(b, now); err != nil {
			return r.wrap("add", err)
		} else if ok {
			old, err := r.codec.Decode(b)
			if err != nil {
				return r.wrap("add", err)
			}
			x = r.reduce(old, x)
		}
	} else if st == failed {
		return r.wrap("add", s.e.TakeErr())
	}
	s.vbuf = s.vbuf[:0]
	if r.ttl != nil {
		s.vbuf = base.AppendTS(s.vbuf, now)
	}
	s.vbuf = r.codec.Append(s.vbuf, x)
	if err := r.kvWrite(engine.OpPut, key, h, s.vbuf); err != nil {
		return r.wrap("add", err)
	}
	return nil
}

// Clear removes the value of k (its key in its namespace only), as Flink's State.clear;
// clearing an absent value is not an error. Errors: ErrKeyGroupOutOfRange, ErrClosed,
// ErrMemoryBudget.
func (r *ReducingState[T]) Clear(k Key) error { return clearKV(&r.stateBase, k) }

// MergeNamespaces reduces the values of k in the source namespaces into the value of k in the
// target namespace and clears the sources, as Flink's InternalMergingState.mergeNamespaces:
// merged = Reduce(...Reduce(s1, s2)..., sn) over the present sources in order, then
// target = Reduce(target, merged), or merged when the target is absent. Absent sources are
// ignored, a source equal to target is skipped, a repeated source counts once, and nothing
// changes when no source is present.
// Nothing is deleted when a stored value fails to decode, and the target is written before
// the sources are cleared, so an error part-way (ErrMemoryBudget) may leave a source uncleared
// but never loses a value. Errors as Add.
func (r *ReducingState[T]) MergeNamespaces(k Key, target []byte, sources ...[]byte) error {
	return mergeKV(&r.stateBase, r.codec, r.reduce, k, target, sources)
}

// unexpired returns the codec bytes of a stored value b as a read-modify-write (Add) sees it
// at now: b itself without a TTL; with one, b without its timestamp, and ok false when it has
// expired — unless the state returns expired values (TTLReturnExpiredIfNotCleanedUp), as
// Flink's AbstractTtlDecorator.getUnexpired. ErrCorruption when b has no timestamp.
func (b *stateBase) unexpired(v []byte, now int64) ([]byte, bool, error) {
	t := b.ttl
	if t == nil {
		return v, true, nil
	}
	ts, ok := base.TS(v)
	if !ok {
		return nil, false, b.shortTTL(len(v))
	}
	if !t.returnExpired && base.Expired(ts, t.ms, now) {
		return nil, false, nil
	}
	return v[base.TSLen:], true, nil
}

// getKV is Get of a KV-table state.
func getKV[T any](b *stateBase, c Codec[T], k Key) (T, bool, error) {
	s := b.s
	key, h, err := s.beginHot(k, b.idAt(k))
	defer s.exit()
	var zero T
	if err != nil {
		return zero, false, b.wrap("get", err)
	}
	var raw []byte
	var st status
	if b.ttl != nil {
		raw, st, err = b.ttlGet(key, h)
		if err != nil {
			return zero, false, b.wrap("get", err)
		}
	} else if raw, st, err = b.kvGet(h, key); err != nil {
		return zero, false, b.wrap("get", err)
	}
	if st != found {
		if st == failed {
			return zero, false, b.wrap("get", s.e.TakeErr())
		}
		return zero, false, nil
	}
	x, err := c.Decode(raw)
	if err != nil {
		return zero, false, b.wrap("get", err)
	}
	return x, true, nil
}

// repeated reports whether sources[i] equals an earlier source (merged once, as Flink, which
// clears a source as it merges it).
func repeated(sources [][]byte, i int) bool {
	for _, p := range sources[:i] {
		if bytes.Equal(p, sources[i]) {
			return true
		}
	}
	return false
}

// mergeKV is MergeNamespaces of a KV-table state, with or without a TTL: the present sources
// fold in order (the first as it is stored; each next one merged into the fold), and the result
// merges into the target (target first); every present source is cleared after the target is
// written. Values are copied out of the table before anything is written (the table's bytes
// change under writes) and decoded from the copies; the fold is kept encoded and re-decoded
// per step, so aliasing codecs are safe.
//
// With a TTL, as Flink's heap merging state with its TTL function
// (AbstractHeapMergingState.mergeNamespaces over TtlReduceFunction.reduce or
// TtlAggregateFunction.merge), a step is ttlMerge(a, b) of two stored values: their unexpired
// parts (an expired value counts only with TTLReturnExpiredIfNotCleanedUp), both giving
// merge(a, b), one giving itself, each stamped now; none gives nothing, and the fold goes on
// from the next source. A target whose merge gives nothing is cleared.
func mergeKV[T any](b *stateBase, c Codec[T], merge func(T, T) T, k Key, target []byte, sources [][]byte) (err error) {
	s := b.s
	s.enter(opHot)
	defer s.exit()
	if err := s.check(k); err != nil {
		return b.wrap("merge namespaces", err)
	}
	ttl := b.ttl != nil
	var now int64
	if ttl {
		if err := b.ttlAccess(); err != nil {
			return b.wrap("merge namespaces", err)
		}
		now = s.clock()
	}
	acc, src, tmp := s.bufs[0][:0], s.bufs[1][:0], s.bufs[2][:0]
	present := s.present[:0]
	defer func() {
		s.bufs = [3][]byte{acc, src, tmp}
		s.present = present
		if err != nil {
			err = b.wrap("merge namespaces", err)
		}
	}()
	step := func(targetFirst bool) (ok bool, err error) {
		x, y := acc, src
		if targetFirst {
			x, y = src, acc
		}
		if tmp, ok, err = mergeStep(b, c, merge, tmp[:0], x, y, ttl, now); ok {
			acc, tmp = tmp, acc
		}
		return ok, err
	}
	have := false
	for i, ns := range sources {
		if bytes.Equal(ns, target) || repeated(sources, i) {
			continue
		}
		key, h := s.compose(k.In(ns), b.idAt(k))
		raw, st, err := b.kvGet(h, key)
		if err != nil {
			return err
		}
		if st == failed {
			return s.e.TakeErr()
		}
		if st != found {
			continue
		}
		present = append(present, i)
		src = append(src[:0], raw...)
		if !have {
			// The first present source is the fold as it is stored: checked, not merged.
			if ttl {
				_, _, err = b.unexpired(src, now)
			} else {
				_, err = c.Decode(src)
			}
			if err != nil {
				return err
			}
			acc, src = src, acc
			have = true
			continue
		}
		if have, err = step(false); err != nil {
			return err
		}
	}
	if len(present) == 0 {
		return nil
	}
	key, h := s.compose(k.In(target), b.idAt(k))
	if have {
		raw, st, err := b.kvGet(h, key)
		if err != nil {
			return err
		}
		if st == found {
			src = append(src[:0], raw...)
			if have, err = step(true); err != nil {
				return err
			}
		} else if st == failed {
			return s.e.TakeErr()
		}
		if have {
			err = b.kvWrite(engine.OpPut, key, h, acc)
		} else {
			err = b.kvWrite(engine.OpDelete, key, h, nil)
		}
		if err != nil {
			return err
		}
	}
	for _, i := range present {
		key, h := s.compose(k.In(sources[i]), b.idAt(k))
		if err := b.kvWrite(engine.OpDelete, key, h, nil); err != nil {
			return err
		}
	}
	return nil
}

// mergeStep appends to dst the encoding of merge(x, y) of two stored values and reports ok;
// with a TTL (ttl), ttlMerge of their unexpired parts at now, stamped now: both give
// merge(x, y), one gives itself, none gives nothing (ok false). mergeKV's fold step.
func mergeStep[T any](b *stateBase, c Codec[T], merge func(T, T) T, dst, x, y []byte, ttl bool, now int64) (out []byte, ok bool, err error) {
	okx, oky := true, true
	if ttl {
		if x, okx, err = b.unexpired(x, now); err != nil {
			return dst, false, err
		}
		if y, oky, err = b.unexpired(y, now); err != nil {
			return dst, false, err
		}
		dst = base.AppendTS(dst, now)
	}
	switch {
	case okx && oky:
		vx, err := c.Decode(x)
		if err != nil {
			return dst, false, err
		}
		vy, err := c.Decode(y)
		if err != nil {
			return dst, false, err
		}
		return c.Append(dst, merge(vx, vy)), true, nil
	case okx:
		return append(dst, x...), true, nil
	case oky:
		return append(dst, y...), true, nil
	}
	return dst, false, nil
}
