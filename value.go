package strata

import (
	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/internal/engine"
)

// ValueDescriptor describes a value state: a single value of type T per key and namespace,
// as Flink's ValueStateDescriptor.
type ValueDescriptor[T any] struct {
	Name  string   // unique per Store
	Codec Codec[T] // required
	// TTL, when not nil, gives the value a time to live (TTLConfig, Flink's
	// StateTtlConfig); nil: it never expires.
	TTL *TTLConfig
}

// ValueState is a single value per key and namespace, as Flink's ValueState. Get and Put
// allocate nothing beyond what the codec allocates. Use from the Store's goroutine only.
//
// With a TTL (ValueDescriptor.TTL) the value carries its last write time; Get of an expired
// value removes it (a write, as in Flink's TtlValueState), and with TTLOnReadAndWrite every
// successful Get rewrites the value's time (a write too): see TTLConfig.
type ValueState[T any] struct {
	stateBase
	codec Codec[T]
}

// NewValueState registers d on s, or returns the value state registered under d.Name before
// (same codec). It fails with ErrIncompatibleState when the name is registered with another
// kind, codec or type, and with ErrClosed on a closed Store.
func NewValueState[T any](s *Store, d ValueDescriptor[T]) (*ValueState[T], error) {
	return registerTTL(s, d.Name, kindValue, [2]any{d.Codec, nil}, d.TTL, func(b stateBase) *ValueState[T] {
		return &ValueState[T]{stateBase: b, codec: d.Codec}
	})
}

// Get returns the value of k (key and namespace) and true, or the zero T and false when k has
// no value, as Flink's ValueState.value() returning null. Errors: ErrKeyGroupOutOfRange,
// ErrClosed, ErrCorruption from the codec. A value decoded by an aliasing codec (Bytes) is
// valid until the next write to the Store. With a TTL, Get follows Flink's TtlValueState
// (TTLConfig): an expired value reads as absent and is removed (with
// TTLReturnExpiredIfNotCleanedUp it is returned this once), TTLOnReadAndWrite rewrites the
// value's time; both make Get a write, which may also fail with ErrMemoryBudget.
func (v *ValueState[T]) Get(k Key) (T, bool, error) {
	s := v.s
	var zero T
	key, h, err := s.beginHot(k, v.idAt(k))
	if err != nil {
		s.exit()
		return zero, false, v.wrap("get", err)
	}
	var b []byte
	var st status
	if v.ttl == nil {
		if b, st, err = v.kvGet(h, key); err != nil {
			s.exit()
			return zero, false, v.wrap("get", err)
		}
	} else if b, st, err = v.ttlGet(key, h); err != nil {
		s.exit()
		return zero, false, v.wrap("get", err)
	}
	if st != found {
		s.exit()
		if st == failed {
			return zero, false, v.wrap("get", s.e.TakeErr())
		}
		return zero, false, nil
	}
	x, err := v.codec.Decode(b)
	s.exit()
	if err != nil {
		return zero, false, v.wrap("get", err)
	}
	return x, true, nil
}

// Put sets the value of k, as Flink's ValueState.update (a nil-like value is stored as
// encoded; use Clear to remove). Errors: ErrKeyGroupOutOfRange, ErrClosed, ErrKeyTooLarge,
// ErrValueTooLarge, ErrMemoryBudget. With a TTL the value is stamped with Options.Clock.
func (v *ValueState[T]) Put(k Key, x T) error {
	s := v.s
	key, h, err := s.beginHot(k, v.idAt(k))
	if err != nil {
		s.exit()
		return v.wrap("put", err)
	}
	s.vbuf = s.vbuf[:0]
	if v.ttl != nil {
		if err := v.ttlAccess(); err != nil {
			s.exit()
			return v.wrap("put", err)
		}
		s.vbuf = base.AppendTS(s.vbuf, s.clock())
	}
	s.vbuf = v.codec.Append(s.vbuf, x)
	err = v.kvWrite(engine.OpPut, key, h, s.vbuf)
	s.exit()
	if err != nil {
		return v.wrap("put", err)
	}
	return nil
}

// Clear removes the value of k, as Flink's State.clear. Clearing an absent value is not an
// error. Errors: ErrKeyGroupOutOfRange, ErrClosed, ErrMemoryBudget.
func (v *ValueState[T]) Clear(k Key) error {
	return clearKV(&v.stateBase, k)
}

// clearKV is Clear of a KV-table state.
func clearKV(b *stateBase, k Key) error {
	s := b.s
	key, h, err := s.beginHot(k, b.idAt(k))
	defer s.exit()
	if err != nil {
		return b.wrap("clear", err)
	}
	if b.ttl != nil {
		if err := b.ttlAccess(); err != nil {
			return b.wrap("clear", err)
		}
	}
	if err := b.kvWrite(engine.OpDelete, key, h, nil); err != nil {
		return b.wrap("clear", err)
	}
	return nil
}
