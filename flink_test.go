package strata

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
)

// Flink semantics, state kind by state kind, as a Flink user relies on them. Every table runs
// twice: with all data in the active segment, and with the data sealed first, so that reads
// and writes cross segments.

// allStates is one state of every kind on one Store, with an operation table that covers
// every state operation (used by the key-group, closed and budget tests).
type allStates struct {
	s   *Store
	val *ValueState[int64]
	lst *ListState[int64]
	mp  *MapState[string, int64]
	red *ReducingState[int64]
	agg *AggregatingState[int64, avgAcc, float64]
}

func newAllStates(t testing.TB, s *Store) *allStates {
	t.Helper()
	return &allStates{
		s:   s,
		val: must(NewValueState(s, ValueDescriptor[int64]{Name: "val", Codec: Int64})),
		lst: must(NewListState(s, ListDescriptor[int64]{Name: "lst", Codec: Int64})),
		mp:  must(NewMapState(s, MapDescriptor[string, int64]{Name: "map", KeyCodec: String, ValueCodec: Int64})),
		red: must(NewReducingState(s, ReducingDescriptor[int64]{Name: "red", Codec: Int64, Reduce: func(a, b int64) int64 { return a + b }})),
		agg: must(NewAggregatingState(s, avgDescriptor("agg"))),
	}
}

// ops returns every state operation on k, each reporting its error. Iterators report the
// error through Err; Entries, Keys and Values (which cannot report errors) must yield nothing,
// and a yielded element is turned into an error.
func (a *allStates) ops(k Key) map[string]func() error {
	ns := []byte("other")
	yielded := errors.New("sequence yielded an element")
	return map[string]func() error{
		"value/Get":   func() error { _, _, err := a.val.Get(k); return err },
		"value/Put":   func() error { return a.val.Put(k, 1) },
		"value/Clear": func() error { return a.val.Clear(k) },

		"list/Add":             func() error { return a.lst.Add(k, 1) },
		"list/AddAll":          func() error { return a.lst.AddAll(k, []int64{1, 2}) },
		"list/AddAll(empty)":   func() error { return a.lst.AddAll(k, nil) },
		"list/Update":          func() error { return a.lst.Update(k, []int64{3}) },
		"list/Update(empty)":   func() error { return a.lst.Update(k, nil) },
		"list/Get":             func() error { it := a.lst.Get(k); it.Next(); return it.Err() },
		"list/Clear":           func() error { return a.lst.Clear(k) },
		"list/MergeNamespaces": func() error { return a.lst.MergeNamespaces(k, nil, ns) },

		"map/Get":           func() error { _, _, err := a.mp.Get(k, "u"); return err },
		"map/Contains":      func() error { _, err := a.mp.Contains(k, "u"); return err },
		"map/Put":           func() error { return a.mp.Put(k, "u", 1) },
		"map/PutAll":        func() error { return a.mp.PutAll(k, maps.All(map[string]int64{"p": 1})) },
		"map/PutAll(empty)": func() error { return a.mp.PutAll(k, maps.All(map[string]int64{})) },
		"map/Remove":        func() error { return a.mp.Remove(k, "u") },
		"map/IsEmpty":       func() error { _, err := a.mp.IsEmpty(k); return err },
		"map/Clear":         func() error { return a.mp.Clear(k) },
		"map/Iterator":      func() error { it := a.mp.Iterator(k); it.Next(); return it.Err() },
		"map/Entries": func() error {
			seq, errf := a.mp.Entries(k)
			for range seq {
				return yielded
			}
			return errf()
		},
		"map/Keys": func() error {
			seq, errf := a.mp.Keys(k)
			for range seq {
				return yielded
			}
			return errf()
		},
		"map/Values": func() error {
			seq, errf := a.mp.Values(k)
			for range seq {
				return yielded
			}
			return errf()
		},

		"reducing/Get":             func() error { _, _, err := a.red.Get(k); return err },
		"reducing/Add":             func() error { return a.red.Add(k, 1) },
		"reducing/Clear":           func() error { return a.red.Clear(k) },
		"reducing/MergeNamespaces": func() error { return a.red.MergeNamespaces(k, nil, ns) },

		"aggregating/Get":             func() error { _, _, err := a.agg.Get(k); return err },
		"aggregating/Add":             func() error { return a.agg.Add(k, 1) },
		"aggregating/Clear":           func() error { return a.agg.Clear(k) },
		"aggregating/MergeNamespaces": func() error { return a.agg.MergeNamespaces(k, nil, ns) },
	}
}

// sequence ops cannot report an error; the tests accept nil from them where others must fail.
func isSeqOp(name string) bool {
	return name == "map/Entries" || name == "map/Keys" || name == "map/Values"
}

// fill writes one value of every kind under k (in its namespace).
func (a *allStates) fill(t testing.TB, k Key, x int64) {
	t.Helper()
	must(0, a.val.Put(k, x))
	must(0, a.lst.AddAll(k, []int64{x, x + 1}))
	must(0, a.mp.Put(k, "u", x))
	must(0, a.red.Add(k, x))
	must(0, a.agg.Add(k, x))
}

// snapshot reads every kind under k into a comparable string ("-" for absent).
func (a *allStates) snapshot(t testing.TB, k Key) string {
	t.Helper()
	var b bytes.Buffer
	if v, ok, err := a.val.Get(k); err != nil {
		t.Fatal(err)
	} else if ok {
		fmt.Fprintf(&b, "val=%d ", v)
	} else {
		b.WriteString("val=- ")
	}
	fmt.Fprintf(&b, "lst=%v ", listOf(t, a.lst, k))
	it := a.mp.Iterator(k)
	m := map[string]int64{}
	for it.Next() {
		m[it.Key()] = it.Value()
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&b, "map=%v ", m)
	if v, ok, err := a.red.Get(k); err != nil {
		t.Fatal(err)
	} else if ok {
		fmt.Fprintf(&b, "red=%d ", v)
	} else {
		b.WriteString("red=- ")
	}
	if v, ok, err := a.agg.Get(k); err != nil {
		t.Fatal(err)
	} else if ok {
		fmt.Fprintf(&b, "agg=%v", v)
	} else {
		b.WriteString("agg=-")
	}
	return b.String()
}

const absentSnapshot = "val=- lst=[] map=map[] red=- agg=-"

// forSealed runs f three times: with seal a no-op (data in the active segment); with seal
// sealing the active segment (its transform runs in the background and is installed at some
// later write, so reads cross segments and, from then on, tiers); and with seal sealing and
// installing the transform at once (data in the SliceTable).
func forSealed(t *testing.T, f func(t *testing.T, s *Store, seal func())) {
	for _, tier := range []string{"active", "sealed", "slices"} {
		t.Run("tier="+tier, func(t *testing.T) {
			s := openTest(t, Options{})
			seal := func() {
				if tier == "active" {
					return
				}
				if err := s.seal(); err != nil {
					t.Fatal(err)
				}
				if tier == "slices" {
					if err := s.e.Drain(); err != nil {
						t.Fatal(err)
					}
				}
			}
			f(t, s, seal)
		})
	}
}

// TestFlinkAbsent: every read of an absent key is (zero, false, nil) or an empty sequence,
// as Flink returns null or an empty iterable.
func TestFlinkAbsent(t *testing.T) {
	forSealed(t, func(t *testing.T, s *Store, seal func()) {
		a := newAllStates(t, s)
		other := s.Key([]byte("other"))
		a.fill(t, other, 7) // something in the table, under another key
		seal()
		k := s.Key([]byte("absent"))
		if got := a.snapshot(t, k); got != absentSnapshot {
			t.Fatalf("absent key reads %q", got)
		}
		if v, ok, err := a.val.Get(k); v != 0 || ok || err != nil {
			t.Fatalf("ValueState.Get(absent) = %v, %v, %v", v, ok, err)
		}
		if v, ok, err := a.red.Get(k); v != 0 || ok || err != nil {
			t.Fatalf("ReducingState.Get(absent) = %v, %v, %v", v, ok, err)
		}
		if v, ok, err := a.agg.Get(k); v != 0 || ok || err != nil {
			t.Fatalf("AggregatingState.Get(absent) = %v, %v, %v", v, ok, err)
		}
		if v, ok, err := a.mp.Get(k, "u"); v != 0 || ok || err != nil {
			t.Fatalf("MapState.Get(absent) = %v, %v, %v", v, ok, err)
		}
		if c, err := a.mp.Contains(k, "u"); c || err != nil {
			t.Fatalf("MapState.Contains(absent) = %v, %v", c, err)
		}
		if e, err := a.mp.IsEmpty(k); !e || err != nil {
			t.Fatalf("MapState.IsEmpty(absent) = %v, %v", e, err)
		}
		// Cleared keys read as absent too.
		for _, kk := range []Key{other, k} {
			must(0, a.val.Clear(kk))
			must(0, a.lst.Clear(kk))
			must(0, a.mp.Clear(kk))
			must(0, a.red.Clear(kk))
			must(0, a.agg.Clear(kk))
			if got := a.snapshot(t, kk); got != absentSnapshot {
				t.Fatalf("cleared key reads %q", got)
			}
		}
	})
}

// TestFlinkListSemantics: ListState.update with null or an empty list removes the list,
// addAll of an empty list is a no-op, and a cleared list yields nothing.
func TestFlinkListSemantics(t *testing.T) {
	forSealed(t, func(t *testing.T, s *Store, seal func()) {
		l := must(NewListState(s, ListDescriptor[int64]{Name: "l", Codec: Int64}))
		k := s.Key([]byte("k"))
		for i, step := range []struct {
			op   string
			xs   []int64
			want []int64
		}{
			{"get", nil, nil},
			{"addall", []int64{}, nil}, // no-op on an absent list: still absent
			{"addall", nil, nil},
			{"update", []int64{}, nil},
			{"update", nil, nil},
			{"add", []int64{1}, []int64{1}},
			{"seal", nil, []int64{1}},
			{"addall", []int64{2, 3}, []int64{1, 2, 3}},
			{"addall", []int64{}, []int64{1, 2, 3}}, // no-op on a present list
			{"addall", nil, []int64{1, 2, 3}},
			{"seal", nil, []int64{1, 2, 3}},
			{"update", nil, nil}, // Flink: update(null) removes the list
			{"add", []int64{4}, []int64{4}},
			{"seal", nil, []int64{4}},
			{"update", []int64{}, nil}, // Flink: update(empty) removes the list
			{"update", []int64{5, 6}, []int64{5, 6}},
			{"seal", nil, []int64{5, 6}},
			{"add", []int64{7}, []int64{5, 6, 7}},
			{"clear", nil, nil},
			{"add", []int64{8}, []int64{8}},
		} {
			switch step.op {
			case "add":
				must(0, l.Add(k, step.xs[0]))
			case "addall":
				before := s.Stats().Fresh.Records
				must(0, l.AddAll(k, step.xs))
				if len(step.xs) == 0 && s.Stats().Fresh.Records != before {
					t.Fatalf("step %d: AddAll(empty) wrote a record", i)
				}
			case "update":
				must(0, l.Update(k, step.xs))
			case "clear":
				must(0, l.Clear(k))
			case "seal":
				seal()
			}
			if got := listOf(t, l, k); !slices.Equal(got, step.want) {
				t.Fatalf("step %d (%s %v): list = %v, want %v", i, step.op, step.xs, got, step.want)
			}
		}
	})
}

// TestFlinkMapSemantics: remove of an absent user key is a no-op, isEmpty after removing every
// entry is true, and the iterator's remove and puts to other keys during iteration.
func TestFlinkMapSemantics(t *testing.T) {
	forSealed(t, func(t *testing.T, s *Store, seal func()) {
		m := must(NewMapState(s, MapDescriptor[string, int64]{Name: "m", KeyCodec: String, ValueCodec: Int64}))
		k := s.Key([]byte("k"))
		k2 := s.Key([]byte("k2"))
		entries := func(k Key) map[string]int64 {
			t.Helper()
			it := m.Iterator(k)
			got := map[string]int64{}
			for it.Next() {
				got[it.Key()] = it.Value()
			}
			if err := it.Err(); err != nil {
				t.Fatal(err)
			}
			return got
		}

		// Remove of absent: on an absent map, and on a present one.
		must(0, m.Remove(k, "nope"))
		if e, _ := m.IsEmpty(k); !e {
			t.Fatal("Remove on an absent map created an entry")
		}
		must(0, m.Put(k, "a", 1))
		must(0, m.Put(k, "b", 2))
		seal()
		must(0, m.Remove(k, "nope"))
		if got := entries(k); !maps.Equal(got, map[string]int64{"a": 1, "b": 2}) {
			t.Fatalf("after Remove(absent): %v", got)
		}
		// IsEmpty after removing every entry, one sealed away and one in the active segment.
		must(0, m.Remove(k, "a"))
		seal()
		must(0, m.Remove(k, "b"))
		if e, err := m.IsEmpty(k); !e || err != nil {
			t.Fatalf("IsEmpty after removing all = %v, %v", e, err)
		}
		if got := entries(k); len(got) != 0 {
			t.Fatalf("entries after removing all: %v", got)
		}
		if c, _ := m.Contains(k, "a"); c {
			t.Fatal("Contains(removed)")
		}

		// Iterator: remove the current entry, then continue; put into another key's map
		// and to a user key already visited while iterating.
		want := map[string]int64{}
		for i := range 50 {
			uk := fmt.Sprint("e", i)
			must(0, m.Put(k, uk, int64(i)))
			want[uk] = int64(i)
			if i == 25 {
				seal()
			}
		}
		it := m.Iterator(k)
		seen := map[string]int64{}
		n := 0
		for it.Next() {
			uk, v := it.Key(), it.Value()
			if _, dup := seen[uk]; dup {
				t.Fatalf("%q yielded twice", uk)
			}
			seen[uk] = v
			if v%3 == 0 {
				if err := it.Remove(); err != nil {
					t.Fatal(err)
				}
				delete(want, uk)
			}
			must(0, m.Put(k2, uk, v*10)) // another key's map
			n++
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
		if n != 50 {
			t.Fatalf("iterated %d entries, want 50", n)
		}
		if got := entries(k); !maps.Equal(got, want) {
			t.Fatalf("after iterator removal: %v, want %v", got, want)
		}
		if got := entries(k2); len(got) != 50 || got["e7"] != 70 {
			t.Fatalf("map of k2 written during iteration: %d entries, e7=%d", len(got), got["e7"])
		}
		// Remove after the end, and twice, is ErrNoEntry.
		if err := it.Remove(); !errors.Is(err, ErrNoEntry) {
			t.Fatalf("Remove after the end = %v", err)
		}
		// Clear then IsEmpty.
		must(0, m.Clear(k))
		if e, _ := m.IsEmpty(k); !e {
			t.Fatal("IsEmpty after Clear = false")
		}
		if e, _ := m.IsEmpty(k2); e {
			t.Fatal("Clear of k cleared k2")
		}
	})
}

// TestFlinkMergeNamespaces: Flink's InternalMergingState.mergeNamespaces for list, reducing and
// aggregating state: sources merged into the target and cleared, absent sources ignored, an
// absent target set to the only present source, a target listed among the sources neither
// lost nor counted twice, nothing created when no source is present, and other keys and
// namespaces untouched.
func TestFlinkMergeNamespaces(t *testing.T) {
	ns := func(s string) []byte { return []byte(s) }
	type merger struct {
		name  string
		add   func(k Key, x int64)
		get   func(k Key) (string, bool) // a canonical rendering (sum for reducing, avg for aggregating)
		merge func(k Key, target []byte, sources ...[]byte) error
	}
	forSealed(t, func(t *testing.T, s *Store, seal func()) {
		a := newAllStates(t, s)
		mergers := []merger{
			{"list",
				func(k Key, x int64) { must(0, a.lst.Add(k, x)) },
				func(k Key) (string, bool) {
					l := listOf(t, a.lst, k)
					return fmt.Sprint(l), len(l) > 0
				},
				a.lst.MergeNamespaces},
			{"reducing",
				func(k Key, x int64) { must(0, a.red.Add(k, x)) },
				func(k Key) (string, bool) { v, ok, err := a.red.Get(k); must(0, err); return fmt.Sprint(v), ok },
				a.red.MergeNamespaces},
			{"aggregating",
				func(k Key, x int64) { must(0, a.agg.Add(k, x)) },
				func(k Key) (string, bool) { v, ok, err := a.agg.Get(k); must(0, err); return fmt.Sprint(v), ok },
				a.agg.MergeNamespaces},
		}
		type mergeCase struct {
			name    string
			present map[string][]int64 // namespace -> values added
			target  string
			sources []string
			want    map[string]string // namespace -> rendering after the merge ("" = absent)
		}
		cases := []mergeCase{
			{"into present target",
				map[string][]int64{"t": {1}, "a": {2}, "b": {4}},
				"t", []string{"a", "b"},
				map[string]string{"list": "[1 2 4]", "reducing": "7", "aggregating": fmt.Sprint(7.0 / 3)}},
			{"absent sources ignored",
				map[string][]int64{"t": {1}, "a": {2}},
				"t", []string{"x", "a", "y"},
				map[string]string{"list": "[1 2]", "reducing": "3", "aggregating": "1.5"}},
			{"absent target, one source",
				map[string][]int64{"a": {5, 6}},
				"t", []string{"a"},
				map[string]string{"list": "[5 6]", "reducing": "11", "aggregating": "5.5"}},
			{"absent target, sources absent too",
				map[string][]int64{},
				"t", []string{"a", "b"},
				map[string]string{"list": "", "reducing": "", "aggregating": ""}},
			{"target among sources",
				map[string][]int64{"t": {1}, "a": {2}},
				"t", []string{"a", "t"},
				map[string]string{"list": "[1 2]", "reducing": "3", "aggregating": "1.5"}},
			{"only the target as source",
				map[string][]int64{"t": {3}},
				"t", []string{"t"},
				map[string]string{"list": "[3]", "reducing": "3", "aggregating": "3"}},
			{"repeated source",
				map[string][]int64{"t": {1}, "a": {2}},
				"t", []string{"a", "a"},
				map[string]string{"list": "[1 2]", "reducing": "3", "aggregating": "1.5"}},
			{"void namespace target",
				map[string][]int64{"": {1}, "a": {2}},
				"", []string{"a"},
				map[string]string{"list": "[1 2]", "reducing": "3", "aggregating": "1.5"}},
			{"no sources",
				map[string][]int64{"t": {1}},
				"t", nil,
				map[string]string{"list": "[1]", "reducing": "1", "aggregating": "1"}},
		}
		keyOf := func(m merger, tc mergeCase) (key, bystander Key) {
			return s.Key([]byte(m.name + "/" + tc.name)), s.Key([]byte(m.name + "/" + tc.name + "/bystander"))
		}
		// Write every case's state first, then seal once, so that merges read across segments.
		for _, m := range mergers {
			for _, tc := range cases {
				key, bystander := keyOf(m, tc)
				for n, xs := range tc.present {
					for _, x := range xs {
						m.add(key.In(ns(n)), x)
					}
				}
				for _, n := range []string{"t", "a", "b", ""} {
					m.add(bystander.In(ns(n)), 100) // same namespaces, another key
				}
				m.add(key.In(ns("z")), 100) // same key, a namespace not in the merge
			}
		}
		seal()
		for _, m := range mergers {
			for _, tc := range cases {
				t.Run(m.name+"/"+tc.name, func(t *testing.T) {
					key, bystander := keyOf(m, tc)
					srcs := make([][]byte, len(tc.sources))
					for i, src := range tc.sources {
						srcs[i] = ns(src)
					}
					if err := m.merge(key, ns(tc.target), srcs...); err != nil {
						t.Fatal(err)
					}
					got, ok := m.get(key.In(ns(tc.target)))
					if want := tc.want[m.name]; (want == "") == ok || ok && got != want {
						t.Fatalf("target = %q, %v; want %q", got, ok, want)
					}
					for _, src := range tc.sources {
						if src == tc.target {
							continue
						}
						if got, ok := m.get(key.In(ns(src))); ok {
							t.Fatalf("source %q not cleared: %q", src, got)
						}
					}
					for _, n := range []string{"t", "a", "b", ""} {
						if got, ok := m.get(bystander.In(ns(n))); !ok || got != map[bool]string{true: "[100]", false: "100"}[m.name == "list"] {
							t.Fatalf("another key's namespace %q changed: %q, %v", n, got, ok)
						}
					}
					if got, ok := m.get(key.In(ns("z"))); !ok || got != map[bool]string{true: "[100]", false: "100"}[m.name == "list"] {
						t.Fatalf("a namespace outside the merge changed: %q, %v", got, ok)
					}
				})
			}
		}
	})
}

// TestFlinkClearScope: Clear clears the current key in the current namespace only, for every
// state kind: other namespaces of the key, other keys in the namespace and other states of the
// same key and namespace keep their values.
func TestFlinkClearScope(t *testing.T) {
	forSealed(t, func(t *testing.T, s *Store, seal func()) {
		a := newAllStates(t, s)
		b := &allStates{s: s,
			val: must(NewValueState(s, ValueDescriptor[int64]{Name: "val2", Codec: Int64})),
			lst: must(NewListState(s, ListDescriptor[int64]{Name: "lst2", Codec: Int64})),
			mp:  must(NewMapState(s, MapDescriptor[string, int64]{Name: "map2", KeyCodec: String, ValueCodec: Int64})),
			red: must(NewReducingState(s, ReducingDescriptor[int64]{Name: "red2", Codec: Int64, Reduce: func(a, b int64) int64 { return a + b }})),
			agg: must(NewAggregatingState(s, avgDescriptor("agg2"))),
		}
		k := s.Key([]byte("k"))
		w := []byte("window")
		keys := []Key{k, k.In(w), s.Key([]byte("k2")).In(w), s.Key([]byte("k2"))}
		for i, kk := range keys {
			a.fill(t, kk, int64(i+1))
			b.fill(t, kk, int64(i+1))
		}
		want := make([]string, len(keys))
		for i, kk := range keys {
			want[i] = a.snapshot(t, kk)
		}
		seal()
		target := keys[1] // k in the window
		for name, clear := range map[string]func(Key) error{
			"value": a.val.Clear, "list": a.lst.Clear, "map": a.mp.Clear, "reducing": a.red.Clear, "aggregating": a.agg.Clear,
		} {
			if err := clear(target); err != nil {
				t.Fatalf("%s Clear: %v", name, err)
			}
		}
		if got := a.snapshot(t, target); got != absentSnapshot {
			t.Fatalf("cleared key reads %q", got)
		}
		for i, kk := range keys {
			if i != 1 {
				if got := a.snapshot(t, kk); got != want[i] {
					t.Fatalf("key %d changed by another key's Clear: %q, want %q", i, got, want[i])
				}
			}
			if got := b.snapshot(t, kk); got != want[i] {
				t.Fatalf("key %d of another state changed by Clear: %q, want %q", i, got, want[i])
			}
		}
	})
}

// TestFlinkKeyGroupOutOfRange: on a Store owning a partial key-group range, every operation of
// every state kind on a key outside the range fails with ErrKeyGroupOutOfRange and writes
// nothing; inside the range every operation succeeds. Keys use Java's String.hashCode, so the
// key groups are Flink's: with maxParallelism 10, "a" is in key group 1 and "b" in 8.
func TestFlinkKeyGroupOutOfRange(t *testing.T) {
	r := ComputeKeyGroupRangeForOperatorIndex(10, 3, 0) // [0, 3]
	s := openTest(t, Options{MaxParallelism: 10, KeyGroups: &r})
	a := newAllStates(t, s)
	in := s.KeyWithHash([]byte("a"), javaStringHashCode("a"))
	out := s.KeyWithHash([]byte("b"), javaStringHashCode("b"))
	if in.KeyGroup() != 1 || out.KeyGroup() != 8 {
		t.Fatalf(`key groups of "a", "b" = %d, %d; want Flink's 1, 8`, in.KeyGroup(), out.KeyGroup())
	}
	foreign := openTest(t, Options{MaxParallelism: 20}).KeyWithHash([]byte("a"), javaStringHashCode("a"))
	for _, kk := range []Key{in, in.In([]byte("w"))} {
		for name, op := range a.ops(kk) {
			if err := op(); err != nil && !isSeqOp(name) { // in range, a sequence may yield
				t.Errorf("in range: %s: %v", name, err)
			}
		}
	}
	for kname, kk := range map[string]Key{"out of range": out, "out of range in a namespace": out.In([]byte("w")),
		"other MaxParallelism": foreign, "zero Key": {}} {
		before := s.Stats().Fresh.Records
		for name, op := range a.ops(kk) {
			err := op()
			if isSeqOp(name) && err == nil {
				continue
			}
			if !errors.Is(err, ErrKeyGroupOutOfRange) {
				t.Errorf("%s: %s: %v, want ErrKeyGroupOutOfRange", kname, name, err)
			}
		}
		if got := s.Stats().Fresh.Records; got != before {
			t.Errorf("%s: refused operations wrote %d records", kname, got-before)
		}
	}
}

// TestFlinkClosed: after Close every state operation and every registration fails with
// ErrClosed.
func TestFlinkClosed(t *testing.T) {
	s, err := Open("", Options{MemoryBudget: 64 << 20, SegmentSize: 16 << 20})
	if err != nil {
		t.Fatal(err)
	}
	a := newAllStates(t, s)
	k := s.Key([]byte("k"))
	a.fill(t, k, 1)
	must(0, s.Close())
	for name, op := range a.ops(k) {
		err := op()
		if isSeqOp(name) && err == nil {
			continue
		}
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
	for name, reg := range map[string]func() error{
		"value": func() error {
			_, err := NewValueState(s, ValueDescriptor[int64]{Name: "val", Codec: Int64})
			return err
		},
		"list": func() error { _, err := NewListState(s, ListDescriptor[int64]{Name: "new", Codec: Int64}); return err },
		"map": func() error {
			_, err := NewMapState(s, MapDescriptor[string, int64]{Name: "new", KeyCodec: String, ValueCodec: Int64})
			return err
		},
		"reducing": func() error {
			_, err := NewReducingState(s, ReducingDescriptor[int64]{Name: "new", Codec: Int64, Reduce: func(a, b int64) int64 { return a }})
			return err
		},
		"aggregating": func() error { _, err := NewAggregatingState(s, avgDescriptor("new")); return err },
	} {
		if err := reg(); !errors.Is(err, ErrClosed) {
			t.Errorf("register %s after Close: %v, want ErrClosed", name, err)
		}
	}
}

// TestFlinkIncompatibleRegistration: re-registering a name with another kind or codec fails
// with ErrIncompatibleState naming the state, for every pair of kinds.
func TestFlinkIncompatibleRegistration(t *testing.T) {
	s := openTest(t, Options{})
	sum := func(a, b int64) int64 { return a + b }
	reg := map[string]func(name string, other bool) error{
		"value": func(n string, o bool) error {
			if o {
				_, err := NewValueState(s, ValueDescriptor[uint64]{Name: n, Codec: Uint64})
				return err
			}
			_, err := NewValueState(s, ValueDescriptor[int64]{Name: n, Codec: Int64})
			return err
		},
		"list": func(n string, o bool) error {
			if o {
				_, err := NewListState(s, ListDescriptor[string]{Name: n, Codec: String})
				return err
			}
			_, err := NewListState(s, ListDescriptor[int64]{Name: n, Codec: Int64})
			return err
		},
		"map": func(n string, o bool) error {
			if o {
				_, err := NewMapState(s, MapDescriptor[[]byte, int64]{Name: n, KeyCodec: Bytes, ValueCodec: Int64})
				return err
			}
			_, err := NewMapState(s, MapDescriptor[string, int64]{Name: n, KeyCodec: String, ValueCodec: Int64})
			return err
		},
		"reducing": func(n string, o bool) error {
			if o {
				_, err := NewReducingState(s, ReducingDescriptor[float64]{Name: n, Codec: Float64, Reduce: func(a, b float64) float64 { return a }})
				return err
			}
			_, err := NewReducingState(s, ReducingDescriptor[int64]{Name: n, Codec: Int64, Reduce: sum})
			return err
		},
		"aggregating": func(n string, o bool) error {
			if o {
				d := AggregatingDescriptor[int64, int64, int64]{Name: n, AccCodec: Int64,
					CreateAccumulator: func() int64 { return 0 }, Add: sum, GetResult: func(a int64) int64 { return a }, Merge: sum}
				_, err := NewAggregatingState(s, d)
				return err
			}
			_, err := NewAggregatingState(s, avgDescriptor(n))
			return err
		},
	}
	for first, r1 := range reg {
		name := "s-" + first
		if err := r1(name, false); err != nil {
			t.Fatalf("register %s: %v", first, err)
		}
		if err := r1(name, false); err != nil {
			t.Fatalf("re-register %s with the same descriptor: %v", first, err)
		}
		if err := r1(name, true); !errors.Is(err, ErrIncompatibleState) || !contains(err.Error(), name) {
			t.Errorf("%s with another codec: %v, want ErrIncompatibleState naming %q", first, err, name)
		}
		for second, r2 := range reg {
			if second == first {
				continue
			}
			if err := r2(name, false); !errors.Is(err, ErrIncompatibleState) || !contains(err.Error(), name) {
				t.Errorf("%s re-registered as %s: %v, want ErrIncompatibleState naming %q", first, second, err, name)
			}
		}
	}
}

// TestFlinkTooLarge: an oversized key, namespace, user key, value, list element or map value
// fails with ErrKeyTooLarge or ErrValueTooLarge and writes nothing: the state reads as it did
// before, for every writing operation.
func TestFlinkTooLarge(t *testing.T) {
	forSealed(t, func(t *testing.T, s *Store, seal func()) {
		a := newAllStates(t, s)
		bval := must(NewValueState(s, ValueDescriptor[[]byte]{Name: "bval", Codec: Bytes}))
		blst := must(NewListState(s, ListDescriptor[[]byte]{Name: "blst", Codec: Bytes}))
		bmap := must(NewMapState(s, MapDescriptor[[]byte, []byte]{Name: "bmap", KeyCodec: Bytes, ValueCodec: Bytes}))
		bred := must(NewReducingState(s, ReducingDescriptor[[]byte]{Name: "bred", Codec: Bytes,
			Reduce: func(a, b []byte) []byte { return append(append([]byte(nil), a...), b...) }}))
		hugeKey := make([]byte, 1<<16)
		hugeVal := make([]byte, 16<<20/4+1) // beyond a quarter of a 16 MiB segment
		okVal := []byte("small")
		k := s.Key([]byte("k"))
		a.fill(t, k, 3)
		must(0, bval.Put(k, okVal))
		must(0, blst.AddAll(k, [][]byte{okVal, okVal}))
		must(0, bmap.Put(k, okVal, okVal))
		must(0, bred.Add(k, okVal))
		seal()
		if err := s.e.Drain(); err != nil { // installs change the FreshTable's record count
			t.Fatal(err)
		}
		for _, kk := range []Key{s.Key(hugeKey), k.In(hugeKey)} {
			before := s.Stats().Fresh.Records
			for name, op := range a.ops(kk) {
				err := op()
				switch {
				case contains(name, "Get") || contains(name, "Contains") || contains(name, "IsEmpty") ||
					contains(name, "Iterator") || isSeqOp(name) || name == "list/AddAll(empty)" ||
					name == "map/PutAll(empty)" || contains(name, "MergeNamespaces"):
					// Reads of an unstorable key find nothing; no-ops and merges of nothing succeed.
					if err != nil {
						t.Errorf("%s on a huge key: %v", name, err)
					}
				case !errors.Is(err, ErrKeyTooLarge):
					t.Errorf("%s on a huge key: %v, want ErrKeyTooLarge", name, err)
				}
			}
			if got := s.Stats().Fresh.Records; got != before {
				t.Errorf("huge-key operations wrote %d records", got-before)
			}
		}
		// Values, elements, user keys.
		want := func() string {
			var b bytes.Buffer
			v, _, _ := bval.Get(k)
			fmt.Fprintf(&b, "%q %q ", v, listOf(t, blst, k))
			m := map[string]string{}
			seq, errf := bmap.Entries(k)
			for uk, uv := range seq {
				m[string(uk)] = string(uv)
			}
			if err := errf(); err != nil {
				t.Fatal(err)
			}
			r, _, _ := bred.Get(k)
			fmt.Fprintf(&b, "%v %q", m, r)
			return b.String()
		}
		before := want()
		if err := s.e.Drain(); err != nil { // installs change the FreshTable's record count
			t.Fatal(err)
		}
		beforeRecords := s.Stats().Fresh.Records
		for name, tc := range map[string]struct {
			op   func() error
			want error
		}{
			"value/Put":               {func() error { return bval.Put(k, hugeVal) }, ErrValueTooLarge},
			"list/Add":                {func() error { return blst.Add(k, hugeVal) }, ErrValueTooLarge},
			"list/AddAll":             {func() error { return blst.AddAll(k, [][]byte{okVal, hugeVal}) }, ErrValueTooLarge},
			"list/AddAll(huge first)": {func() error { return blst.AddAll(k, [][]byte{hugeVal, okVal}) }, ErrValueTooLarge},
			"list/Update":             {func() error { return blst.Update(k, [][]byte{okVal, hugeVal}) }, ErrValueTooLarge},
			"list/Update(huge first)": {func() error { return blst.Update(k, [][]byte{hugeVal}) }, ErrValueTooLarge},
			"map/Put(value)":          {func() error { return bmap.Put(k, okVal, hugeVal) }, ErrValueTooLarge},
			"map/Put(user key)":       {func() error { return bmap.Put(k, hugeKey, okVal) }, ErrKeyTooLarge},
			"map/Remove(user key)":    {func() error { return bmap.Remove(k, hugeKey) }, ErrKeyTooLarge},
			"map/PutAll": {func() error {
				return bmap.PutAll(k, func(yield func([]byte, []byte) bool) { yield([]byte("x"), hugeVal) })
			}, ErrValueTooLarge},
			"reducing/Add": {func() error { return bred.Add(k, hugeVal) }, ErrValueTooLarge},
		} {
			if err := tc.op(); !errors.Is(err, tc.want) {
				t.Errorf("%s: %v, want %v", name, err, tc.want)
			}
			if got := want(); got != before {
				t.Errorf("%s: a refused write changed the state: %s, want %s", name, got, before)
				before = got
			}
			if got := s.Stats().Fresh.Records; got != beforeRecords {
				t.Errorf("%s: a refused write added %d records", name, got-beforeRecords)
				beforeRecords = got
			}
		}
		// Reads of an unstorable user key find nothing rather than fail.
		if v, ok, err := bmap.Get(k, hugeKey); v != nil || ok || err != nil {
			t.Errorf("map Get(huge user key) = %v, %v, %v", v, ok, err)
		}
		if c, err := bmap.Contains(k, hugeKey); c || err != nil {
			t.Errorf("map Contains(huge user key) = %v, %v", c, err)
		}
		// The largest value (a quarter segment) is accepted.
		if err := bval.Put(k, hugeVal[:len(hugeVal)-1]); err != nil {
			t.Errorf("value of a quarter segment: %v", err)
		}
	})
}

// TestFlinkMemoryBudget: a Store on a budget barely above one segment runs out with
// ErrMemoryBudget, the refused write leaves nothing behind, every writing operation of every
// kind is then refused with ErrMemoryBudget (or still fits), and every acknowledged write
// reads back.
func TestFlinkMemoryBudget(t *testing.T) {
	const seg = 16 << 20
	s, err := Open("", Options{MemoryBudget: MinMemoryBudget(seg), SegmentSize: seg})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a := newAllStates(t, s)
	big := must(NewValueState(s, ValueDescriptor[[]byte]{Name: "big", Codec: Bytes}))
	payload := make([]byte, 64<<10)
	type ack struct {
		k    Key
		x    int64
		done int // writes acknowledged: 1 value, 2 list, 3 map, 4 reducing, 5 aggregating
	}
	render := func(ak ack) string {
		x := ak.x
		parts := []string{"val=-", "lst=[]", "map=map[]", "red=-", "agg=-"}
		full := []string{fmt.Sprintf("val=%d", x), fmt.Sprintf("lst=[%d %d]", x, x+1), fmt.Sprintf("map=map[u:%d]", x),
			fmt.Sprintf("red=%d", x), fmt.Sprintf("agg=%v", float64(x))}
		copy(parts, full[:ak.done])
		return fmt.Sprint(parts[0], " ", parts[1], " ", parts[2], " ", parts[3], " ", parts[4])
	}
	var acked []ack
	var lastErr error
	for i := 0; i < 1_000_000 && lastErr == nil; i++ {
		k := s.Key(fmt.Appendf(nil, "key-%d", i))
		x := int64(i)
		if i%8 == 0 {
			if lastErr = big.Put(k, payload); lastErr != nil {
				if _, ok, _ := big.Get(k); ok {
					t.Fatal("refused big Put is visible")
				}
				break
			}
		}
		ak := ack{k: k, x: x}
		for _, w := range []func() error{
			func() error { return a.val.Put(k, x) },
			func() error { return a.lst.AddAll(k, []int64{x, x + 1}) },
			func() error { return a.mp.Put(k, "u", x) },
			func() error { return a.red.Add(k, x) },
			func() error { return a.agg.Add(k, x) },
		} {
			if lastErr = w(); lastErr != nil {
				break
			}
			ak.done++
		}
		acked = append(acked, ak)
	}
	if !errors.Is(lastErr, ErrMemoryBudget) {
		t.Fatalf("filling the budget: %v after %d keys, want ErrMemoryBudget", lastErr, len(acked))
	}
	if len(acked) < 100 {
		t.Fatalf("only %d keys fit", len(acked))
	}
	if used, limit := s.Budget().Used(), s.Budget().Limit(); used > limit {
		t.Fatalf("budget used %d > limit %d", used, limit)
	}
	// Every writing operation of every kind, each on new keys until it is refused.
	for name := range a.ops(s.Key([]byte("probe"))) {
		if contains(name, "Get") || contains(name, "Contains") || contains(name, "IsEmpty") || contains(name, "Iterator") ||
			contains(name, "Clear") || contains(name, "Remove") || contains(name, "(empty)") || contains(name, "Merge") || isSeqOp(name) {
			continue // reads, and writes of tombstones that may fit in place
		}
		refused := false
		for i := 0; i < 100_000 && !refused; i++ {
			op := a.ops(s.Key(fmt.Appendf(nil, "%s-%d", name, i)))[name]
			if err := op(); err != nil {
				if !errors.Is(err, ErrMemoryBudget) {
					t.Fatalf("%s on a full store: %v, want ErrMemoryBudget", name, err)
				}
				refused = true
			}
		}
		if !refused {
			t.Errorf("%s: never refused on a full store", name)
		}
	}
	for _, ak := range acked {
		if got, want := a.snapshot(t, ak.k), render(ak); got != want {
			t.Fatalf("acknowledged key %s reads %q, want %q", ak.k.Bytes(), got, want)
		}
	}
	// Reads, clears of absent keys and merges of nothing still work on the full store.
	for name, op := range a.ops(s.Key([]byte("never-written"))) {
		if contains(name, "Get") || contains(name, "Contains") || contains(name, "IsEmpty") || contains(name, "Iterator") || isSeqOp(name) {
			if err := op(); err != nil {
				t.Errorf("%s on a full store: %v", name, err)
			}
		}
	}
}
