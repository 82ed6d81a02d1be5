package strata

import (
	"errors"
	"fmt"
	"testing"

	"github.com/strata-db/strata/internal/vfs"
)

// openFS opens a Store over dir in fs (MemFS or FaultFS in tests).
func openFS(fs vfs.FS, dir string, opts Options) (*Store, error) {
	opts.fs = fs
	return Open(dir, opts)
}

// bigState is a workload of value, list and map state larger than a small budget, with a
// check of every read; round r of writes is reproducible from (i, r).
type bigState struct {
	s    *Store
	val  *ValueState[[]byte]
	lst  *ListState[int64]
	mp   *MapState[int64, []byte]
	keys int
	vlen int
	buf  []byte
}

func newBigState(t testing.TB, s *Store, keys, vlen int) *bigState {
	t.Helper()
	b := &bigState{s: s, keys: keys, vlen: vlen, buf: make([]byte, vlen)}
	var err error
	if b.val, err = NewValueState(s, ValueDescriptor[[]byte]{Name: "v", Codec: Bytes}); err != nil {
		t.Fatal(err)
	}
	if b.lst, err = NewListState(s, ListDescriptor[int64]{Name: "l", Codec: Int64}); err != nil {
		t.Fatal(err)
	}
	if b.mp, err = NewMapState(s, MapDescriptor[int64, []byte]{Name: "m", KeyCodec: Int64, ValueCodec: Bytes}); err != nil {
		t.Fatal(err)
	}
	return b
}

func (b *bigState) key(i int) Key { return b.s.Key(fmt.Appendf(nil, "key-%09d", i)) }

// value is the value of key i written in round r: vlen bytes, recognisable.
func (b *bigState) value(i, r int) []byte {
	v := b.buf[:b.vlen]
	for j := range v {
		v[j] = byte(i*7 + r*13 + j)
	}
	copy(v, fmt.Appendf(nil, "%d/%d/", i, r))
	return v
}

// write runs round r over keys [from, to): a value put, a list add and a map put per key.
func (b *bigState) write(t testing.TB, r, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		k := b.key(i)
		if err := b.val.Put(k, b.value(i, r)); err != nil {
			t.Fatalf("round %d key %d: value put: %v (stats %+v)", r, i, err, b.s.Stats())
		}
		if err := b.lst.Add(k, int64(r)); err != nil {
			t.Fatalf("round %d key %d: list add: %v", r, i, err)
		}
		if err := b.mp.Put(k, int64(r%4), b.value(i, r)[:b.vlen/4]); err != nil {
			t.Fatalf("round %d key %d: map put: %v", r, i, err)
		}
	}
}

// check reads every key back after rounds complete rounds.
func (b *bigState) check(t testing.TB, when string, rounds int) {
	t.Helper()
	for i := range b.keys {
		k := b.key(i)
		v, ok, err := b.val.Get(k)
		if want := b.value(i, rounds-1); !ok || err != nil || string(v) != string(want) {
			t.Fatalf("%s: value %d = %.24q %v %v, want %.24q", when, i, v, ok, err, want)
		}
		it := b.lst.Get(k)
		n := 0
		for it.Next() {
			if it.Value() != int64(n) {
				t.Fatalf("%s: list %d element %d = %d", when, i, n, it.Value())
			}
			n++
		}
		if it.Err() != nil || n != rounds {
			t.Fatalf("%s: list %d has %d elements (%v), want %d", when, i, n, it.Err(), rounds)
		}
		seen := 0
		mi := b.mp.Iterator(k)
		for mi.Next() {
			uk := mi.Key()
			last := -1
			for r := range rounds {
				if int64(r%4) == uk {
					last = r
				}
			}
			if last < 0 || string(mi.Value()) != string(b.value(i, last)[:b.vlen/4]) {
				t.Fatalf("%s: map %d[%d] = %.16q (last round %d)", when, i, uk, mi.Value(), last)
			}
			seen++
		}
		if mi.Err() != nil || seen != min(rounds, 4) {
			t.Fatalf("%s: map %d has %d entries (%v), want %d", when, i, seen, mi.Err(), min(rounds, 4))
		}
	}
}

// TestLSMRoundTrip: state several times a 64 MiB budget, in value, list and map state, is
// evicted to the LsmStore while it is written, reads back through all three tiers, is
// persisted by Close and recovered by Open (registry, sequence numbers), and keeps being
// written after the reopen.
func TestLSMRoundTrip(t *testing.T) {
	fs := vfs.NewMem()
	opts := Options{MemoryBudget: 64 << 20, SegmentSize: 16 << 20, BackgroundWorkers: 2}
	keys, vlen := 40000, 1000
	if testing.Short() {
		keys = 20000
	}
	s, err := openFS(fs, "/db", opts)
	if err != nil {
		t.Fatal(err)
	}
	b := newBigState(t, s, keys, vlen)
	b.write(t, 0, 0, keys)
	b.write(t, 1, 0, keys)
	b.check(t, "before close", 2)
	st := s.Stats()
	t.Logf("before close: %+v", st)
	if st.Evictions+st.Flushes == 0 || st.LSMFiles == 0 || st.BudgetUsed > st.BudgetLimit {
		t.Fatalf("nothing evicted to the LSM: %+v", st)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = openFS(fs, "/db", opts)
	if err != nil {
		t.Fatal(err)
	}
	b = newBigState(t, s, keys, vlen)
	b.check(t, "after reopen", 2)
	b.write(t, 2, 0, keys)
	b.check(t, "after reopen and a round", 3)
	t.Logf("after reopen: %+v", s.Stats())
	if _, err := NewValueState(s, ValueDescriptor[int64]{Name: "v", Codec: Int64}); !errors.Is(err, ErrIncompatibleState) {
		t.Fatalf("registering v with another codec: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Registry checks on reopen.
	s, err = openFS(fs, "/db", opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewListState(s, ListDescriptor[string]{Name: "l", Codec: String}); !errors.Is(err, ErrIncompatibleState) {
		t.Fatalf("registering l with another codec after reopen: %v", err)
	}
	if _, err := NewValueState(s, ValueDescriptor[int64]{Name: "m", Codec: Int64}); !errors.Is(err, ErrIncompatibleState) {
		t.Fatalf("registering map m as a value after reopen: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	o2 := opts
	o2.MaxParallelism = 256
	if _, err := openFS(fs, "/db", o2); !errors.Is(err, ErrIncompatibleStore) {
		t.Fatalf("reopen with another MaxParallelism: %v", err)
	}
	o2 = opts
	o2.KeyGroups = &KeyGroupRange{Start: 0, End: 63}
	if _, err := openFS(fs, "/db", o2); !errors.Is(err, ErrIncompatibleStore) {
		t.Fatalf("reopen with another key-group range: %v", err)
	}
	s, err = openFS(fs, "/db", opts)
	if err != nil {
		t.Fatal(err)
	}
	b = newBigState(t, s, keys, vlen)
	b.check(t, "third open", 3)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}
