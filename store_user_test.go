package strata_test

// Adversarial tests of the public API as a user sees it (package strata_test, real
// directories): every state kind with namespaces across Close/Open, incompatible reopen,
// registration of another kind or codec after reopen, two Stores on one directory, Close
// twice, use after Close.

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/strata-db/strata"
)

type userStates struct {
	v *strata.ValueState[string]
	l *strata.ListState[int64]
	m *strata.MapState[string, float64]
	r *strata.ReducingState[int64]
	a *strata.AggregatingState[int64, int64, string]
}

func registerUser(s *strata.Store) (st userStates, err error) {
	if st.v, err = strata.NewValueState(s, strata.ValueDescriptor[string]{Name: "v", Codec: strata.String}); err != nil {
		return
	}
	if st.l, err = strata.NewListState(s, strata.ListDescriptor[int64]{Name: "l", Codec: strata.Int64}); err != nil {
		return
	}
	if st.m, err = strata.NewMapState(s, strata.MapDescriptor[string, float64]{Name: "m", KeyCodec: strata.String, ValueCodec: strata.Float64}); err != nil {
		return
	}
	if st.r, err = strata.NewReducingState(s, strata.ReducingDescriptor[int64]{Name: "r", Codec: strata.Int64,
		Reduce: func(a, b int64) int64 { return a + b }}); err != nil {
		return
	}
	st.a, err = strata.NewAggregatingState(s, strata.AggregatingDescriptor[int64, int64, string]{Name: "a", AccCodec: strata.Int64,
		CreateAccumulator: func() int64 { return 0 }, Add: func(in, acc int64) int64 { return acc + in },
		GetResult: func(acc int64) string { return fmt.Sprint("sum=", acc) }, Merge: func(a, b int64) int64 { return a + b }})
	return
}

var userNS = []string{"", "w1", "w2"}

func userWrite(t *testing.T, s *strata.Store, st userStates, from, to int, tag string) {
	t.Helper()
	for i := from; i < to; i++ {
		k := s.Key(fmt.Appendf(nil, "user-%d", i))
		for _, ns := range userNS {
			kk := k.In([]byte(ns))
			for _, err := range []error{
				st.v.Put(kk, fmt.Sprint(tag, i, ns)),
				st.l.AddAll(kk, []int64{int64(i), int64(i + 1)}),
				st.m.Put(kk, "x"+ns, float64(i)/3),
				st.m.Put(kk, "y", float64(i)),
				st.r.Add(kk, int64(i)),
				st.r.Add(kk, 1),
				st.a.Add(kk, int64(i)),
			} {
				if err != nil {
					t.Fatalf("write %d %q: %v", i, ns, err)
				}
			}
		}
	}
}

// userCheck returns the number of wrong reads over [from, to) and the first read error.
func userCheck(s *strata.Store, st userStates, from, to int, tag string) (bad int, first error) {
	note := func(err error) {
		bad++
		if first == nil {
			first = err
		}
	}
	for i := from; i < to; i++ {
		k := s.Key(fmt.Appendf(nil, "user-%d", i))
		for _, ns := range userNS {
			kk := k.In([]byte(ns))
			if v, ok, err := st.v.Get(kk); err != nil || !ok || v != fmt.Sprint(tag, i, ns) {
				note(fmt.Errorf("value %d %q: %q %v %v", i, ns, v, ok, err))
			}
			it := st.l.Get(kk)
			var got []int64
			for it.Next() {
				got = append(got, it.Value())
			}
			if it.Err() != nil || !slices.Equal(got, []int64{int64(i), int64(i + 1)}) {
				note(fmt.Errorf("list %d %q: %v %v", i, ns, got, it.Err()))
			}
			n := 0
			mi := st.m.Iterator(kk)
			for mi.Next() {
				n++
			}
			if f, ok, err := st.m.Get(kk, "x"+ns); err != nil || !ok || f != float64(i)/3 || n != 2 || mi.Err() != nil {
				note(fmt.Errorf("map %d %q: %v %v %v, %d entries", i, ns, f, ok, err, n))
			}
			if r, ok, err := st.r.Get(kk); err != nil || !ok || r != int64(i+1) {
				note(fmt.Errorf("reducing %d %q: %v %v %v", i, ns, r, ok, err))
			}
			if a, ok, err := st.a.Get(kk); err != nil || !ok || a != fmt.Sprint("sum=", i) {
				note(fmt.Errorf("aggregating %d %q: %v %v %v", i, ns, a, ok, err))
			}
		}
	}
	return bad, first
}

var userOpts = strata.Options{MaxParallelism: 256, MemoryBudget: 64 << 20, SegmentSize: 16 << 20}

// TestAttackUserRoundTrip: every state kind in three namespaces survives Close/Open, twice;
// a session that registers only some states keeps the others' data for a later session.
func TestAttackUserRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nested", "store")
	s, err := strata.Open(dir, userOpts)
	if err != nil {
		t.Fatal(err)
	}
	st, err := registerUser(s)
	if err != nil {
		t.Fatal(err)
	}
	userWrite(t, s, st, 0, 3000, "a")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// A session that registers nothing but one state, and writes nothing.
	s, err = strata.Open(dir, userOpts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := strata.NewValueState(s, strata.ValueDescriptor[string]{Name: "v", Codec: strata.String}); err != nil {
		t.Fatal(err)
	}
	if _, err := strata.NewValueState(s, strata.ValueDescriptor[int64]{Name: "new-in-2", Codec: strata.Int64}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = strata.Open(dir, userOpts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if st, err = registerUser(s); err != nil {
		t.Fatal(err)
	}
	if bad, first := userCheck(s, st, 0, 3000, "a"); bad != 0 {
		t.Fatalf("%d bad reads after two reopens, first: %v", bad, first)
	}
}

// TestAttackUserIncompatible: another MaxParallelism or key-group range is ErrIncompatibleStore
// (the directory stays usable), and registering a persisted name with another kind or codec
// as the first registration after reopen is ErrIncompatibleState.
func TestAttackUserIncompatible(t *testing.T) {
	dir := t.TempDir()
	s, err := strata.Open(dir, userOpts)
	if err != nil {
		t.Fatal(err)
	}
	st, err := registerUser(s)
	if err != nil {
		t.Fatal(err)
	}
	userWrite(t, s, st, 0, 100, "a")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, o := range []strata.Options{
		{MaxParallelism: 128, MemoryBudget: 64 << 20, SegmentSize: 16 << 20},
		{MaxParallelism: 256, KeyGroups: &strata.KeyGroupRange{Start: 0, End: 127}, MemoryBudget: 64 << 20, SegmentSize: 16 << 20},
		{MemoryBudget: 64 << 20, SegmentSize: 16 << 20}, // default MaxParallelism 128
	} {
		s, err := strata.Open(dir, o)
		if !errors.Is(err, strata.ErrIncompatibleStore) {
			if s != nil {
				s.Close()
			}
			t.Fatalf("open with %d/%v: %v, want ErrIncompatibleStore", o.MaxParallelism, o.KeyGroups, err)
		}
	}
	// Another segment size and budget are fine.
	o := userOpts
	o.SegmentSize, o.MemoryBudget = 32<<20, 256<<20
	s, err = strata.Open(dir, o)
	if err != nil {
		t.Fatalf("open with another segment size: %v", err)
	}
	for _, tc := range []struct {
		name string
		reg  func() error
	}{
		{"value as list", func() error {
			_, err := strata.NewListState(s, strata.ListDescriptor[string]{Name: "v", Codec: strata.String})
			return err
		}},
		{"value with bytes codec", func() error {
			_, err := strata.NewValueState(s, strata.ValueDescriptor[[]byte]{Name: "v", Codec: strata.Bytes})
			return err
		}},
		{"list with uint64 codec", func() error {
			_, err := strata.NewListState(s, strata.ListDescriptor[uint64]{Name: "l", Codec: strata.Uint64})
			return err
		}},
		{"map with other value codec", func() error {
			_, err := strata.NewMapState(s, strata.MapDescriptor[string, int64]{Name: "m", KeyCodec: strata.String, ValueCodec: strata.Int64})
			return err
		}},
		{"reducing as aggregating", func() error {
			_, err := strata.NewAggregatingState(s, strata.AggregatingDescriptor[int64, int64, int64]{Name: "r", AccCodec: strata.Int64,
				CreateAccumulator: func() int64 { return 0 }, Add: func(in, acc int64) int64 { return acc + in },
				GetResult: func(acc int64) int64 { return acc }, Merge: func(a, b int64) int64 { return a + b }})
			return err
		}},
		{"aggregating as reducing", func() error {
			_, err := strata.NewReducingState(s, strata.ReducingDescriptor[int64]{Name: "a", Codec: strata.Int64,
				Reduce: func(a, b int64) int64 { return a + b }})
			return err
		}},
	} {
		if err := tc.reg(); !errors.Is(err, strata.ErrIncompatibleState) {
			t.Errorf("%s after reopen: %v, want ErrIncompatibleState", tc.name, err)
		}
	}
	// The refused registrations changed nothing: the right ones read everything.
	st, err = registerUser(s)
	if err != nil {
		t.Fatal(err)
	}
	if bad, first := userCheck(s, st, 0, 100, "a"); bad != 0 {
		t.Fatalf("%d bad reads, first: %v", bad, first)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestAttackUserCloseTwice: a second Close and every operation after Close give ErrClosed.
func TestAttackUserCloseTwice(t *testing.T) {
	dir := t.TempDir()
	s, err := strata.Open(dir, userOpts)
	if err != nil {
		t.Fatal(err)
	}
	st, err := registerUser(s)
	if err != nil {
		t.Fatal(err)
	}
	userWrite(t, s, st, 0, 10, "a")
	k := s.Key([]byte("user-1"))
	it := st.l.Get(k)
	mi := st.m.Iterator(k)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); !errors.Is(err, strata.ErrClosed) {
		t.Errorf("second Close: %v", err)
	}
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, strata.ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", what, err)
		}
	}
	_, _, err = st.v.Get(k)
	check("value Get", err)
	check("value Put", st.v.Put(k, "x"))
	check("list Add", st.l.Add(k, 1))
	l2 := st.l.Get(k)
	if l2.Next() {
		t.Error("list Get after Close yields")
	}
	check("list Get", l2.Err())
	if it.Next() {
		t.Error("an iterator taken before Close yields after it")
	}
	check("list iterator", it.Err())
	if mi.Next() {
		t.Error("a map iterator taken before Close yields after it")
	}
	check("map iterator", mi.Err())
	_, err = st.m.IsEmpty(k)
	check("map IsEmpty", err)
	_, err = st.m.Contains(k, "y")
	check("map Contains", err)
	check("reducing Add", st.r.Add(k, 1))
	check("aggregating Add", st.a.Add(k, 1))
	check("merge", st.r.MergeNamespaces(k, nil, []byte("w1")))
	_, err = strata.NewValueState(s, strata.ValueDescriptor[string]{Name: "late", Codec: strata.String})
	check("NewValueState", err)
	_ = s.Stats()
	// The directory reopens with the writes.
	s, err = strata.Open(dir, userOpts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, _ = registerUser(s)
	if bad, first := userCheck(s, st, 0, 10, "a"); bad != 0 {
		t.Fatalf("%d bad reads, first: %v", bad, first)
	}
}

// TestAttackUserDoubleOpen: a second Store over a directory another Store has open. Without a
// directory lock both Stores numbered their files from the same listing, each Open deleted the
// other's manifest as obsolete, and Close truncated and rewrote the other's tables (vfs Create
// is O_TRUNC). The lock refuses the second Open with ErrLocked, the first Store goes on, and
// the directory reopens to what it persisted.
func TestAttackUserDoubleOpen(t *testing.T) {
	for _, order := range []string{"first-closes-first", "second-closes-first"} {
		t.Run(order, func(t *testing.T) {
			dir := t.TempDir()
			s1, err := strata.Open(dir, userOpts)
			if err != nil {
				t.Fatal(err)
			}
			st1, _ := registerUser(s1)
			userWrite(t, s1, st1, 0, 2000, "a")
			if err := s1.Close(); err != nil {
				t.Fatal(err)
			}
			s1, err = strata.Open(dir, userOpts)
			if err != nil {
				t.Fatal(err)
			}
			st1, _ = registerUser(s1)
			userWrite(t, s1, st1, 2000, 4000, "b")
			s2, err := strata.Open(dir, userOpts)
			if err == nil {
				st2, _ := registerUser(s2)
				userWrite(t, s2, st2, 4000, 6000, "c")
				t.Fatalf("a second Open of a directory in use succeeded (Close: %v / %v)", s1.Close(), s2.Close())
			}
			if !errors.Is(err, strata.ErrLocked) {
				t.Fatalf("second Open: %v, want ErrLocked", err)
			}
			t.Logf("second Open refused: %v", err)
			if order == "second-closes-first" {
				// The refused Open took nothing: the first Store's writes go on.
				userWrite(t, s1, st1, 4000, 6000, "c")
			}
			if err := s1.Close(); err != nil {
				t.Fatal(err)
			}
			s, err := strata.Open(dir, userOpts)
			if err != nil {
				t.Fatalf("reopen after the first Store closed: %v", err)
			}
			defer s.Close()
			st, _ := registerUser(s)
			checks := []struct {
				lo, hi int
				v      string
			}{{0, 2000, "a"}, {2000, 4000, "b"}}
			if order == "second-closes-first" {
				checks = append(checks, struct {
					lo, hi int
					v      string
				}{4000, 6000, "c"})
			}
			for _, c := range checks {
				if bad, err := userCheck(s, st, c.lo, c.hi, c.v); bad != 0 || err != nil {
					t.Fatalf("keys [%d, %d): %d bad reads, %v", c.lo, c.hi, bad, err)
				}
			}
		})
	}
}
