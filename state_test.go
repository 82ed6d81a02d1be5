package strata

import (
	"cmp"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/strata-db/strata/internal/engine"
)

func openTest(t testing.TB, opts Options) *Store {
	t.Helper()
	if opts.MemoryBudget == 0 && opts.SharedBudget == nil {
		opts.MemoryBudget = 256 << 20
	}
	if opts.SegmentSize == 0 {
		opts.SegmentSize = 16 << 20
	}
	s, err := Open("", opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func listOf[T any](t testing.TB, l *ListState[T], k Key) []T {
	t.Helper()
	it := l.Get(k)
	var out []T
	for it.Next() {
		out = append(out, it.Value())
	}
	if err := it.Err(); err != nil {
		t.Fatalf("list %s: %v", l.Name(), err)
	}
	return out
}

func TestValueState(t *testing.T) {
	s := openTest(t, Options{})
	v := must(NewValueState(s, ValueDescriptor[int64]{Name: "v", Codec: Int64}))
	k := s.Key([]byte("user-1"))
	type step struct {
		op     string // get, put, clear
		ns     string
		x      int64
		want   int64
		wantOK bool
	}
	for i, st := range []step{
		{op: "get", want: 0, wantOK: false},
		{op: "put", x: 5},
		{op: "get", want: 5, wantOK: true},
		{op: "get", ns: "w1", wantOK: false}, // namespaces isolate
		{op: "put", ns: "w1", x: -7},
		{op: "get", ns: "w1", want: -7, wantOK: true},
		{op: "get", want: 5, wantOK: true},
		{op: "put", x: 6},
		{op: "get", want: 6, wantOK: true},
		{op: "clear"},
		{op: "get", wantOK: false},
		{op: "clear"}, // clearing absent is fine
		{op: "get", ns: "w1", want: -7, wantOK: true},
		{op: "put", x: 0}, // zero value is a value
		{op: "get", want: 0, wantOK: true},
	} {
		kk := k.In([]byte(st.ns))
		switch st.op {
		case "put":
			if err := v.Put(kk, st.x); err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
		case "clear":
			if err := v.Clear(kk); err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
		case "get":
			got, ok, err := v.Get(kk)
			if err != nil || got != st.want || ok != st.wantOK {
				t.Fatalf("step %d: Get = %d, %v, %v; want %d, %v", i, got, ok, err, st.want, st.wantOK)
			}
		}
	}
	// Another state with the same key does not see v's value.
	w := must(NewValueState(s, ValueDescriptor[int64]{Name: "w", Codec: Int64}))
	if _, ok, _ := w.Get(k.In([]byte("w1"))); ok {
		t.Fatal("states are not isolated")
	}
}

func TestValueStateBytesAndGrow(t *testing.T) {
	s := openTest(t, Options{})
	v := must(NewValueState(s, ValueDescriptor[[]byte]{Name: "b", Codec: Bytes}))
	k := s.Key([]byte("k"))
	for _, n := range []int{0, 1, 8, 100, 3, 5000, 0} {
		val := make([]byte, n)
		for i := range val {
			val[i] = byte(n + i)
		}
		if err := v.Put(k, val); err != nil {
			t.Fatal(err)
		}
		got, ok, err := v.Get(k)
		if err != nil || !ok || string(got) != string(val) {
			t.Fatalf("len %d: got %d bytes, %v, %v", n, len(got), ok, err)
		}
	}
}

func TestListState(t *testing.T) {
	s := openTest(t, Options{})
	l := must(NewListState(s, ListDescriptor[string]{Name: "l", Codec: String}))
	k := s.Key([]byte("k1"))
	check := func(ns string, want ...string) {
		t.Helper()
		if got := listOf(t, l, k.In([]byte(ns))); !slices.Equal(got, want) {
			t.Fatalf("list(%q) = %q, want %q", ns, got, want)
		}
	}
	check("")
	must(0, l.Add(k, "a"))
	must(0, l.Add(k, ""))
	must(0, l.Add(k, "c"))
	check("", "a", "", "c")
	must(0, l.AddAll(k, []string{"d", "e"}))
	must(0, l.AddAll(k, nil))
	check("", "a", "", "c", "d", "e")
	check("w") // namespaces isolate
	must(0, l.Update(k, []string{"x", "y"}))
	check("", "x", "y")
	must(0, l.Add(k, "z"))
	check("", "x", "y", "z")
	must(0, l.Update(k, []string{})) // Flink: update with an empty list removes the list
	check("")
	must(0, l.Add(k, "again"))
	check("", "again")
	must(0, l.Clear(k))
	check("")
	must(0, l.Clear(k))
	check("")
	must(0, l.Update(k, nil))
	check("")
}

func TestListStateLargeBatches(t *testing.T) {
	s := openTest(t, Options{})
	l := must(NewListState(s, ListDescriptor[[]byte]{Name: "big", Codec: Bytes}))
	k := s.Key([]byte("k"))
	// 3 MiB of 100 KiB elements: more than one maxBatch (2 MiB at 16 MiB segments).
	var xs [][]byte
	for i := range 30 {
		e := make([]byte, 100<<10)
		e[0], e[len(e)-1] = byte(i), byte(i)
		xs = append(xs, e)
	}
	for _, op := range []string{"update", "addall"} {
		var err error
		if op == "update" {
			err = l.Update(k, xs)
		} else {
			must(0, l.Clear(k))
			err = l.AddAll(k, xs)
		}
		if err != nil {
			t.Fatalf("%s: %v", op, err)
		}
		got := listOf(t, l, k)
		if len(got) != len(xs) {
			t.Fatalf("%s: %d elements, want %d", op, len(got), len(xs))
		}
		for i, e := range got {
			if len(e) != 100<<10 || e[0] != byte(i) || e[len(e)-1] != byte(i) {
				t.Fatalf("%s: element %d wrong", op, i)
			}
		}
	}
	// One element beyond a quarter segment is refused.
	if err := l.Add(k, make([]byte, 5<<20)); !errors.Is(err, ErrValueTooLarge) {
		t.Fatalf("huge element: %v, want ErrValueTooLarge", err)
	}
}

// TestListRefusedBatchWritesNothing: an Update or AddAll whose batch spans several pieces and
// holds an element beyond a quarter segment fails with ErrValueTooLarge before writing any
// piece. It used to replace the list with the elements before the huge one (Update) or
// append them (AddAll), losing the old list on a refused write.
func TestListRefusedBatchWritesNothing(t *testing.T) {
	s := openTest(t, Options{})
	l := must(NewListState(s, ListDescriptor[[]byte]{Name: "l", Codec: Bytes}))
	k := s.Key([]byte("k"))
	old := [][]byte{[]byte("a"), []byte("b")}
	must(0, l.AddAll(k, old))
	small, huge := []byte("small"), make([]byte, 4<<20+1) // a quarter of 16 MiB, plus one
	for name, op := range map[string]func() error{
		"update":        func() error { return l.Update(k, [][]byte{small, huge}) },
		"update/middle": func() error { return l.Update(k, [][]byte{small, huge, small}) },
		"addall":        func() error { return l.AddAll(k, [][]byte{small, small, huge}) },
	} {
		records := s.Stats().Fresh.Records
		if err := op(); !errors.Is(err, ErrValueTooLarge) {
			t.Fatalf("%s: %v, want ErrValueTooLarge", name, err)
		}
		if got := listOf(t, l, k); len(got) != 2 || string(got[0]) != "a" || string(got[1]) != "b" {
			t.Fatalf("%s: list after a refused write = %q, want [a b]", name, got)
		}
		if n := s.Stats().Fresh.Records - records; n != 0 {
			t.Fatalf("%s: a refused write added %d records", name, n)
		}
	}
	// An element of exactly the limit (framed) still goes through as its own piece.
	ok := make([]byte, 4<<20-4) // + a 4-byte uvarint = a quarter of 16 MiB
	must(0, l.Update(k, [][]byte{small, ok}))
	if got := listOf(t, l, k); len(got) != 2 || len(got[1]) != len(ok) {
		t.Fatalf("list of a limit-sized element: %d elements", len(got))
	}
}

func TestListMergeNamespaces(t *testing.T) {
	s := openTest(t, Options{})
	l := must(NewListState(s, ListDescriptor[int64]{Name: "l", Codec: Int64}))
	k := s.Key([]byte("k"))
	ns := func(s string) []byte { return []byte(s) }
	must(0, l.AddAll(k.In(ns("t")), []int64{1, 2}))
	must(0, l.AddAll(k.In(ns("a")), []int64{3}))
	must(0, l.AddAll(k.In(ns("b")), []int64{4, 5}))
	must(0, l.MergeNamespaces(k, ns("t"), ns("a"), ns("absent"), ns("t"), ns("b")))
	if got := listOf(t, l, k.In(ns("t"))); !slices.Equal(got, []int64{1, 2, 3, 4, 5}) {
		t.Fatalf("merged = %v", got)
	}
	for _, src := range []string{"a", "b", "absent"} {
		if got := listOf(t, l, k.In(ns(src))); len(got) != 0 {
			t.Fatalf("source %s not cleared: %v", src, got)
		}
	}
	// Into an absent target.
	must(0, l.Add(k.In(ns("c")), 9))
	must(0, l.MergeNamespaces(k, ns("new"), ns("c")))
	if got := listOf(t, l, k.In(ns("new"))); !slices.Equal(got, []int64{9}) {
		t.Fatalf("merged into absent = %v", got)
	}
	// No present source: target unchanged.
	must(0, l.MergeNamespaces(k, ns("new"), ns("nothing")))
	if got := listOf(t, l, k.In(ns("new"))); !slices.Equal(got, []int64{9}) {
		t.Fatalf("merge of nothing = %v", got)
	}
}

func TestMapState(t *testing.T) {
	s := openTest(t, Options{})
	m := must(NewMapState(s, MapDescriptor[string, int64]{Name: "m", KeyCodec: String, ValueCodec: Int64}))
	k := s.Key([]byte("k"))
	w := k.In([]byte("w"))
	if e, err := m.IsEmpty(k); err != nil || !e {
		t.Fatalf("IsEmpty(new) = %v, %v", e, err)
	}
	if _, ok, err := m.Get(k, "a"); ok || err != nil {
		t.Fatalf("Get(absent) = %v, %v", ok, err)
	}
	must(0, m.Put(k, "a", 1))
	must(0, m.Put(k, "b", 2))
	must(0, m.Put(k, "", 3))
	must(0, m.Put(w, "a", 100))
	if v, ok, err := m.Get(k, "a"); v != 1 || !ok || err != nil {
		t.Fatalf("Get(a) = %v, %v, %v", v, ok, err)
	}
	must(0, m.Put(k, "a", 11))
	if v, _, _ := m.Get(k, "a"); v != 11 {
		t.Fatalf("Get(a) after overwrite = %v", v)
	}
	if c, _ := m.Contains(k, "b"); !c {
		t.Fatal("Contains(b) = false")
	}
	if c, _ := m.Contains(k, "zz"); c {
		t.Fatal("Contains(zz) = true")
	}
	if got := mustMap(m.Entries(k)); !maps.Equal(got, map[string]int64{"a": 11, "b": 2, "": 3}) {
		t.Fatalf("Entries = %v", got)
	}
	if got := mustMap(m.Entries(w)); !maps.Equal(got, map[string]int64{"a": 100}) {
		t.Fatalf("Entries(w) = %v", got)
	}
	keys := mustSorted(m.Keys(k))
	if !slices.Equal(keys, []string{"", "a", "b"}) {
		t.Fatalf("Keys = %q", keys)
	}
	vals := mustSorted(m.Values(k))
	if !slices.Equal(vals, []int64{2, 3, 11}) {
		t.Fatalf("Values = %v", vals)
	}
	must(0, m.Remove(k, "b"))
	must(0, m.Remove(k, "never"))
	if _, ok, _ := m.Get(k, "b"); ok {
		t.Fatal("removed entry still there")
	}
	must(0, m.PutAll(k, maps.All(map[string]int64{"p": 1, "q": 2})))
	if got := mustMap(m.Entries(k)); !maps.Equal(got, map[string]int64{"a": 11, "": 3, "p": 1, "q": 2}) {
		t.Fatalf("after PutAll = %v", got)
	}
	// Iterator with removal of every other entry and an update of the current one.
	it := m.Iterator(k)
	if err := it.Remove(); !errors.Is(err, ErrNoEntry) {
		t.Fatalf("Remove before Next = %v", err)
	}
	seen := map[string]bool{}
	for it.Next() {
		uk := it.Key()
		if seen[uk] {
			t.Fatalf("entry %q seen twice", uk)
		}
		seen[uk] = true
		if uk == "a" || uk == "p" {
			if err := it.Remove(); err != nil {
				t.Fatal(err)
			}
			if err := it.Remove(); !errors.Is(err, ErrNoEntry) {
				t.Fatalf("second Remove = %v", err)
			}
		} else {
			must(0, m.Put(k, uk, it.Value()*10))
		}
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 4 {
		t.Fatalf("iterated %v", seen)
	}
	if got := mustMap(m.Entries(k)); !maps.Equal(got, map[string]int64{"": 30, "q": 20}) {
		t.Fatalf("after iterator removal = %v", got)
	}
	must(0, m.Clear(k))
	if e, _ := m.IsEmpty(k); !e {
		t.Fatal("not empty after Clear")
	}
	if e, _ := m.IsEmpty(w); e {
		t.Fatal("Clear leaked across namespaces")
	}
	must(0, m.Put(k, "after", 1))
	if got := mustMap(m.Entries(k)); !maps.Equal(got, map[string]int64{"after": 1}) {
		t.Fatalf("after Clear+Put = %v", got)
	}
	// Early break of a sequence.
	n := 0
	for range first(m.Entries(w)) {
		n++
		break
	}
	if n != 1 {
		t.Fatal("early break")
	}
}

// TestMapPutAllChecksKey: PutAll checks the Key before starting the sequence, so an empty
// sequence on a foreign key or a closed Store fails as every other operation does (it used to
// return nil).
func TestMapPutAllChecksKey(t *testing.T) {
	r := KeyGroupRange{Start: 0, End: 0}
	s, err := Open("", Options{MaxParallelism: 4, KeyGroups: &r, MemoryBudget: 64 << 20, SegmentSize: 16 << 20})
	if err != nil {
		t.Fatal(err)
	}
	m := must(NewMapState(s, MapDescriptor[string, int64]{Name: "m", KeyCodec: String, ValueCodec: Int64}))
	none := maps.All(map[string]int64{})
	started := false
	spy := func(func(string, int64) bool) { started = true }
	if err := m.PutAll(Key{}, spy); !errors.Is(err, ErrKeyGroupOutOfRange) || started {
		t.Fatalf("PutAll(zero Key) = %v, sequence started %v; want ErrKeyGroupOutOfRange, false", err, started)
	}
	var out Key
	for i := 0; ; i++ {
		if out = s.Key(fmt.Append(nil, i)); out.KeyGroup() != 0 {
			break
		}
	}
	if err := m.PutAll(out, none); !errors.Is(err, ErrKeyGroupOutOfRange) {
		t.Fatalf("PutAll(out of range, empty) = %v, want ErrKeyGroupOutOfRange", err)
	}
	must(0, s.Close())
	if err := m.PutAll(out, none); !errors.Is(err, ErrClosed) {
		t.Fatalf("PutAll(empty) after Close = %v, want ErrClosed", err)
	}
}

// TestMapIteratorValueAfterPut: Value after a MapState.Put of the current user key returns the
// new value, and zero after the entry is removed. It used to decode the old slice over bytes
// rewritten in place: "longvalue" overwritten by "xy" read back as "xyngvalue".
func TestMapIteratorValueAfterPut(t *testing.T) {
	for _, sealed := range []bool{false, true} {
		s := openTest(t, Options{})
		m := must(NewMapState(s, MapDescriptor[string, string]{Name: "m", KeyCodec: String, ValueCodec: String}))
		k := s.Key([]byte("k"))
		must(0, m.Put(k, "a", "longvalue"))
		must(0, m.Put(k, "b", "other"))
		if sealed {
			must(0, s.seal())
		}
		it := m.Iterator(k)
		n := 0
		for it.Next() {
			n++
			uk := it.Key()
			if uk != "a" {
				must(0, m.Put(k, "a-sibling", "x")) // a write to another entry
				if v := it.Value(); v != "other" {
					t.Fatalf("sealed=%v: Value after a write elsewhere = %q", sealed, v)
				}
				continue
			}
			if v := it.Value(); v != "longvalue" {
				t.Fatalf("sealed=%v: Value = %q", sealed, v)
			}
			for _, nv := range []string{"xy", "a-much-longer-value-than-before", ""} {
				must(0, m.Put(k, uk, nv))
				if v := it.Value(); v != nv {
					t.Fatalf("sealed=%v: Value after Put(%q) = %q", sealed, nv, v)
				}
				if it.Key() != "a" {
					t.Fatalf("sealed=%v: Key after Put = %q", sealed, it.Key())
				}
			}
			must(0, it.Remove())
			if v := it.Value(); v != "" {
				t.Fatalf("sealed=%v: Value after Remove = %q, want zero", sealed, v)
			}
		}
		if err := it.Err(); err != nil || n != 2 {
			t.Fatalf("sealed=%v: %d entries, %v", sealed, n, err)
		}
		if _, ok, _ := m.Get(k, "a"); ok {
			t.Fatalf("sealed=%v: removed entry still there", sealed)
		}
	}
}

func TestReducingState(t *testing.T) {
	s := openTest(t, Options{})
	r := must(NewReducingState(s, ReducingDescriptor[int64]{Name: "sum", Codec: Int64, Reduce: func(a, b int64) int64 { return a + b }}))
	k := s.Key([]byte("k"))
	if _, ok, _ := r.Get(k); ok {
		t.Fatal("absent reducing state found")
	}
	for _, x := range []int64{1, 2, 3} {
		must(0, r.Add(k, x))
	}
	if v, ok, err := r.Get(k); v != 6 || !ok || err != nil {
		t.Fatalf("Get = %v %v %v", v, ok, err)
	}
	must(0, r.Clear(k))
	if _, ok, _ := r.Get(k); ok {
		t.Fatal("found after Clear")
	}
	// Merge order: merged = reduce(reduce(a, b), c); target = reduce(target, merged).
	cat := must(NewReducingState(s, ReducingDescriptor[string]{Name: "cat", Codec: String, Reduce: func(a, b string) string { return "(" + a + "+" + b + ")" }}))
	ns := func(s string) []byte { return []byte(s) }
	must(0, cat.Add(k.In(ns("t")), "T"))
	must(0, cat.Add(k.In(ns("a")), "A"))
	must(0, cat.Add(k.In(ns("b")), "B"))
	must(0, cat.Add(k.In(ns("c")), "C"))
	must(0, cat.MergeNamespaces(k, ns("t"), ns("a"), ns("x"), ns("b"), ns("c")))
	if v, _, _ := cat.Get(k.In(ns("t"))); v != "(T+((A+B)+C))" {
		t.Fatalf("merged = %q", v)
	}
	for _, src := range []string{"a", "b", "c"} {
		if _, ok, _ := cat.Get(k.In(ns(src))); ok {
			t.Fatalf("source %s not cleared", src)
		}
	}
	must(0, cat.Add(k.In(ns("d")), "D"))
	must(0, cat.MergeNamespaces(k, ns("fresh"), ns("d")))
	if v, _, _ := cat.Get(k.In(ns("fresh"))); v != "D" {
		t.Fatalf("merge into absent = %q", v)
	}
	must(0, cat.MergeNamespaces(k, ns("none"), ns("x"), ns("y")))
	if _, ok, _ := cat.Get(k.In(ns("none"))); ok {
		t.Fatal("merge of absent sources created the target")
	}
}

// avg is an AggregateFunction[int64, [2]int64 encoded as bytes, float64].
type avgAcc struct{ sum, n int64 }

type avgCodec struct{}

func (avgCodec) Append(dst []byte, a avgAcc) []byte {
	return Int64.Append(Int64.Append(dst, a.sum), a.n)
}

func (avgCodec) Decode(b []byte) (avgAcc, error) {
	if len(b) != 16 {
		return avgAcc{}, fmt.Errorf("%w: avg %d bytes", ErrCorruption, len(b))
	}
	s, _ := Int64.Decode(b[:8])
	n, _ := Int64.Decode(b[8:])
	return avgAcc{s, n}, nil
}

func avgDescriptor(name string) AggregatingDescriptor[int64, avgAcc, float64] {
	return AggregatingDescriptor[int64, avgAcc, float64]{
		Name:              name,
		AccCodec:          avgCodec{},
		CreateAccumulator: func() avgAcc { return avgAcc{} },
		Add:               func(in int64, a avgAcc) avgAcc { return avgAcc{a.sum + in, a.n + 1} },
		GetResult:         func(a avgAcc) float64 { return float64(a.sum) / float64(a.n) },
		Merge:             func(a, b avgAcc) avgAcc { return avgAcc{a.sum + b.sum, a.n + b.n} },
	}
}

func TestAggregatingState(t *testing.T) {
	s := openTest(t, Options{})
	a := must(NewAggregatingState(s, avgDescriptor("avg")))
	k := s.Key([]byte("k"))
	if _, ok, _ := a.Get(k); ok {
		t.Fatal("absent aggregating state found")
	}
	for _, x := range []int64{1, 2, 6} {
		must(0, a.Add(k, x))
	}
	if v, ok, err := a.Get(k); v != 3 || !ok || err != nil {
		t.Fatalf("Get = %v %v %v", v, ok, err)
	}
	ns := func(s string) []byte { return []byte(s) }
	must(0, a.Add(k.In(ns("a")), 10))
	must(0, a.Add(k.In(ns("b")), 20))
	must(0, a.MergeNamespaces(k, nil, ns("a"), ns("b")))
	if v, _, _ := a.Get(k); v != 39.0/5 {
		t.Fatalf("merged avg = %v", v)
	}
	if _, ok, _ := a.Get(k.In(ns("a"))); ok {
		t.Fatal("source a not cleared")
	}
	must(0, a.Clear(k))
	if _, ok, _ := a.Get(k); ok {
		t.Fatal("found after Clear")
	}
}

func TestMergeCorruptSourceDeletesNothing(t *testing.T) {
	s := openTest(t, Options{})
	raw := must(NewValueState(s, ValueDescriptor[[]byte]{Name: "r", Codec: Bytes}))
	k := s.Key([]byte("k"))
	must(0, raw.Put(k.In([]byte("a")), []byte{1, 2, 3})) // not 8 bytes
	// A reducing state sharing the id is impossible, so corrupt through the table directly.
	r := must(NewReducingState(s, ReducingDescriptor[int64]{Name: "sum", Codec: Int64, Reduce: func(a, b int64) int64 { return a + b }}))
	must(0, r.Add(k.In([]byte("b")), 5))
	key, h := s.compose(k.In([]byte("a")), r.id)
	if err := s.apply(engine.OpPut, append([]byte(nil), key...), h, nil, []byte{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	err := r.MergeNamespaces(k, []byte("t"), []byte("b"), []byte("a"))
	if !errors.Is(err, ErrCorruption) {
		t.Fatalf("merge over corrupt source = %v", err)
	}
	if v, ok, _ := r.Get(k.In([]byte("b"))); !ok || v != 5 {
		t.Fatal("source b deleted by a failed merge")
	}
	if _, _, err := r.Get(k.In([]byte("a"))); !errors.Is(err, ErrCorruption) {
		t.Fatalf("Get(corrupt) = %v", err)
	}
}

func TestRegistration(t *testing.T) {
	s := openTest(t, Options{})
	v1 := must(NewValueState(s, ValueDescriptor[int64]{Name: "x", Codec: Int64}))
	v2 := must(NewValueState(s, ValueDescriptor[int64]{Name: "x", Codec: Int64}))
	if v1 != v2 {
		t.Fatal("re-registration returned a new state")
	}
	for name, f := range map[string]func() error{
		"other kind": func() error { _, err := NewListState(s, ListDescriptor[int64]{Name: "x", Codec: Int64}); return err },
		"other codec": func() error {
			_, err := NewValueState(s, ValueDescriptor[uint64]{Name: "x", Codec: Uint64})
			return err
		},
		"other type": func() error { _, err := NewValueState(s, ValueDescriptor[[]byte]{Name: "x", Codec: Bytes}); return err },
		"nil codec":  func() error { _, err := NewValueState(s, ValueDescriptor[int64]{Name: "y"}); return err },
		"empty name": func() error { _, err := NewValueState(s, ValueDescriptor[int64]{Codec: Int64}); return err },
		"nil reduce": func() error {
			_, err := NewReducingState(s, ReducingDescriptor[int64]{Name: "r", Codec: Int64})
			return err
		},
		"nil map val": func() error {
			_, err := NewMapState(s, MapDescriptor[string, int64]{Name: "m", KeyCodec: String})
			return err
		},
	} {
		err := f()
		if !errors.Is(err, ErrIncompatibleState) {
			t.Errorf("%s: %v, want ErrIncompatibleState", name, err)
		}
	}
	_, err := NewListState(s, ListDescriptor[int64]{Name: "x", Codec: Int64})
	if want := `state "x"`; err == nil || !contains(err.Error(), want) {
		t.Fatalf("error %v does not name the state", err)
	}
	m1 := must(NewMapState(s, MapDescriptor[string, int64]{Name: "m2", KeyCodec: String, ValueCodec: Int64}))
	if _, err := NewMapState(s, MapDescriptor[string, uint64]{Name: "m2", KeyCodec: String, ValueCodec: Uint64}); !errors.Is(err, ErrIncompatibleState) {
		t.Fatalf("map value codec change: %v", err)
	}
	if m2 := must(NewMapState(s, MapDescriptor[string, int64]{Name: "m2", KeyCodec: String, ValueCodec: Int64})); m1 != m2 {
		t.Fatal("map re-registration returned a new state")
	}
	if st := s.Stats(); st.States != 2 {
		t.Fatalf("States = %d, want 2", st.States)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func TestKeyGroupChecks(t *testing.T) {
	r := ComputeKeyGroupRangeForOperatorIndex(16, 4, 1) // [4, 7]
	s := openTest(t, Options{MaxParallelism: 16, KeyGroups: &r})
	other := openTest(t, Options{MaxParallelism: 32})
	v := must(NewValueState(s, ValueDescriptor[int64]{Name: "v", Codec: Int64}))
	l := must(NewListState(s, ListDescriptor[int64]{Name: "l", Codec: Int64}))
	m := must(NewMapState(s, MapDescriptor[int64, int64]{Name: "m", KeyCodec: Int64, ValueCodec: Int64}))
	in, out := 0, 0
	for i := range 200 {
		b := []byte(fmt.Sprint("key-", i))
		k := s.Key(b)
		if k.KeyGroup() != AssignToKeyGroup(int32(uint32(k.kh)), 16) {
			t.Fatal("key group not from the low 32 bits of xxh3")
		}
		err := v.Put(k, 1)
		_, _, gerr := v.Get(k)
		lerr := l.Add(k, 1)
		it := l.Get(k)
		it.Next()
		merr := m.Put(k, 1, 1)
		if r.Contains(k.KeyGroup()) {
			in++
			if err != nil || gerr != nil || lerr != nil || it.Err() != nil || merr != nil {
				t.Fatalf("in-range key group %d: %v %v %v %v %v", k.KeyGroup(), err, gerr, lerr, it.Err(), merr)
			}
		} else {
			out++
			for _, e := range []error{err, gerr, lerr, it.Err(), merr} {
				if !errors.Is(e, ErrKeyGroupOutOfRange) {
					t.Fatalf("out-of-range key group %d: %v", k.KeyGroup(), e)
				}
			}
		}
	}
	if in == 0 || out == 0 {
		t.Fatalf("in=%d out=%d: test does not cover both", in, out)
	}
	// Keys of another store (other MaxParallelism) and the zero Key are refused.
	if err := v.Put(other.Key([]byte("x")), 1); !errors.Is(err, ErrKeyGroupOutOfRange) {
		t.Fatalf("foreign key: %v", err)
	}
	if err := v.Put(Key{}, 1); !errors.Is(err, ErrKeyGroupOutOfRange) {
		t.Fatalf("zero key: %v", err)
	}
	// KeyWithHash follows Flink: "a".hashCode() with maxParallelism 16.
	kf := s.KeyWithHash([]byte("a"), javaStringHashCode("a"))
	if kf.KeyGroup() != AssignToKeyGroup(javaStringHashCode("a"), 16) || kf.Hash() != 97 {
		t.Fatal("KeyWithHash")
	}
}

func TestKeyIn(t *testing.T) {
	s := openTest(t, Options{})
	k := s.Key([]byte("abc"))
	w := k.In([]byte("win"))
	if w.KeyGroup() != k.KeyGroup() || string(w.Bytes()) != "abc" || string(w.Namespace()) != "win" || w.kh != k.kh || w.nh == 0 {
		t.Fatalf("In: %+v", w)
	}
	if back := w.In(nil); len(back.ns) != 0 || back.nh != 0 || back.kh != k.kh || back.kg != k.kg {
		t.Fatal("In(nil) is not the void namespace")
	}
	// (key, namespace) pairs that concatenate equally stay distinct.
	v := must(NewValueState(s, ValueDescriptor[int64]{Name: "v", Codec: Int64}))
	must(0, v.Put(s.Key([]byte("ab")).In([]byte("c")), 1))
	if _, ok, _ := v.Get(s.Key([]byte("a")).In([]byte("bc"))); ok {
		t.Fatal("composite key ambiguous")
	}
}

func TestClosed(t *testing.T) {
	s, err := Open(t.TempDir()+"/sub/dir", Options{MemoryBudget: 64 << 20, SegmentSize: 16 << 20})
	if err != nil {
		t.Fatal(err)
	}
	v := must(NewValueState(s, ValueDescriptor[int64]{Name: "v", Codec: Int64}))
	l := must(NewListState(s, ListDescriptor[int64]{Name: "l", Codec: Int64}))
	m := must(NewMapState(s, MapDescriptor[int64, int64]{Name: "m", KeyCodec: Int64, ValueCodec: Int64}))
	k := s.Key([]byte("k"))
	must(0, m.Put(k, 1, 1))
	must(0, l.AddAll(k, []int64{1, 2}))
	it := m.Iterator(k)
	lit := l.Get(k)
	if !lit.Next() || lit.Value() != 1 {
		t.Fatal("list before Close")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close = %v", err)
	}
	if err := v.Put(k, 1); !errors.Is(err, ErrClosed) {
		t.Fatal(err)
	}
	if _, _, err := v.Get(k); !errors.Is(err, ErrClosed) {
		t.Fatal(err)
	}
	if li := l.Get(k); li.Next() || !errors.Is(li.Err(), ErrClosed) {
		t.Fatal("list get on closed store")
	}
	if lit.Next() || !errors.Is(lit.Err(), ErrClosed) {
		t.Fatal("list iterator open across Close")
	}
	if it.Next() || !errors.Is(it.Err(), ErrClosed) {
		t.Fatal("map iterator on closed store")
	}
	if _, err := NewValueState(s, ValueDescriptor[int64]{Name: "w", Codec: Int64}); !errors.Is(err, ErrClosed) {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Budget.Used != 0 {
		t.Fatalf("budget used after Close: %d", st.Budget.Used)
	}
}

func TestSharedBudget(t *testing.T) {
	b := NewBudget(64 << 20)
	s1 := openTest(t, Options{SharedBudget: b})
	s2 := openTest(t, Options{SharedBudget: b})
	if s1.Budget() != b || s2.Budget() != b {
		t.Fatal("shared budget not used")
	}
	v1 := must(NewValueState(s1, ValueDescriptor[int64]{Name: "v", Codec: Int64}))
	v2 := must(NewValueState(s2, ValueDescriptor[int64]{Name: "v", Codec: Int64}))
	must(0, v1.Put(s1.Key([]byte("a")), 1))
	must(0, v2.Put(s2.Key([]byte("a")), 2))
	if b.Used() == 0 {
		t.Fatal("nothing accounted in the shared budget")
	}
	// Fill until the shared budget refuses: ErrMemoryBudget, not a crash.
	big := must(NewValueState(s1, ValueDescriptor[[]byte]{Name: "big", Codec: Bytes}))
	val := make([]byte, 1<<20)
	var err error
	for i := 0; i < 1000 && err == nil; i++ {
		err = big.Put(s1.Key(fmt.Appendf(nil, "k%d", i)), val)
	}
	if !errors.Is(err, ErrMemoryBudget) {
		t.Fatalf("filling a 64 MiB budget: %v, want ErrMemoryBudget", err)
	}
	if v, _, _ := v2.Get(s2.Key([]byte("a"))); v != 2 {
		t.Fatal("other store damaged")
	}
}

func TestStats(t *testing.T) {
	s := openTest(t, Options{})
	v := must(NewValueState(s, ValueDescriptor[int64]{Name: "v", Codec: Int64}))
	for i := range 1000 {
		must(0, v.Put(s.Key(fmt.Appendf(nil, "k%d", i)), int64(i)))
	}
	st := s.Stats()
	if st.Fresh.Records < 1000 || st.Fresh.Segments < 1 || st.Fresh.SegmentBytes < 16<<20 || st.Fresh.DataBytes <= 0 || st.Fresh.IndexBytes <= 0 || st.Budget.Used <= 0 || st.States != 1 {
		t.Fatalf("Stats = %+v", st)
	}
}

// mustMap collects a map sequence and panics if it stopped on an error.
func mustMap[K comparable, V any](seq iter.Seq2[K, V], errf func() error) map[K]V {
	got := maps.Collect(seq)
	if err := errf(); err != nil {
		panic(err)
	}
	return got
}

// mustSorted collects a sequence, sorted, and panics if it stopped on an error.
func mustSorted[T cmp.Ordered](seq iter.Seq[T], errf func() error) []T {
	got := slices.Sorted(seq)
	if err := errf(); err != nil {
		panic(err)
	}
	return got
}

// first returns the sequence of a (sequence, error function) pair.
func first[S any](seq S, _ func() error) S { return seq }
