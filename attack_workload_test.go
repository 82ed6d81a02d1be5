package strata

// Adversarial tests (attack_*_test.go): a deterministic write-heavy workload over every state
// kind with a Go-map model, shared by the SIGKILL crash test, the long model test on a real
// directory and the fault tests. A workload's operations depend only on its rng, never on
// what the Store returns, so the model of "sessions 0..n" can be recomputed by another
// process (the crash test's parent).

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
)

var awNamespaces = [][]byte{nil, []byte("w1"), []byte("window-2")}

// awVal is a model value: its bytes are awBytes(seed, n).
type awVal struct {
	seed uint64
	n    int32
}

// awBytes returns n pseudo-random bytes of seed, with the seed readable at the front.
func awBytes(dst []byte, seed uint64, n int) []byte {
	dst = dst[:0]
	x := seed
	for len(dst) < n {
		x += 0x9e3779b97f4a7c15
		z := x
		z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
		z = (z ^ z>>27) * 0x94d049bb133111eb
		z ^= z >> 31
		for i := 0; i < 8 && len(dst) < n; i++ {
			dst = append(dst, byte(z>>(8*i)))
		}
	}
	return dst
}

// awModel is what every read must return. Slots are key*len(awNamespaces)+ns.
type awModel struct {
	val map[int32]awVal
	lst map[int32][]int64
	mp  map[int32]map[uint8]int64
	red map[int32]int64
	agg map[int32]int64
}

func newAWModel() *awModel {
	return &awModel{val: map[int32]awVal{}, lst: map[int32][]int64{}, mp: map[int32]map[uint8]int64{},
		red: map[int32]int64{}, agg: map[int32]int64{}}
}

// awStates are the workload's states on one Store.
type awStates struct {
	s   *Store
	val *ValueState[[]byte]
	lst *ListState[int64]
	mp  *MapState[string, int64]
	red *ReducingState[int64]
	agg *AggregatingState[int64, int64, int64]
	kb  []byte
	vb  []byte
}

func registerAW(s *Store) (*awStates, error) {
	st := &awStates{s: s}
	var err error
	if st.val, err = NewValueState(s, ValueDescriptor[[]byte]{Name: "aw-val", Codec: Bytes}); err != nil {
		return nil, err
	}
	if st.lst, err = NewListState(s, ListDescriptor[int64]{Name: "aw-lst", Codec: Int64}); err != nil {
		return nil, err
	}
	if st.mp, err = NewMapState(s, MapDescriptor[string, int64]{Name: "aw-map", KeyCodec: String, ValueCodec: Int64}); err != nil {
		return nil, err
	}
	if st.red, err = NewReducingState(s, ReducingDescriptor[int64]{Name: "aw-red", Codec: Int64,
		Reduce: func(a, b int64) int64 { return a + b }}); err != nil {
		return nil, err
	}
	if st.agg, err = NewAggregatingState(s, AggregatingDescriptor[int64, int64, int64]{Name: "aw-agg", AccCodec: Int64,
		CreateAccumulator: func() int64 { return 0 }, Add: func(in, acc int64) int64 { return acc + in },
		GetResult: func(acc int64) int64 { return acc }, Merge: func(a, b int64) int64 { return a + b }}); err != nil {
		return nil, err
	}
	return st, nil
}

func (st *awStates) key(slot int32) Key {
	st.kb = fmt.Appendf(st.kb[:0], "attack-key-%07d", slot/int32(len(awNamespaces)))
	return st.s.Key(st.kb).In(awNamespaces[slot%int32(len(awNamespaces))])
}

var awUserKeys = func() (u [8]string) {
	for i := range u {
		u[i] = fmt.Sprintf("uk-%d", i)
	}
	return
}()

// awWorkload draws operations over keys slots with values up to maxVal bytes.
type awWorkload struct {
	slots  int32
	maxVal int
}

// step draws one operation from rng, applies it to m, and to st when not nil.
func (w awWorkload) step(rng *rand.Rand, m *awModel, st *awStates) error {
	slot := rng.Int32N(w.slots)
	var k Key
	if st != nil {
		k = st.key(slot)
	}
	r := rng.IntN(100)
	switch {
	case r < 30:
		v := awVal{seed: rng.Uint64(), n: int32(rng.IntN(w.maxVal + 1))}
		m.val[slot] = v
		if st != nil {
			st.vb = awBytes(st.vb, v.seed, int(v.n))
			return st.val.Put(k, st.vb)
		}
	case r < 33:
		delete(m.val, slot)
		if st != nil {
			return st.val.Clear(k)
		}
	case r < 50:
		x := rng.Int64()
		m.lst[slot] = append(m.lst[slot], x)
		if st != nil {
			return st.lst.Add(k, x)
		}
	case r < 53:
		xs := make([]int64, rng.IntN(4))
		for i := range xs {
			xs[i] = rng.Int64()
		}
		if len(xs) == 0 {
			delete(m.lst, slot)
		} else {
			m.lst[slot] = xs
		}
		if st != nil {
			return st.lst.Update(k, xs)
		}
	case r < 55:
		delete(m.lst, slot)
		if st != nil {
			return st.lst.Clear(k)
		}
	case r < 72:
		u, x := uint8(rng.IntN(len(awUserKeys))), rng.Int64()
		if m.mp[slot] == nil {
			m.mp[slot] = map[uint8]int64{}
		}
		m.mp[slot][u] = x
		if st != nil {
			return st.mp.Put(k, awUserKeys[u], x)
		}
	case r < 78:
		u := uint8(rng.IntN(len(awUserKeys)))
		delete(m.mp[slot], u)
		if len(m.mp[slot]) == 0 {
			delete(m.mp, slot)
		}
		if st != nil {
			return st.mp.Remove(k, awUserKeys[u])
		}
	case r < 80:
		delete(m.mp, slot)
		if st != nil {
			return st.mp.Clear(k)
		}
	case r < 89:
		x := rng.Int64N(1000)
		m.red[slot] += x
		if st != nil {
			return st.red.Add(k, x)
		}
	case r < 90:
		delete(m.red, slot)
		if st != nil {
			return st.red.Clear(k)
		}
	case r < 99:
		x := rng.Int64N(1000)
		m.agg[slot] += x
		if st != nil {
			return st.agg.Add(k, x)
		}
	default:
		delete(m.agg, slot)
		if st != nil {
			return st.agg.Clear(k)
		}
	}
	return nil
}

// session runs ops operations of session n (its own rng) on m and st.
func (w awWorkload) session(seed int64, n, ops int, m *awModel, st *awStates) error {
	rng := rand.New(rand.NewPCG(uint64(seed), uint64(n)))
	for i := range ops {
		if err := w.step(rng, m, st); err != nil {
			return fmt.Errorf("session %d op %d: %w", n, i, err)
		}
	}
	return nil
}

// errMismatch marks a read that returned a value other than the model's (a wrong value
// without an error: the worst outcome).
var errMismatch = errors.New("attack: read differs from the model")

// checkSlot compares every state of slot with m. It returns an error from the Store, or
// errMismatch with the details.
func (st *awStates) checkSlot(m *awModel, slot int32) error {
	k := st.key(slot)
	v, ok, err := st.val.Get(k)
	if err != nil {
		return fmt.Errorf("slot %d value: %w", slot, err)
	}
	if mv, mok := m.val[slot]; ok != mok || (ok && !bytes.Equal(v, awBytes(st.vb, mv.seed, int(mv.n)))) {
		return fmt.Errorf("%w: slot %d value: present %v (model %v), %d bytes (model %d)", errMismatch, slot, ok, mok, len(v), mv.n)
	}
	var got []int64
	it := st.lst.Get(k)
	for it.Next() {
		got = append(got, it.Value())
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("slot %d list: %w", slot, err)
	}
	if !slices.Equal(got, m.lst[slot]) {
		return fmt.Errorf("%w: slot %d list: %d elements, model %d", errMismatch, slot, len(got), len(m.lst[slot]))
	}
	n := 0
	mi := st.mp.Iterator(k)
	for mi.Next() {
		n++
		uk, x := mi.Key(), mi.Value()
		var u uint8
		if _, err := fmt.Sscanf(uk, "uk-%d", &u); err != nil {
			return fmt.Errorf("%w: slot %d map: user key %q", errMismatch, slot, uk)
		}
		if mx, ok := m.mp[slot][u]; !ok || mx != x {
			return fmt.Errorf("%w: slot %d map: %s=%d, model %d (%v)", errMismatch, slot, uk, x, mx, ok)
		}
	}
	if err := mi.Err(); err != nil {
		return fmt.Errorf("slot %d map: %w", slot, err)
	}
	if n != len(m.mp[slot]) {
		return fmt.Errorf("%w: slot %d map: %d entries, model %d", errMismatch, slot, n, len(m.mp[slot]))
	}
	r, ok, err := st.red.Get(k)
	if err != nil {
		return fmt.Errorf("slot %d reducing: %w", slot, err)
	}
	if mr, mok := m.red[slot]; ok != mok || r != mr {
		return fmt.Errorf("%w: slot %d reducing: %d %v, model %d %v", errMismatch, slot, r, ok, mr, mok)
	}
	a, ok, err := st.agg.Get(k)
	if err != nil {
		return fmt.Errorf("slot %d aggregating: %w", slot, err)
	}
	if ma, mok := m.agg[slot]; ok != mok || a != ma {
		return fmt.Errorf("%w: slot %d aggregating: %d %v, model %d %v", errMismatch, slot, a, ok, ma, mok)
	}
	return nil
}

// checkAll checks every slot of w; it returns the first error.
func (st *awStates) checkAll(w awWorkload, m *awModel) error {
	for slot := range w.slots {
		if err := st.checkSlot(m, slot); err != nil {
			return err
		}
	}
	return nil
}
