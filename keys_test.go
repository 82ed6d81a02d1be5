package strata

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/strata-db/strata/internal/engine"
)

// keysFixture is a Store with a directory (so data can be pushed into the LsmStore) and one
// state of each shape the key operations care about.
type keysFixture struct {
	t   *testing.T
	dir string
	s   *Store
	v   *ValueState[int64]
	l   *ListState[int64]
	m   *MapState[int64, int64]
	r   *ReducingState[int64]
}

func newKeysFixture(t *testing.T) *keysFixture {
	f := &keysFixture{t: t, dir: t.TempDir()}
	f.open()
	t.Cleanup(func() {
		if !f.s.closed {
			f.s.Close()
		}
	})
	return f
}

// keysAdjust makes lists chains of small pieces and small LSM tables, so that one list spans
// pieces in several tiers and a few keys make several files.
func keysAdjust(o *engine.Options) {
	o.MaxListPiece, o.ListEagerBytes, o.MapChunk, o.BucketBits = 64, 16, 4, 2
	o.EvictionWatermark, o.EvictionBatch, o.TableSize = 0, 4<<10, 8<<10
}

func (f *keysFixture) open() {
	f.t.Helper()
	s, err := open(f.dir, Options{MaxParallelism: 32, MemoryBudget: 256 << 20, SegmentSize: 16 << 20}, keysAdjust)
	if err != nil {
		f.t.Fatal(err)
	}
	f.s = s
	f.v = must(NewValueState(s, ValueDescriptor[int64]{Name: "v", Codec: Int64}))
	f.l = must(NewListState(s, ListDescriptor[int64]{Name: "l", Codec: Int64}))
	f.m = must(NewMapState(s, MapDescriptor[int64, int64]{Name: "m", KeyCodec: Int64, ValueCodec: Int64}))
	f.r = must(NewReducingState(s, ReducingDescriptor[int64]{Name: "r", Codec: Int64,
		Reduce: func(a, b int64) int64 { return a + b }}))
}

func (f *keysFixture) key(k, ns string) Key { return f.s.Key([]byte(k)).In([]byte(ns)) }

func (f *keysFixture) ok(err error) {
	f.t.Helper()
	if err != nil {
		f.t.Fatal(err)
	}
}

// The places data can be put in: each moves everything written so far one way.
func (f *keysFixture) seal() { f.ok(f.s.seal()) }

func (f *keysFixture) slices() {
	f.ok(f.s.seal())
	f.ok(f.s.WaitBackground())
}

// pushDown moves everything into the LsmStore, as TestModel's push-down step.
func (f *keysFixture) pushDown() {
	f.slices()
	for i := 0; i < 200 && f.s.Stats().Slices.Count > 0; i++ {
		ok, err := f.s.Evict()
		f.ok(err)
		if !ok {
			break
		}
		f.ok(f.s.WaitBackground())
	}
	if st := f.s.Stats(); st.Slices.Count != 0 || st.Fresh.SealedSegments != 0 {
		f.t.Fatalf("push-down left %d slices, %d sealed segments", st.Slices.Count, st.Fresh.SealedSegments)
	}
}

func (f *keysFixture) reopen() {
	f.ok(f.s.Close())
	f.open()
}

// keysOf returns the keys Keys yields for st in ns, as strings in yield order; it fails on a
// key yielded twice or outside ns.
func keysOf(t *testing.T, s *Store, st State, ns string) []string {
	t.Helper()
	seq, errf := s.Keys(st, []byte(ns))
	var got []string
	for k := range seq {
		if string(k.Namespace()) != ns {
			t.Fatalf("%s: key %q in namespace %q, asked for %q", st.Name(), k.Bytes(), k.Namespace(), ns)
		}
		got = append(got, string(k.Bytes()))
	}
	if err := errf(); err != nil {
		t.Fatalf("%s: Keys(%q): %v", st.Name(), ns, err)
	}
	return got
}

// pairsOf returns what KeysAndNamespaces yields for st, as "key/ns" strings.
func pairsOf(t *testing.T, s *Store, st State) []string {
	t.Helper()
	seq, errf := s.KeysAndNamespaces(st)
	var got []string
	for k := range seq {
		got = append(got, string(k.Bytes())+"/"+string(k.Namespace()))
	}
	if err := errf(); err != nil {
		t.Fatalf("%s: KeysAndNamespaces: %v", st.Name(), err)
	}
	return got
}

// want is what the key operations must return for one state: keys by namespace, and the
// number of entries.
type want struct {
	keys    map[string][]string // namespace → keys (any order)
	entries int64
}

func (f *keysFixture) check(st State, w want) {
	f.t.Helper()
	var pairs []string
	for ns, ks := range w.keys {
		got := keysOf(f.t, f.s, st, ns)
		if dup := dups(got); dup != "" {
			f.t.Fatalf("%s: Keys(%q) yields %q twice", st.Name(), ns, dup)
		}
		slices.Sort(got)
		exp := slices.Sorted(slices.Values(ks))
		if !slices.Equal(got, exp) {
			f.t.Fatalf("%s: Keys(%q) = %q, want %q", st.Name(), ns, got, exp)
		}
		for _, k := range ks {
			pairs = append(pairs, k+"/"+ns)
		}
	}
	got := pairsOf(f.t, f.s, st)
	if dup := dups(got); dup != "" {
		f.t.Fatalf("%s: KeysAndNamespaces yields %q twice", st.Name(), dup)
	}
	slices.Sort(got)
	slices.Sort(pairs)
	if !slices.Equal(got, pairs) {
		f.t.Fatalf("%s: KeysAndNamespaces = %q, want %q", st.Name(), got, pairs)
	}
	n, err := f.s.NumEntries(st)
	if err != nil || n != w.entries {
		f.t.Fatalf("%s: NumEntries = %d %v, want %d", st.Name(), n, err, w.entries)
	}
}

func dups(xs []string) string {
	seen := map[string]bool{}
	for _, x := range xs {
		if seen[x] {
			return x
		}
		seen[x] = true
	}
	return ""
}

// TestKeysSemantics: Keys, KeysAndNamespaces and NumEntries over each state shape, with the
// data in each tier (the active FreshTable segment, a sealed segment, slices, the LsmStore,
// the LsmStore after a reopen) and spread over all of them: namespaces that are prefixes of
// each other, maps of many entries, lists of many pieces, cleared and removed keys.
func TestKeysSemantics(t *testing.T) {
	places := []struct {
		name string
		move func(*keysFixture)
	}{
		{"fresh", func(*keysFixture) {}},
		{"sealed", (*keysFixture).seal},
		{"slices", (*keysFixture).slices},
		{"lsm", (*keysFixture).pushDown},
		{"reopened", func(f *keysFixture) { f.pushDown(); f.reopen() }},
	}
	cases := []struct {
		name  string
		write func(f *keysFixture, move func(*keysFixture)) // move: the placement, called between writes as it likes
		st    func(f *keysFixture) State
		want  want
	}{
		{
			// FLINK-8679: namespaces "", "a", "ab", "abc" are byte prefixes of each other, as
			// are keys "k", "k1", "k12": each (key, namespace) stands alone.
			name: "prefix-namespaces",
			write: func(f *keysFixture, move func(*keysFixture)) {
				for i, kn := range [][2]string{{"k", ""}, {"k", "a"}, {"k1", "ab"}, {"k12", "abc"}, {"k1", "a"}, {"k12", ""}} {
					f.ok(f.v.Put(f.key(kn[0], kn[1]), int64(i)))
				}
				move(f)
			},
			st: func(f *keysFixture) State { return f.v },
			want: want{keys: map[string][]string{"": {"k", "k12"}, "a": {"k", "k1"}, "ab": {"k1"}, "abc": {"k12"}, "b": nil},
				entries: 6},
		},
		{
			// FLINK-9804: a map of 300 entries under one key is one key, 300 entries.
			name: "map-many-entries",
			write: func(f *keysFixture, move func(*keysFixture)) {
				for i := range 300 {
					f.ok(f.m.Put(f.key("big", "w"), int64(i), int64(i)))
					if i == 150 {
						move(f)
					}
				}
				f.ok(f.m.Put(f.key("small", "w"), 1, 1))
				f.ok(f.m.Put(f.key("small", "x"), 1, 1))
				move(f)
			},
			st:   func(f *keysFixture) State { return f.m },
			want: want{keys: map[string][]string{"w": {"big", "small"}, "x": {"small"}, "": nil}, entries: 302},
		},
		{
			// A list of many pieces (64-byte pieces, appends before and after each move) is
			// one key, one entry.
			name: "list-many-pieces",
			write: func(f *keysFixture, move func(*keysFixture)) {
				for round := range 3 {
					for i := range 40 {
						f.ok(f.l.Add(f.key("long", ""), int64(round*100+i)))
					}
					move(f)
				}
				f.ok(f.l.Add(f.key("short", ""), 1))
			},
			st:   func(f *keysFixture) State { return f.l },
			want: want{keys: map[string][]string{"": {"long", "short"}}, entries: 2},
		},
		{
			// Cleared and removed keys are not returned, wherever the clear lies relative to
			// the data: value Clear, map entries all removed, map Clear, list Update to
			// nothing, list Clear then Add (live again).
			name: "cleared",
			write: func(f *keysFixture, move func(*keysFixture)) {
				for _, k := range []string{"a", "b", "c", "d", "e"} {
					f.ok(f.v.Put(f.key(k, ""), 1))
					f.ok(f.l.Add(f.key(k, ""), 1))
					f.ok(f.m.Put(f.key(k, ""), 1, 1))
					f.ok(f.m.Put(f.key(k, ""), 2, 2))
				}
				move(f)
				f.ok(f.v.Clear(f.key("a", "")))
				f.ok(f.l.Update(f.key("a", ""), nil))
				f.ok(f.m.Remove(f.key("a", ""), 1))
				f.ok(f.m.Remove(f.key("a", ""), 2))
				f.ok(f.m.Remove(f.key("b", ""), 1)) // b keeps entry 2
				f.ok(f.m.Clear(f.key("c", "")))
				f.ok(f.l.Clear(f.key("c", "")))
				f.ok(f.l.Add(f.key("c", ""), 7)) // c's list lives again
				f.ok(f.v.Clear(f.key("d", "")))
				f.ok(f.v.Put(f.key("d", ""), 2)) // d's value lives again
				move(f)
				f.ok(f.m.Clear(f.key("d", "")))
				f.ok(f.m.Put(f.key("d", ""), 3, 3)) // d's map: one entry after the clear
			},
			st:   func(f *keysFixture) State { return f.m },
			want: want{keys: map[string][]string{"": {"b", "d", "e"}}, entries: 4},
		},
	}
	for _, p := range places {
		for _, c := range cases {
			t.Run(p.name+"/"+c.name, func(t *testing.T) {
				f := newKeysFixture(t)
				c.write(f, p.move)
				f.check(c.st(f), c.want)
			})
		}
	}
	// The other states of the "cleared" case, checked once with the data spread over every tier.
	t.Run("spread/cleared-others", func(t *testing.T) {
		f := newKeysFixture(t)
		for _, k := range []string{"a", "b", "c", "d", "e"} {
			f.ok(f.v.Put(f.key(k, ""), 1))
			f.ok(f.l.Add(f.key(k, ""), 1))
		}
		f.pushDown()
		f.ok(f.v.Clear(f.key("a", "")))
		f.ok(f.l.Update(f.key("a", ""), nil))
		f.slices()
		f.ok(f.l.Clear(f.key("c", "")))
		f.ok(f.v.Clear(f.key("d", "")))
		f.seal()
		f.ok(f.l.Add(f.key("c", ""), 7))
		f.ok(f.v.Put(f.key("d", ""), 2))
		f.ok(f.l.Clear(f.key("e", "")))
		f.check(f.v, want{keys: map[string][]string{"": {"b", "c", "d", "e"}}, entries: 4})
		f.check(f.l, want{keys: map[string][]string{"": {"b", "c", "d"}}, entries: 3})
		f.check(f.r, want{keys: map[string][]string{"": nil}})
	})
}

// TestKeysEveryTier: keys whose newest versions lie in each tier at once — the LsmStore, the
// slices, a sealed segment and the active segment — come once each, in scan order (key group
// by key group), and only the Store's key groups occur.
func TestKeysEveryTier(t *testing.T) {
	f := newKeysFixture(t)
	want := map[string]bool{}
	put := func(lo, hi int) {
		for i := lo; i < hi; i++ {
			k := fmt.Sprintf("key-%04d", i)
			f.ok(f.v.Put(f.key(k, "ns"), int64(i)))
			want[k] = true
		}
	}
	put(0, 400)
	f.pushDown()
	put(300, 700) // rewrites 300..399 above the LsmStore's versions
	f.slices()
	put(600, 900)
	f.seal()
	put(850, 1000)
	got := keysOf(t, f.s, f.v, "ns")
	if len(got) != len(want) || dups(got) != "" {
		t.Fatalf("Keys: %d keys (%q twice), want %d", len(got), dups(got), len(want))
	}
	for i := 1; i < len(got); i++ {
		if a, b := f.s.Key([]byte(got[i-1])).KeyGroup(), f.s.Key([]byte(got[i])).KeyGroup(); a > b {
			t.Fatalf("Keys: key group %d (%q) after %d (%q)", b, got[i], a, got[i-1])
		}
	}
	if n, err := f.s.NumEntries(f.v); err != nil || n != 1000 {
		t.Fatalf("NumEntries = %d %v", n, err)
	}

	// A Store over key groups 8..15 of 32 sees only its own, with its data in every tier.
	dir := t.TempDir()
	kg := &KeyGroupRange{Start: 8, End: 15}
	s, err := open(dir, Options{MaxParallelism: 32, KeyGroups: kg, MemoryBudget: 256 << 20}, keysAdjust)
	f.ok(err)
	defer s.Close()
	v := must(NewValueState(s, ValueDescriptor[int64]{Name: "v", Codec: Int64}))
	mine := map[string]bool{}
	for i := range 2000 {
		k := s.Key(fmt.Appendf(nil, "key-%04d", i))
		if !kg.Contains(k.KeyGroup()) {
			if err := v.Put(k, 1); !errors.Is(err, ErrKeyGroupOutOfRange) {
				t.Fatalf("Put out of range: %v", err)
			}
			continue
		}
		f.ok(v.Put(k, 1))
		mine[string(k.Bytes())] = true
		if i%500 == 499 {
			f.ok(s.seal())
			f.ok(s.WaitBackground())
			s.Evict()
		}
	}
	seq, errf := s.KeysAndNamespaces(v)
	n := 0
	for k := range seq {
		if !kg.Contains(k.KeyGroup()) || !mine[string(k.Bytes())] {
			t.Fatalf("key %q of key group %d", k.Bytes(), k.KeyGroup())
		}
		n++
	}
	if err := errf(); err != nil || n != len(mine) {
		t.Fatalf("KeysAndNamespaces: %d keys, %v; want %d", n, err, len(mine))
	}
}

// TestKeysLargeSegment: a scan of 40 000 keys in the active segment (an index larger than the
// 1 MiB a scan keeps on the Go heap: mapped), with writes between its steps that append to
// the segment (new sorted runs of its index, merged again past four).
func TestKeysLargeSegment(t *testing.T) {
	s := openTest(t, Options{})
	v := must(NewValueState(s, ValueDescriptor[int64]{Name: "v", Codec: Int64}))
	l := must(NewListState(s, ListDescriptor[int64]{Name: "l", Codec: Int64}))
	const n = 40000
	for i := range n {
		if err := v.Put(s.Key(fmt.Appendf(nil, "key-%05d", i)), int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	seq, errf := s.Keys(v, nil)
	seen := map[string]bool{}
	for k := range seq {
		if seen[string(k.Bytes())] {
			t.Fatalf("%q twice", k.Bytes())
		}
		seen[string(k.Bytes())] = true
		if err := l.Add(k, 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := errf(); err != nil || len(seen) != n {
		t.Fatalf("Keys: %d keys, %v", len(seen), err)
	}
	for _, st := range []State{v, l} {
		if c, err := s.NumEntries(st); err != nil || c != n {
			t.Fatalf("NumEntries(%s) = %d %v", st.Name(), c, err)
		}
	}
}

// TestApplyToAllKeys: fn deletes every visited key's state and rewrites some other state of it
// (FLINK-9060); every key is visited exactly once although the tiers change under the scan
// (writes of fn roll segments, a WaitBackground in fn installs transforms), and afterwards the
// state is exactly what fn left.
func TestApplyToAllKeys(t *testing.T) {
	for _, place := range []string{"fresh", "slices", "lsm"} {
		t.Run(place, func(t *testing.T) {
			f := newKeysFixture(t)
			const n = 5000 // several scan batches
			want := map[string]bool{}
			for i := range n {
				k := fmt.Sprintf("k%05d", i)
				want[k] = true
				f.ok(f.v.Put(f.key(k, "w"), int64(i)))
				f.ok(f.m.Put(f.key(k, "w"), int64(i), 1))
				f.ok(f.v.Put(f.key(k, "other"), int64(i)))
			}
			switch place {
			case "slices":
				f.slices()
			case "lsm":
				f.pushDown()
			}
			seen := map[string]bool{}
			visits := 0
			err := f.s.ApplyToAllKeys([]byte("w"), f.v, func(k Key) error {
				visits++
				name := string(k.Bytes())
				if seen[name] {
					return fmt.Errorf("key %q visited twice", name)
				}
				seen[name] = true
				if string(k.Namespace()) != "w" {
					return fmt.Errorf("key %q in namespace %q", name, k.Namespace())
				}
				if x, ok, err := f.v.Get(k); err != nil || !ok || fmt.Sprintf("k%05d", x) != name {
					return fmt.Errorf("key %q: value %d %v %v", name, x, ok, err)
				}
				if err := f.v.Clear(k); err != nil {
					return err
				}
				if err := f.l.Add(k, int64(visits)); err != nil { // appended: each step indexes a new run
					return err
				}
				i := int64(0)
				fmt.Sscanf(name, "k%d", &i)
				if i%3 == 0 {
					// Rewrite: the map state of the key, and the value state in another namespace.
					if err := f.m.Put(k, i, 2); err != nil {
						return err
					}
					if err := f.v.Put(k.In([]byte("other")), -i); err != nil {
						return err
					}
				}
				if visits%1700 == 0 { // move data while the scan is open
					if err := f.s.seal(); err != nil {
						return err
					}
					return f.s.WaitBackground()
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(seen, want) {
				t.Fatalf("visited %d keys, want %d", len(seen), len(want))
			}
			f.check(f.v, want2(map[string][]string{"w": nil, "other": keysN(n, nil)}, n))
			f.check(f.l, want2(map[string][]string{"w": keysN(n, nil)}, n))
			for i := range n {
				k := f.key(fmt.Sprintf("k%05d", i), "other")
				x, ok, err := f.v.Get(k)
				if wantX := int64(i) * map[bool]int64{true: -1, false: 1}[i%3 == 0]; err != nil || !ok || x != wantX {
					t.Fatalf("key %d in other: %d %v %v, want %d", i, x, ok, err, wantX)
				}
				y, ok, err := f.m.Get(k.In([]byte("w")), int64(i))
				if wantY := map[bool]int64{true: 2, false: 1}[i%3 == 0]; err != nil || !ok || y != wantY {
					t.Fatalf("key %d map: %d %v %v, want %d", i, y, ok, err, wantY)
				}
			}

			// fn's error stops the scan and comes back as it is.
			stop := errors.New("stop")
			calls := 0
			err = f.s.ApplyToAllKeys([]byte("other"), f.v, func(Key) error {
				calls++
				return stop
			})
			if err != stop || calls != 1 {
				t.Fatalf("ApplyToAllKeys with a failing fn: %v after %d calls", err, calls)
			}
		})
	}
}

func keysN(n int, skip func(int) bool) []string {
	var out []string
	for i := range n {
		if skip == nil || !skip(i) {
			out = append(out, fmt.Sprintf("k%05d", i))
		}
	}
	return out
}

func want2(keys map[string][]string, entries int64) want { return want{keys: keys, entries: entries} }

// TestKeysErrors: a state of another Store, a nil state and a closed Store are errors, reported
// by the error function; Close during the loop ends it with ErrClosed.
func TestKeysErrors(t *testing.T) {
	s := openTest(t, Options{})
	other := openTest(t, Options{})
	v := must(NewValueState(s, ValueDescriptor[int64]{Name: "v", Codec: Int64}))
	ov := must(NewValueState(other, ValueDescriptor[int64]{Name: "v", Codec: Int64}))
	for i := range 3000 {
		if err := v.Put(s.Key(fmt.Appendf(nil, "%d", i)), 1); err != nil {
			t.Fatal(err)
		}
	}
	for _, st := range []State{ov, nil} {
		seq, errf := s.Keys(st, nil)
		for range seq {
			t.Fatal("a key of a foreign state")
		}
		if err := errf(); !errors.Is(err, ErrIncompatibleState) {
			t.Fatalf("Keys of %v: %v", st, err)
		}
		if _, err := s.NumEntries(st); !errors.Is(err, ErrIncompatibleState) {
			t.Fatalf("NumEntries of %v: %v", st, err)
		}
		if err := s.ApplyToAllKeys(nil, st, func(Key) error { return nil }); !errors.Is(err, ErrIncompatibleState) {
			t.Fatalf("ApplyToAllKeys of %v: %v", st, err)
		}
	}
	// Breaking out of the loop is not an error, and the scan is closed (no scan left open).
	seq, errf := s.Keys(v, nil)
	for range seq {
		break
	}
	if err := errf(); err != nil || s.Stats().OpenKeyScans != 0 {
		t.Fatalf("break: %v, %d scans open", err, s.Stats().OpenKeyScans)
	}
	n := 0
	seq, errf = s.Keys(v, nil)
	for range seq {
		if n++; n == 10 {
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := errf(); !errors.Is(err, ErrClosed) || n != 10 {
		t.Fatalf("Keys after Close in the loop: %v after %d keys", err, n)
	}
	if _, err := s.NumEntries(v); !errors.Is(err, ErrClosed) {
		t.Fatalf("NumEntries on a closed Store: %v", err)
	}
	if !strings.Contains(fmt.Sprint(errf()), `"v"`) {
		t.Fatalf("the error does not name the state: %v", errf())
	}
}

// TestKeysAllocs pins what a scan allocates: one arena per batch of 1024 keys and a few
// allocations per scan, nothing per key, whether the keys are in the FreshTable or the
// SliceTable (the figures of keys.go's and engine/doc.go's "Allocation").
func TestKeysAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own; allocations are pinned in normal builds")
	}
	s := openTest(t, Options{})
	v := must(NewValueState(s, ValueDescriptor[int64]{Name: "v", Codec: Int64}))
	const n = 20 * scanBatch
	for i := range n {
		must(0, v.Put(s.Key(fmt.Appendf(nil, "key-%06d", i)), int64(i)))
	}
	pass := func() {
		seq, errf := s.Keys(v, nil)
		c := 0
		for range seq {
			c++
		}
		if err := errf(); err != nil || c != n {
			t.Fatalf("Keys: %d keys, %v", c, err)
		}
	}
	for _, tier := range []string{"fresh", "slices"} {
		if tier == "slices" {
			must(0, s.seal())
			must(0, s.WaitBackground())
		}
		pass() // the first scan sizes the engine's buffers
		if a, most := testing.AllocsPerRun(5, pass), float64(n/scanBatch+20); a > most {
			t.Errorf("%s: a pass over %d keys allocates %v times, want at most %v", tier, n, a, most)
		}
	}
}
