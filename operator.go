package strata

import (
	"fmt"
	"iter"
	"slices"

	"github.com/strata-db/strata/internal/engine"
)

// Operator state: the non-keyed state of one operator subtask, as Flink's
// OperatorStateStore (getListState, getUnionListState, getBroadcastState). It lives on the Go
// heap, counted and charged to the Store's memory budget and bounded by MaxOperatorStateSize
// (opstate.go); checkpoints store it whole in their manifest, Close persists it with the keyed
// state, and Restore redistributes it over the new parallelism (Options.SubtaskIndex and
// Options.Parallelism). Operator and keyed states share one namespace of names per Store.
// Like every state, use it from the Store's goroutine only.
//
// A write that grows operator state charges the budget; when the budget is full it waits for
// background work to free memory, as a keyed write does (backpressure, at most
// Options.BackpressureTimeout, then ErrMemoryBudget), so like any write it may end the
// validity of values read through aliasing codecs (package doc, invariant 2).

// OperatorListDescriptor describes an operator list state: a list of elements of type T per
// subtask, as Flink's ListStateDescriptor given to OperatorStateStore.getListState or
// getUnionListState.
type OperatorListDescriptor[T any] struct {
	Name  string   // unique per Store, among keyed and operator states
	Codec Codec[T] // element codec, required
}

// OperatorListState is a list of elements held by one subtask, as Flink's operator ListState.
// How a Restore at another parallelism redistributes it is fixed when it is registered:
//
//   - NewOperatorListState (Flink's getListState, even-split redistribution): the old
//     subtasks' lists, concatenated in subtask order, are cut into contiguous parts of
//     near-equal length, one per new subtask (Flink's RoundRobinOperatorStateRepartitioner);
//   - NewUnionListState (Flink's getUnionListState, union redistribution): every new subtask
//     gets the whole concatenation.
//
// A union list is checkpointed as the subtask holds it, as Flink's, and restored as the union
// of what the old subtasks held — each element once: every union element carries an id
// (opstate.go, "Union state"), a restore keeps the first element of each id, so a union that
// every subtask hands back unchanged is not multiplied (the duplication of flink-agents
// #824), and an element survives as long as any subtask holds it. Update keeps the id of each
// element it is given back (matched bytewise); Clear and Update drop elements from this
// subtask's list only.
//
// Elements are encoded by the codec when written and decoded by Get. Values of aliasing codecs
// (Bytes) point into the state's element, which is never changed in place: do not modify them.
// Use from the Store's goroutine only.
type OperatorListState[T any] struct {
	s     *Store
	st    *opState
	codec Codec[T]
}

// NewOperatorListState registers d on s as an even-split operator list state (Flink's
// OperatorStateStore.getListState), or returns the one registered under d.Name before (same
// codec). A state of that name restored (by Restore or Open) comes back with its elements.
// Errors: ErrIncompatibleState (the name is a keyed state's, a union list's or a broadcast
// state's — Flink's "incompatible assignment mode" —, or has another codec or type),
// ErrOperatorStateTooLarge, ErrMemoryBudget, ErrClosed.
func NewOperatorListState[T any](s *Store, d OperatorListDescriptor[T]) (*OperatorListState[T], error) {
	return registerOp(s, d.Name, opList, [2]any{d.Codec, nil}, func(st *opState) *OperatorListState[T] {
		return &OperatorListState[T]{s: s, st: st, codec: d.Codec}
	})
}

// NewUnionListState registers d on s as a union operator list state (Flink's
// OperatorStateStore.getUnionListState), or returns the one registered under d.Name before.
// Errors as NewOperatorListState.
func NewUnionListState[T any](s *Store, d OperatorListDescriptor[T]) (*OperatorListState[T], error) {
	return registerOp(s, d.Name, opUnion, [2]any{d.Codec, nil}, func(st *opState) *OperatorListState[T] {
		return &OperatorListState[T]{s: s, st: st, codec: d.Codec}
	})
}

// Name returns the name the state was registered under.
func (l *OperatorListState[T]) Name() string { return l.st.Name }

// Union reports whether the state is a union list (NewUnionListState).
func (l *OperatorListState[T]) Union() bool { return l.st.Kind == opUnion }

// Get returns the elements in order (nil when empty), as Flink's ListState.get: for a union
// list, the restored union followed by what was added since.
// Errors: ErrClosed; the codec's Decode error (wrapped, naming the state).
func (l *OperatorListState[T]) Get() ([]T, error) {
	s := l.s
	s.enter(opOps)
	defer s.exit()
	if s.closed {
		return nil, ErrClosed
	}
	var out []T
	for i, e := range l.st.Elems {
		x, err := l.codec.Decode(e)
		if err != nil {
			return nil, fmt.Errorf("strata: get operator state %q: element %d: %w", l.st.Name, i, err)
		}
		out = append(out, x)
	}
	return out, nil
}

// Len returns the number of elements Get would return. Errors: ErrClosed.
func (l *OperatorListState[T]) Len() (int, error) {
	if l.s.closed {
		return 0, ErrClosed
	}
	return len(l.st.Elems), nil
}

// encode returns the encodings of xs, each its own allocation (elements outlive the call).
func (l *OperatorListState[T]) encode(xs []T) [][]byte {
	out := make([][]byte, len(xs))
	for i := range xs {
		out[i] = l.codec.Append(make([]byte, 0, 16), xs[i])
	}
	return out
}

// Add appends x, as Flink's ListState.add (in a union list, under a fresh id). Errors: ErrClosed,
// ErrOperatorStateTooLarge, ErrMemoryBudget (nothing is added).
func (l *OperatorListState[T]) Add(x T) error {
	return l.add("add", l.encode([]T{x}))
}

// AddAll appends xs in order, as Flink's ListState.addAll; an empty xs changes nothing. Errors
// as Add (nothing is added).
func (l *OperatorListState[T]) AddAll(xs []T) error {
	if len(xs) == 0 {
		return l.add("add all", nil)
	}
	return l.add("add all", l.encode(xs))
}

func (l *OperatorListState[T]) add(op string, elems [][]byte) error {
	s, st := l.s, l.st
	s.enter(opOps)
	defer s.exit()
	if s.closed {
		return ErrClosed
	}
	if len(elems) == 0 {
		return nil
	}
	c := opElemsCost(elems)
	if err := s.opCharge(c); err != nil {
		return fmt.Errorf("strata: %s operator state %q: %w", op, st.Name, err)
	}
	st.cost += c
	st.Elems = append(st.Elems, elems...)
	if st.Kind == opUnion {
		for range elems {
			st.IDs = append(st.IDs, freshUnionID())
		}
	}
	return nil
}

// Update replaces the elements with xs, as Flink's ListState.update; an empty xs clears. In a
// union list, an element of xs equal (bytewise) to an element held before and not matched yet
// keeps that element's id (so handing back what Get returned, with changes, keeps the union
// of the subtasks deduplicated at the next restore); the others get fresh ids. Errors as Add
// (nothing changes).
func (l *OperatorListState[T]) Update(xs []T) error {
	s, st := l.s, l.st
	elems := l.encode(xs)
	s.enter(opOps)
	defer s.exit()
	if s.closed {
		return ErrClosed
	}
	var ids []uint64
	if st.Kind == opUnion && len(elems) > 0 {
		left := map[string][]uint64{} // the ids of the elements held, by element, in order
		for i, e := range st.Elems {
			left[string(e)] = append(left[string(e)], st.IDs[i])
		}
		ids = make([]uint64, len(elems))
		for i, e := range elems {
			if q := left[string(e)]; len(q) > 0 {
				ids[i], left[string(e)] = q[0], q[1:]
			} else {
				ids[i] = freshUnionID()
			}
		}
	}
	delta := opElemsCost(elems) - opElemsCost(st.Elems)
	if err := s.opCharge(delta); err != nil {
		return fmt.Errorf("strata: update operator state %q: %w", st.Name, err)
	}
	st.cost += delta
	st.Elems, st.IDs = elems, ids
	if len(elems) == 0 {
		st.Elems = nil
	}
	return nil
}

// Clear removes every element, as Flink's State.clear (the state stays registered). Errors:
// ErrClosed.
func (l *OperatorListState[T]) Clear() error {
	return l.Update(nil)
}

// BroadcastDescriptor describes a broadcast state: a map from keys K to values V that every
// subtask holds in full, as Flink's MapStateDescriptor given to
// OperatorStateStore.getBroadcastState.
type BroadcastDescriptor[K, V any] struct {
	Name       string   // unique per Store, among keyed and operator states
	KeyCodec   Codec[K] // key codec, required; equal keys must encode equally
	ValueCodec Codec[V] // value codec, required
}

// BroadcastState is a map every subtask of an operator holds in full, as Flink's
// BroadcastState: the job writes the same entries into every subtask's (from a broadcast
// stream). Each subtask's checkpoint stores its copy; a Restore at any parallelism gives every
// new subtask one copy, that of one old subtask (Flink's repartitionBroadcastState: new
// subtask i takes the (i mod m)-th of the m copies), never a merge, since all are equal.
// Entries are encoded by the codecs when written and decoded when read; iteration is in the
// order of the encoded keys. Use from the Store's goroutine only.
type BroadcastState[K, V any] struct {
	s    *Store
	st   *opState
	kc   Codec[K]
	vc   Codec[V]
	kbuf []byte
}

// NewBroadcastState registers d on s (Flink's OperatorStateStore.getBroadcastState), or
// returns the broadcast state registered under d.Name before (same codecs). A state of that
// name restored comes back with its entries. Errors: ErrIncompatibleState (the name is a keyed
// state's or an operator list's, or has other codecs or types), ErrOperatorStateTooLarge,
// ErrMemoryBudget, ErrClosed.
func NewBroadcastState[K, V any](s *Store, d BroadcastDescriptor[K, V]) (*BroadcastState[K, V], error) {
	return registerOp(s, d.Name, opBroadcast, [2]any{d.KeyCodec, d.ValueCodec}, func(st *opState) *BroadcastState[K, V] {
		return &BroadcastState[K, V]{s: s, st: st, kc: d.KeyCodec, vc: d.ValueCodec}
	})
}

// Name returns the name the state was registered under.
func (b *BroadcastState[K, V]) Name() string { return b.st.Name }

// Get returns the value of k and true, or the zero V and false when absent, as Flink's
// BroadcastState.get returning null. Errors: ErrClosed, the value codec's Decode error.
func (b *BroadcastState[K, V]) Get(k K) (V, bool, error) {
	s := b.s
	s.enter(opOps)
	defer s.exit()
	var zero V
	if s.closed {
		return zero, false, ErrClosed
	}
	b.kbuf = b.kc.Append(b.kbuf[:0], k)
	v, ok := b.st.Map[string(b.kbuf)]
	if !ok {
		return zero, false, nil
	}
	x, err := b.vc.Decode(v)
	if err != nil {
		return zero, false, fmt.Errorf("strata: get broadcast state %q: %w", b.st.Name, err)
	}
	return x, true, nil
}

// Contains reports whether k has a value, as Flink's BroadcastState.contains. Errors:
// ErrClosed.
func (b *BroadcastState[K, V]) Contains(k K) (bool, error) {
	s := b.s
	s.enter(opOps)
	defer s.exit()
	if s.closed {
		return false, ErrClosed
	}
	b.kbuf = b.kc.Append(b.kbuf[:0], k)
	_, ok := b.st.Map[string(b.kbuf)]
	return ok, nil
}

// Len returns the number of entries. Errors: ErrClosed.
func (b *BroadcastState[K, V]) Len() (int, error) {
	if b.s.closed {
		return 0, ErrClosed
	}
	return len(b.st.Map), nil
}

// Put sets k to v, as Flink's BroadcastState.put. Errors: ErrClosed, ErrOperatorStateTooLarge,
// ErrMemoryBudget (nothing changes).
func (b *BroadcastState[K, V]) Put(k K, v V) error {
	s := b.s
	s.enter(opOps)
	defer s.exit()
	if s.closed {
		return ErrClosed
	}
	return b.put(k, v)
}

func (b *BroadcastState[K, V]) put(k K, v V) error {
	s, st := b.s, b.st
	b.kbuf = b.kc.Append(b.kbuf[:0], k)
	key := string(b.kbuf)
	val := b.vc.Append(make([]byte, 0, 16), v)
	delta := int64(len(key)+len(val)) + opEntryCost
	if old, ok := st.Map[key]; ok {
		delta = int64(len(val) - len(old))
	}
	if err := s.opCharge(delta); err != nil {
		return fmt.Errorf("strata: put broadcast state %q: %w", st.Name, err)
	}
	st.cost += delta
	st.Map[key] = val
	return nil
}

// PutAll puts every entry of entries, as Flink's BroadcastState.putAll, stopping at the first
// error (the entries put before it stay). entries runs on the caller's goroutine and must not
// use the Store. Errors as Put.
func (b *BroadcastState[K, V]) PutAll(entries iter.Seq2[K, V]) error {
	s := b.s
	s.enter(opOps)
	defer s.exit()
	if s.closed {
		return ErrClosed
	}
	var err error
	for k, v := range entries {
		if err = b.put(k, v); err != nil {
			break
		}
	}
	return err
}

// Remove deletes k, as Flink's BroadcastState.remove; removing an absent key does nothing.
// Errors: ErrClosed.
func (b *BroadcastState[K, V]) Remove(k K) error {
	s, st := b.s, b.st
	s.enter(opOps)
	defer s.exit()
	if s.closed {
		return ErrClosed
	}
	b.kbuf = b.kc.Append(b.kbuf[:0], k)
	old, ok := st.Map[string(b.kbuf)]
	if !ok {
		return nil
	}
	delta := -(int64(len(b.kbuf)+len(old)) + opEntryCost)
	s.opCharge(delta) // a refund: never fails
	st.cost += delta
	delete(st.Map, string(b.kbuf))
	return nil
}

// Clear removes every entry, as Flink's State.clear (the state stays registered). Errors:
// ErrClosed.
func (b *BroadcastState[K, V]) Clear() error {
	s, st := b.s, b.st
	s.enter(opOps)
	defer s.exit()
	if s.closed {
		return ErrClosed
	}
	delta := st.opBaseCost() - st.cost
	s.opCharge(delta) // a refund: never fails
	st.cost += delta
	clear(st.Map)
	return nil
}

// Entries returns the entries in the order of their encoded keys, as Flink's
// BroadcastState.entries, and a function returning the error that ended the last range early —
// ErrClosed, or a codec's Decode error (nil when it ran to its end or the loop broke out). A
// range iterates the keys present when it starts, reading each value as it reaches it: writes
// during the range are allowed, an entry removed before it is reached is skipped, one added is
// not seen.
func (b *BroadcastState[K, V]) Entries() (iter.Seq2[K, V], func() error) {
	var err error
	seq := func(yield func(K, V) bool) {
		err = nil
		if b.s.closed {
			err = ErrClosed
			return
		}
		keys := make([]string, 0, len(b.st.Map))
		for k := range b.st.Map {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if b.s.closed {
				err = ErrClosed
				return
			}
			v, ok := b.st.Map[k]
			if !ok {
				continue
			}
			kx, kerr := b.kc.Decode([]byte(k))
			vx, verr := b.vc.Decode(v)
			if kerr != nil || verr != nil {
				err = fmt.Errorf("strata: broadcast state %q: entry %x: %w", b.st.Name, k, firstErr(kerr, verr))
				return
			}
			if !yield(kx, vx) {
				return
			}
		}
	}
	return seq, func() error { return err }
}

// firstErr returns the first non-nil error of errs.
func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// registerOp returns the operator state registered under name, binding a restored one or
// creating it with mk when the name is new. Errors: ErrClosed; ErrIncompatibleState for an
// empty or too long name, a nil codec, a name of a keyed state, another kind (Flink's
// "incompatible assignment mode"), other codecs or other type parameters;
// ErrOperatorStateTooLarge and ErrMemoryBudget for a new state's bytes.
func registerOp[S any](s *Store, name string, kind opKind, codecs [2]any, mk func(st *opState) *S) (*S, error) {
	if s.closed {
		return nil, ErrClosed
	}
	if name == "" || len(name) > 1<<16-1 {
		return nil, fmt.Errorf("%w: operator state name of %d bytes (1 to 65535)", ErrIncompatibleState, len(name))
	}
	ids := [2]string{codecID(codecs[0]), codecID(codecs[1])}
	for i, c := range codecs {
		if c == nil && (i == 0 || kind == opBroadcast) {
			return nil, fmt.Errorf("%w: state %q: nil codec", ErrIncompatibleState, name)
		}
		if len(ids[i]) > 1<<16-1 {
			return nil, fmt.Errorf("%w: state %q: codec type name of %d bytes", ErrIncompatibleState, name, len(ids[i]))
		}
	}
	if r, ok := s.states[name]; ok {
		return nil, fmt.Errorf("%w: state %q is a keyed %v state, requested as %v state", ErrIncompatibleState, name, r.kind, kind)
	}
	if p, ok := s.persisted[name]; ok {
		return nil, fmt.Errorf("%w: state %q is stored as a keyed %v state, requested as %v state", ErrIncompatibleState, name, p.Kind, kind)
	}
	st, ok := s.ops[name]
	switch {
	case ok && st.Kind != kind:
		return nil, fmt.Errorf("%w: state %q is %v state, requested as %v state (incompatible assignment mode)",
			ErrIncompatibleState, name, st.Kind, kind)
	case ok && st.view != nil:
		if !sameCodec(st.vcodecs[0], codecs[0]) || !sameCodec(st.vcodecs[1], codecs[1]) {
			return nil, fmt.Errorf("%w: state %q is registered with codec %T/%T, requested with %T/%T",
				ErrIncompatibleState, name, st.vcodecs[0], st.vcodecs[1], codecs[0], codecs[1])
		}
		v, ok := st.view.(*S)
		if !ok {
			return nil, fmt.Errorf("%w: state %q is registered as %T, requested as %T", ErrIncompatibleState, name, st.view, (*S)(nil))
		}
		return v, nil
	case ok:
		if st.Codecs != ids {
			return nil, fmt.Errorf("%w: state %q is stored with codec %s/%s, requested with %s/%s",
				ErrIncompatibleState, name, st.Codecs[0], st.Codecs[1], ids[0], ids[1])
		}
	default:
		st = &opState{OpState: engine.OpState{Name: name, Kind: kind, Codecs: ids}}
		if kind == opBroadcast {
			st.Map = map[string][]byte{}
		}
		c := st.opBaseCost()
		if err := s.opCharge(c); err != nil {
			return nil, fmt.Errorf("strata: register operator state %q: %w", name, err)
		}
		st.cost = c
		s.ops[name] = st
	}
	v := mk(st)
	st.view, st.vcodecs = v, codecs
	return v, nil
}
