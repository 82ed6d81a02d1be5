package strata

import (
	"bytes"

	"github.com/strata-db/strata/internal/engine"
)

// ReducingDescriptor describes a reducing state: one value of type T per key and namespace,
// folded with Reduce on every Add, as Flink's ReducingStateDescriptor.
type ReducingDescriptor[T any] struct {
	Name  string   // unique per Store
	Codec Codec[T] // required
	// Reduce combines the stored value a with the added value b (Flink's
	// ReduceFunction.reduce(value1, value2)); required. It must not use the Store, and must not
	// modify a in place when the codec aliases the Store's memory (Bytes): return a new value.
	Reduce func(a, b T) T
}

// ReducingState keeps one value per key and namespace that Add folds new values into, as
// Flink's ReducingState (and InternalMergingState for MergeNamespaces). Add is a
// read-modify-write in place when the encoding does not grow. Use from the Store's goroutine
// only.
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
	return register(s, d.Name, kindReducing, [2]any{d.Codec, nil}, func(b stateBase) *ReducingState[T] {
		return &ReducingState[T]{stateBase: b, codec: d.Codec, reduce: d.Reduce}
	})
}

// Get returns the reduced value of k and true, or the zero T and false when nothing was added
// (or it was cleared), as Flink's ReducingState.get returning null. Errors:
// ErrKeyGroupOutOfRange, ErrClosed, ErrCorruption.
func (r *ReducingState[T]) Get(k Key) (T, bool, error) {
	return getKV(&r.stateBase, r.codec, k)
}

// Add folds x into the value of k: Reduce(old, x), or x when there is no value, as Flink's
// ReducingState.add. Errors: ErrKeyGroupOutOfRange, ErrClosed, ErrCorruption, ErrKeyTooLarge,
// ErrValueTooLarge, ErrMemoryBudget.
func (r *ReducingState[T]) Add(k Key, x T) error {
	s := r.s
	key, h, err := s.begin(k, r.id)
	defer s.guard.exit()
	if err != nil {
		return r.wrap("add", err)
	}
	if b, st := s.e.Get(h, key); st == found {
		old, err := r.codec.Decode(b)
		if err != nil {
			return r.wrap("add", err)
		}
		x = r.reduce(old, x)
	} else if st == failed {
		return r.wrap("add", s.e.TakeErr())
	}
	s.vbuf = r.codec.Append(s.vbuf[:0], x)
	if err := s.apply(engine.OpPut, key, h, nil, s.vbuf); err != nil {
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

// getKV is Get of a KV-table state.
func getKV[T any](b *stateBase, c Codec[T], k Key) (T, bool, error) {
	s := b.s
	key, h, err := s.begin(k, b.id)
	defer s.guard.exit()
	var zero T
	if err != nil {
		return zero, false, b.wrap("get", err)
	}
	raw, st := s.e.Get(h, key)
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

// clearKV is Clear of a KV-table state.
func clearKV(b *stateBase, k Key) error {
	s := b.s
	key, h, err := s.begin(k, b.id)
	defer s.guard.exit()
	if err != nil {
		return b.wrap("clear", err)
	}
	if err := s.apply(engine.OpDelete, key, h, nil, nil); err != nil {
		return b.wrap("clear", err)
	}
	return nil
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

// mergeKV is MergeNamespaces of a KV-table state. Values are copied out of the table before
// anything is written (the table's bytes change under writes) and decoded from the copies;
// the accumulated result is kept encoded and re-decoded per step, so aliasing codecs are safe.
// The target is written first and the sources deleted after it.
func mergeKV[T any](b *stateBase, c Codec[T], merge func(T, T) T, k Key, target []byte, sources [][]byte) (err error) {
	s := b.s
	s.guard.enter()
	defer s.guard.exit()
	if err := s.check(k); err != nil {
		return b.wrap("merge namespaces", err)
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
	// step merges the bytes in src into acc (acc = merge(acc, src), or target-first order
	// when targetFirst: acc = merge(src, acc)).
	step := func(targetFirst bool) error {
		x, err := c.Decode(src)
		if err != nil {
			return err
		}
		a, err := c.Decode(acc)
		if err != nil {
			return err
		}
		if targetFirst {
			tmp = c.Append(tmp[:0], merge(x, a))
		} else {
			tmp = c.Append(tmp[:0], merge(a, x))
		}
		acc, tmp = tmp, acc
		return nil
	}
	have := false
	for i, ns := range sources {
		if bytes.Equal(ns, target) || repeated(sources, i) {
			continue
		}
		key, h := s.compose(k.In(ns), b.id)
		raw, st := s.e.Get(h, key)
		if st == failed {
			return s.e.TakeErr()
		}
		if st != found {
			continue
		}
		present = append(present, i)
		src = append(src[:0], raw...)
		if !have {
			if _, err := c.Decode(src); err != nil {
				return err
			}
			acc, src = src, acc
			have = true
			continue
		}
		if err := step(false); err != nil {
			return err
		}
	}
	if !have {
		return nil
	}
	key, h := s.compose(k.In(target), b.id)
	if raw, st := s.e.Get(h, key); st == found {
		src = append(src[:0], raw...)
		if err := step(true); err != nil {
			return err
		}
	} else if st == failed {
		return s.e.TakeErr()
	}
	if err := s.apply(engine.OpPut, key, h, nil, acc); err != nil {
		return err
	}
	for _, i := range present {
		key, h := s.compose(k.In(sources[i]), b.id)
		if err := s.apply(engine.OpDelete, key, h, nil, nil); err != nil {
			return err
		}
	}
	return nil
}
