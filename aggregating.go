package strata

import (
	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/internal/engine"
)

// AggregatingDescriptor describes an aggregating state: an accumulator of type ACC per key and
// namespace that Add folds inputs IN into and Get turns into an OUT, as Flink's
// AggregatingStateDescriptor with an AggregateFunction. All functions are required and must not
// use the Store.
type AggregatingDescriptor[IN, ACC, OUT any] struct {
	Name              string                   // unique per Store
	AccCodec          Codec[ACC]               // accumulator codec, required
	CreateAccumulator func() ACC               // a new, empty accumulator (AggregateFunction.createAccumulator)
	Add               func(in IN, acc ACC) ACC // adds an input (AggregateFunction.add)
	GetResult         func(acc ACC) OUT        // the result of an accumulator (AggregateFunction.getResult)
	Merge             func(a, b ACC) ACC       // merges two accumulators (AggregateFunction.merge)
	// TTL, when not nil, gives the accumulator a time to live (TTLConfig, Flink's
	// StateTtlConfig); nil: it never expires.
	TTL *TTLConfig
}

// AggregatingState keeps one accumulator per key and namespace, as Flink's AggregatingState
// (and InternalMergingState for MergeNamespaces). Use from the Store's goroutine only. With a
// TTL (AggregatingDescriptor.TTL), Get and Add follow Flink's TtlAggregatingState: see
// TTLConfig (a Get may write).
type AggregatingState[IN, ACC, OUT any] struct {
	stateBase
	codec Codec[ACC]
	fn    AggregatingDescriptor[IN, ACC, OUT]
}

// NewAggregatingState registers d on s, or returns the aggregating state registered under
// d.Name before (same codec; the first registration's functions stay in effect). Errors:
// ErrIncompatibleState (another kind, codec or type, or a nil function), ErrClosed.
func NewAggregatingState[IN, ACC, OUT any](s *Store, d AggregatingDescriptor[IN, ACC, OUT]) (*AggregatingState[IN, ACC, OUT], error) {
	if d.CreateAccumulator == nil || d.Add == nil || d.GetResult == nil || d.Merge == nil {
		return nil, stateError(d.Name, "nil aggregate function")
	}
	return registerTTL(s, d.Name, kindAggregating, [2]any{d.AccCodec, nil}, d.TTL, func(b stateBase) *AggregatingState[IN, ACC, OUT] {
		return &AggregatingState[IN, ACC, OUT]{stateBase: b, codec: d.AccCodec, fn: d}
	})
}

// Get returns GetResult of the accumulator of k and true, or the zero OUT and false when
// nothing was added (or it was cleared), as Flink's AggregatingState.get returning null.
// Errors: ErrKeyGroupOutOfRange, ErrClosed, ErrCorruption.
func (a *AggregatingState[IN, ACC, OUT]) Get(k Key) (OUT, bool, error) {
	var zero OUT
	acc, ok, err := getKV(&a.stateBase, a.codec, k)
	if !ok || err != nil {
		return zero, false, err
	}
	return a.fn.GetResult(acc), true, nil
}

// Add adds in to the accumulator of k (created with CreateAccumulator when absent — or, with
// a TTL, expired: Flink's TtlAggregateFunction.add), as Flink's AggregatingState.add. Errors: ErrKeyGroupOutOfRange, ErrClosed, ErrCorruption,
// ErrKeyTooLarge, ErrValueTooLarge, ErrMemoryBudget.
func (a *AggregatingState[IN, ACC, OUT]) Add(k Key, in IN) error {
	s := a.s
	key, h, err := s.beginHot(k, a.idAt(k))
	defer s.exit()
	if err != nil {
		return a.wrap("add", err)
	}
	var now int64
	if a.ttl != nil {
		if err := a.ttlAccess(); err != nil {
			return a.wrap("add", err)
		}
		now = s.clock()
	}
	var acc ACC
	have := false
	b, st, err := a.kvGet(h, key)
	if err != nil {
		return a.wrap("add", err)
	}
	if st == found {
		b, ok, err := a.unexpired(b, now)
		if err != nil {
			return a.wrap("add", err)
		}
		if ok {
			if acc, err = a.codec.Decode(b); err != nil {
				return a.wrap("add", err)
			}
			have = true
		}
	} else if st == failed {
		return a.wrap("add", s.e.TakeErr())
	}
	if !have {
		acc = a.fn.CreateAccumulator()
	}
	acc = a.fn.Add(in, acc)
	s.vbuf = s.vbuf[:0]
	if a.ttl != nil {
		s.vbuf = base.AppendTS(s.vbuf, now)
	}
	s.vbuf = a.codec.Append(s.vbuf, acc)
	if err := a.kvWrite(engine.OpPut, key, h, s.vbuf); err != nil {
		return a.wrap("add", err)
	}
	return nil
}

// Clear removes the accumulator of k (its key in its namespace only), as Flink's State.clear;
// clearing an absent accumulator is not an error. Errors: ErrKeyGroupOutOfRange, ErrClosed,
// ErrMemoryBudget.
func (a *AggregatingState[IN, ACC, OUT]) Clear(k Key) error { return clearKV(&a.stateBase, k) }

// MergeNamespaces merges the accumulators of k in the source namespaces into the accumulator
// of k in the target namespace with Merge and clears the sources, as Flink's
// InternalMergingState.mergeNamespaces; see ReducingState.MergeNamespaces for the order, the
// handling of absent, repeated and target sources, and what an error part-way leaves.
// Errors as Add.
func (a *AggregatingState[IN, ACC, OUT]) MergeNamespaces(k Key, target []byte, sources ...[]byte) error {
	return mergeKV(&a.stateBase, a.codec, a.fn.Merge, k, target, sources)
}
