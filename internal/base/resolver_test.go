package base

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

type resolverCase struct {
	name   string
	cfg    Resolver // Bottom, DropTombstones, MaxList, Filter
	in     []Entry  // entry order
	want   []Entry
	hidden int64
}

func resolverCases() []resolverCase {
	V, T, B, A := KindValue, KindTombstone, KindListBase, KindListAppend
	E, ET := KindMapEntry, KindMapEntryTombstone
	dropX := func(e *Entry) (Decision, *Entry) {
		if string(e.Value) == "x" {
			return FilterDrop, nil
		}
		return FilterKeep, nil
	}
	var rw Entry
	upper := func(e *Entry) (Decision, *Entry) {
		if e.Kind != KindListBase {
			return FilterKeep, nil
		}
		rw = *e
		rw.Value = bytes.ToUpper(e.Value)
		return FilterRewrite, &rw
	}
	return []resolverCase{
		{name: "1 newest wins",
			in:   []Entry{ent(V, 3, "", "c"), ent(V, 2, "", "b"), ent(V, 1, "", "a")},
			want: []Entry{ent(V, 3, "", "c")}, hidden: 2},
		{name: "1 newest tombstone wins",
			in:   []Entry{ent(T, 3, "", ""), ent(V, 2, "", "b")},
			want: []Entry{ent(T, 3, "", "")}, hidden: 1},
		{name: "1 each key its own group",
			in:   []Entry{withKey(ent(V, 3, "", "a"), 1, "a"), withKey(ent(V, 2, "", "b"), 1, "b"), withKey(ent(V, 1, "", "c"), 2, "a")},
			want: []Entry{withKey(ent(V, 3, "", "a"), 1, "a"), withKey(ent(V, 2, "", "b"), 1, "b"), withKey(ent(V, 1, "", "c"), 2, "a")}},
		{name: "2 operands stack on the newest base",
			in:   []Entry{ent(A, 5, "", "c"), ent(A, 4, "", "b"), ent(B, 3, "", "a"), ent(B, 1, "", "z")},
			want: []Entry{ent(B, 5, "", "abc")}, hidden: 2},
		{name: "2 operands stack on a value",
			in:   []Entry{ent(A, 5, "", "b"), ent(V, 3, "", "a")},
			want: []Entry{ent(B, 5, "", "ab")}, hidden: 1},
		{name: "2 operands over a tombstone become a base",
			in:   []Entry{ent(A, 5, "", "b"), ent(A, 4, "", "a"), ent(T, 3, "", ""), ent(B, 1, "", "z")},
			want: []Entry{ent(B, 5, "", "ab")}, hidden: 2},
		{name: "3 operands over nothing stay an operand",
			in:   []Entry{ent(A, 5, "", "b"), ent(A, 4, "", "a")},
			want: []Entry{ent(A, 5, "", "ab")}},
		{name: "3 operands over nothing at the bottom become a base",
			cfg:  Resolver{Bottom: true, DropTombstones: true},
			in:   []Entry{ent(A, 5, "", "b"), ent(A, 4, "", "a")},
			want: []Entry{ent(B, 5, "", "ab")}},
		{name: "3 bottom alone: operands become a base, tombstones kept",
			cfg:  Resolver{Bottom: true},
			in:   []Entry{ent(A, 5, "", "b"), withKey(ent(T, 4, "", ""), 2, "k")},
			want: []Entry{ent(B, 5, "", "b"), withKey(ent(T, 4, "", ""), 2, "k")}},
		{name: "4 a list over MaxList keeps its base below the oldest piece",
			cfg:  Resolver{MaxList: 5},
			in:   []Entry{ent(A, 5, "", "bb"), ent(A, 4, "", "aa"), ent(B, 3, "", "zz"), ent(B, 1, "", "old")},
			want: []Entry{ent(A, 5, "", "aabb"), ent(B, 3, "", "zz")}, hidden: 1},
		{name: "4 a long list is a chain of pieces, the oldest joined with the base",
			cfg: Resolver{MaxList: 4},
			in: []Entry{ent(A, 9, "", "f"), ent(A, 8, "", "e"), ent(A, 7, "", "dd"), ent(A, 6, "", "cc"),
				ent(A, 5, "", "b"), ent(B, 2, "", "a"), ent(V, 1, "", "old")},
			want:   []Entry{ent(A, 9, "", "ddef"), ent(B, 6, "", "abcc")},
			hidden: 2},
		{name: "4 an operand longer than MaxList is a piece alone",
			cfg:  Resolver{MaxList: 2, Bottom: true},
			in:   []Entry{ent(A, 9, "", "c"), ent(A, 8, "", "bbbb"), ent(A, 7, "", "a")},
			want: []Entry{ent(A, 9, "", "c"), ent(A, 8, "", "bbbb"), ent(B, 7, "", "a")}},
		{name: "4 entries held between pieces keep entry order",
			cfg:  Resolver{MaxList: 2},
			in:   []Entry{ent(A, 9, "", "cc"), ent(E, 8, "", "e8"), ent(A, 7, "", "bb"), ent(A, 6, "", "a"), ent(T, 3, "", "")},
			want: []Entry{ent(A, 9, "", "cc"), ent(E, 8, "", "e8"), ent(A, 7, "", "bb"), ent(B, 6, "", "a")}, hidden: 1},
		{name: "4 a list at MaxList is joined",
			cfg:  Resolver{MaxList: 6},
			in:   []Entry{ent(A, 5, "", "bb"), ent(A, 4, "", "aa"), ent(B, 3, "", "zz")},
			want: []Entry{ent(B, 5, "", "zzaabb")}, hidden: 1},
		{name: "4 pieces over a tombstone consume it: the oldest is the base",
			cfg:  Resolver{MaxList: 3, Bottom: true, DropTombstones: true},
			in:   []Entry{ent(A, 5, "", "bb"), ent(A, 4, "", "aa"), ent(T, 3, "", "")},
			want: []Entry{ent(A, 5, "", "bb"), ent(B, 4, "", "aa")}, hidden: 1},
		{name: "4 pieces over nothing stay operands",
			cfg:  Resolver{MaxList: 3},
			in:   []Entry{ent(A, 5, "", "bb"), ent(A, 4, "", "aa")},
			want: []Entry{ent(A, 5, "", "bb"), ent(A, 4, "", "aa")}},
		{name: "5 a clear hides older entries of its map, not newer",
			in: []Entry{ent(T, 5, "", ""), ent(T, 2, "", ""),
				ent(E, 7, "a", "a7"), ent(E, 3, "a", "a3"), ent(E, 4, "b", "b4"), ent(ET, 6, "c", ""), ent(E, 1, "c", "c1")},
			want:   []Entry{ent(T, 5, "", ""), ent(E, 7, "a", "a7"), ent(ET, 6, "c", "")},
			hidden: 4},
		{name: "5 an equal Seq is not hidden",
			in:   []Entry{ent(T, 5, "", ""), ent(E, 5, "a", "a5")},
			want: []Entry{ent(T, 5, "", ""), ent(E, 5, "a", "a5")}},
		{name: "5 the clear stays below newer entries of user key empty",
			in:   []Entry{ent(E, 9, "", "e9"), ent(T, 5, "", ""), ent(E, 3, "", "e3"), ent(E, 4, "a", "a4")},
			want: []Entry{ent(E, 9, "", "e9"), ent(T, 5, "", "")}, hidden: 2},
		{name: "5 a clear hidden by a newer key-level version still hides",
			in:   []Entry{ent(V, 10, "", "v"), ent(T, 5, "", ""), ent(E, 3, "a", "a3"), ent(E, 6, "b", "b6")},
			want: []Entry{ent(V, 10, "", "v"), ent(E, 6, "b", "b6")}, hidden: 2},
		{name: "5 a clear ends with its map",
			in:   []Entry{withKey(ent(T, 5, "", ""), 1, "k1"), withKey(ent(E, 3, "a", "a3"), 1, "k2"), withKey(ent(E, 2, "a", "x"), 2, "k1")},
			want: []Entry{withKey(ent(T, 5, "", ""), 1, "k1"), withKey(ent(E, 3, "a", "a3"), 1, "k2"), withKey(ent(E, 2, "a", "x"), 2, "k1")}},
		{name: "1 map entry tombstone decides its entry only",
			in:   []Entry{ent(ET, 6, "a", ""), ent(E, 2, "a", "a2"), ent(E, 1, "b", "b1")},
			want: []Entry{ent(ET, 6, "a", ""), ent(E, 1, "b", "b1")}, hidden: 1},
		{name: "6 tombstones stay above the bottom",
			in:   []Entry{ent(T, 5, "", ""), ent(V, 1, "", "a"), ent(ET, 6, "a", ""), ent(E, 3, "b", "b")},
			want: []Entry{ent(T, 5, "", ""), ent(ET, 6, "a", "")}, hidden: 2},
		{name: "6 tombstones go at the bottom and still hide",
			cfg:  Resolver{Bottom: true, DropTombstones: true},
			in:   []Entry{ent(T, 5, "", ""), ent(V, 1, "", "a"), ent(ET, 6, "a", ""), ent(E, 2, "a", "a2"), ent(E, 3, "b", "b"), ent(E, 7, "c", "c")},
			want: []Entry{ent(E, 7, "c", "c")}, hidden: 3},
		{name: "7 filter drops",
			cfg:  Resolver{Filter: dropX},
			in:   []Entry{withKey(ent(V, 3, "", "x"), 1, "a"), withKey(ent(V, 2, "", "y"), 1, "b"), withKey(ent(V, 1, "", "old"), 1, "b")},
			want: []Entry{withKey(ent(V, 2, "", "y"), 1, "b")}, hidden: 1},
		{name: "7 filter sees resolved entries only and rewrites",
			cfg:  Resolver{Filter: upper},
			in:   []Entry{ent(A, 5, "", "b"), ent(B, 3, "", "a"), withKey(ent(V, 2, "", "v"), 2, "k")},
			want: []Entry{ent(B, 5, "", "AB"), withKey(ent(V, 2, "", "v"), 2, "k")}, hidden: 1},
		{name: "8 duplicates are skipped",
			in:   []Entry{ent(A, 5, "", "b"), ent(A, 5, "", "b"), ent(V, 3, "", "a"), ent(V, 3, "", "a")},
			want: []Entry{ent(B, 5, "", "ab")}, hidden: 3},
		{name: "order kept around unresolved operands",
			in:   []Entry{ent(A, 9, "", "b"), ent(E, 8, "", "e8"), ent(E, 7, "", "e7"), ent(B, 3, "", "a")},
			want: []Entry{ent(B, 9, "", "ab"), ent(E, 8, "", "e8")}, hidden: 2},
	}
}

// run feeds in through a Resolver configured as c.cfg. Unless stable, every
// entry's bytes are clobbered after Add, as an sstable iterator reuses its
// buffer.
func runResolver(t *testing.T, c resolverCase, stable bool) ([]Entry, ResolverStats) {
	t.Helper()
	r := c.cfg
	r.Stable = stable
	var out []Entry
	r.Emit = func(e *Entry) error {
		c := *e
		c.Key, c.UserKey, c.Value = bytes.Clone(e.Key), bytes.Clone(e.UserKey), bytes.Clone(e.Value)
		if len(c.UserKey) == 0 {
			c.UserKey = nil
		}
		if len(c.Value) == 0 {
			c.Value = nil
		}
		out = append(out, c)
		return nil
	}
	for i := range c.in {
		e := c.in[i]
		if !stable {
			e.Key, e.UserKey, e.Value = bytes.Clone(e.Key), bytes.Clone(e.UserKey), bytes.Clone(e.Value)
		}
		if err := r.Add(&e); err != nil {
			t.Fatal(err)
		}
		if !stable {
			for _, b := range [][]byte{e.Key, e.UserKey, e.Value} {
				for j := range b {
					b[j] = '#'
				}
			}
		}
	}
	if err := r.Finish(); err != nil {
		t.Fatal(err)
	}
	return out, r.Stats()
}

func TestResolverRules(t *testing.T) {
	for _, c := range resolverCases() {
		for _, stable := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/stable=%v", c.name, stable), func(t *testing.T) {
				got, st := runResolver(t, c, stable)
				if !sameEntries(got, c.want) {
					t.Fatalf("got  %s\nwant %s", fmtEntries(got), fmtEntries(c.want))
				}
				if st.Hidden != c.hidden {
					t.Errorf("hidden %d, want %d (%+v)", st.Hidden, c.hidden, st)
				}
				if st.In != int64(len(c.in)) || st.Out != int64(len(c.want)) {
					t.Errorf("stats %+v for %d in, %d out", st, len(c.in), len(c.want))
				}
			})
		}
	}
}

func TestResolverFilterCounts(t *testing.T) {
	r := Resolver{DropTombstones: true, Bottom: true, Emit: func(*Entry) error { return nil }}
	r.Filter = func(e *Entry) (Decision, *Entry) {
		if e.Kind == KindValue {
			return FilterDrop, nil
		}
		return FilterKeep, nil
	}
	for _, e := range []Entry{withKey(ent(KindTombstone, 3, "", ""), 1, "a"), withKey(ent(KindValue, 2, "", "v"), 1, "b"), withKey(ent(KindListBase, 1, "", "l"), 1, "c")} {
		if err := r.Add(&e); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Finish(); err != nil {
		t.Fatal(err)
	}
	if st := r.Stats(); st.Tombstones != 1 || st.Dropped != 1 || st.Out != 1 {
		t.Fatalf("stats %+v", st)
	}
	r.Reset()
	if st := r.Stats(); st != (ResolverStats{}) {
		t.Fatalf("after Reset: %+v", st)
	}
}

func TestResolverFilterRewriteMustKeepPlace(t *testing.T) {
	var bad Entry
	r := Resolver{Emit: func(*Entry) error { return nil }, Filter: func(e *Entry) (Decision, *Entry) {
		bad = *e
		bad.Seq++
		return FilterRewrite, &bad
	}}
	defer func() {
		if p := recover(); p == nil || !strings.HasPrefix(fmt.Sprint(p), "strata: invariant:") {
			t.Fatalf("panic %v", p)
		}
	}()
	e := ent(KindValue, 1, "", "v")
	r.Add(&e)
	r.Finish()
}

func TestResolverEmitError(t *testing.T) {
	boom := errors.New("boom")
	r := Resolver{Emit: func(*Entry) error { return boom }}
	a, b := withKey(ent(KindValue, 2, "", "a"), 1, "a"), withKey(ent(KindListAppend, 1, "", "b"), 1, "b")
	if err := r.Add(&a); !errors.Is(err, boom) {
		t.Fatalf("Add: %v", err)
	}
	r.Reset()
	if err := r.Add(&b); err != nil {
		t.Fatalf("Add of an operand emits nothing yet: %v", err)
	}
	if err := r.Finish(); !errors.Is(err, boom) {
		t.Fatalf("Finish: %v", err)
	}
}

func TestResolverPointReads(t *testing.T) {
	V, T, B, A := KindValue, KindTombstone, KindListBase, KindListAppend
	E, ET := KindMapEntry, KindMapEntryTombstone
	for _, c := range []struct {
		name      string
		key       []Entry // fed to ReadKey
		entry     []Entry // fed to ReadMapEntry
		clear     []Entry // fed to ReadClear
		steps     []Step  // of key, then entry, then clear
		st        Status
		complete  bool
		seq       uint64
		stopAfter int // versions fed before the first complete step (all: -1)
	}{
		{name: "nothing", st: Absent},
		{name: "value", key: []Entry{ent(V, 3, "", "v"), ent(V, 1, "", "w")}, steps: []Step{StepBase, StepSkip}, st: Found, complete: true, seq: 3},
		{name: "tombstone", key: []Entry{ent(T, 3, "", ""), ent(V, 1, "", "w")}, steps: []Step{StepDelete, StepSkip}, st: Deleted, complete: true, seq: 3},
		{name: "operands on a base", key: []Entry{ent(A, 5, "", "b"), ent(A, 4, "", "a"), ent(B, 3, "", "z")},
			steps: []Step{StepOperand, StepOperand, StepBase}, st: Found, complete: true, seq: 3},
		{name: "operands on a tombstone", key: []Entry{ent(A, 5, "", "b"), ent(T, 3, "", "")},
			steps: []Step{StepOperand, StepDelete}, st: Found, complete: true, seq: 3},
		{name: "operands over nothing are not complete", key: []Entry{ent(A, 5, "", "b")},
			steps: []Step{StepOperand}, st: Found},
		{name: "a map entry of user key empty is no key-level version", key: []Entry{ent(E, 5, "", "e"), ent(V, 3, "", "v")},
			steps: []Step{StepSkip, StepBase}, st: Found, complete: true, seq: 3},
		{name: "map entry", entry: []Entry{ent(E, 7, "a", "x"), ent(E, 2, "a", "y")}, clear: []Entry{ent(T, 5, "", "")},
			steps: []Step{StepBase, StepSkip, StepDelete}, st: Found, complete: true, seq: 7},
		{name: "map entry under a clear", entry: []Entry{ent(E, 3, "a", "x")}, clear: []Entry{ent(T, 5, "", ""), ent(T, 1, "", "")},
			steps: []Step{StepBase, StepDelete, StepSkip}, st: Deleted, complete: true, seq: 5},
		{name: "map entry as new as a clear", entry: []Entry{ent(E, 5, "a", "x")}, clear: []Entry{ent(T, 5, "", "")},
			steps: []Step{StepBase, StepDelete}, st: Found, complete: true, seq: 5},
		{name: "removed map entry", entry: []Entry{ent(ET, 7, "a", ""), ent(E, 6, "a", "x")},
			steps: []Step{StepDelete, StepSkip}, st: Deleted, complete: true, seq: 7},
		{name: "cleared map, no entry", clear: []Entry{ent(E, 9, "", "e"), ent(T, 5, "", "")},
			steps: []Step{StepSkip, StepDelete}, st: Deleted, complete: true, seq: 5},
		{name: "map entry, no clear", entry: []Entry{ent(T, 9, "", ""), ent(E, 4, "", "e")},
			steps: []Step{StepSkip, StepBase}, st: Found, complete: true, seq: 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			var r Resolver
			r.StartRead()
			r.ReadKey(&Entry{Kind: V, Seq: 99}) // a previous read, forgotten by StartRead
			r.StartRead()
			var steps []Step
			for i := range c.key {
				steps = append(steps, r.ReadKey(&c.key[i]))
			}
			for i := range c.entry {
				steps = append(steps, r.ReadMapEntry(&c.entry[i]))
			}
			for i := range c.clear {
				steps = append(steps, r.ReadClear(&c.clear[i]))
			}
			if !slices.Equal(steps, c.steps) {
				t.Errorf("steps %v, want %v", steps, c.steps)
			}
			st, complete, seq := r.Answer()
			if st != c.st || complete != c.complete || seq != c.seq {
				t.Errorf("Answer() = %v, %v, %d; want %v, %v, %d", st, complete, seq, c.st, c.complete, c.seq)
			}
		})
	}
}

// TestResolverReadAgreesWithCompaction: one rule set, two uses. For random
// versions of one list key and of a map, a point read of the compaction's
// output answers as a point read of its input (rules 1-6), at the bottom
// and above it, with and without a bound on list pieces (rule 4), which no
// output value passes.
func TestResolverReadAgreesWithCompaction(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	keyKinds := []Kind{KindValue, KindTombstone, KindListBase, KindListAppend, KindListAppend}
	for iter := 0; iter < 3000; iter++ {
		var in []Entry
		seq := uint64(100)
		n := rng.IntN(6)
		for i := 0; i < n; i++ {
			seq -= uint64(1 + rng.IntN(3))
			in = append(in, ent(keyKinds[rng.IntN(len(keyKinds))], seq, "", fmt.Sprintf("%d,", seq)))
		}
		// The map key "m": its clears, then user keys a and b.
		var tombs, as, bs []Entry
		for i, s := 0, uint64(100); i < rng.IntN(3); i++ {
			s -= uint64(1 + rng.IntN(30))
			tombs = append(tombs, withKey(ent(KindTombstone, s, "", ""), 1, "m"))
		}
		for _, dst := range []*[]Entry{&as, &bs} {
			uk := "a"
			if dst == &bs {
				uk = "b"
			}
			for i, s := 0, uint64(100); i < rng.IntN(3); i++ {
				s -= uint64(1 + rng.IntN(30))
				k := KindMapEntry
				if rng.IntN(3) == 0 {
					k = KindMapEntryTombstone
				}
				*dst = append(*dst, withKey(ent(k, s, uk, fmt.Sprint(s)), 1, "m"))
			}
		}
		in = append(append(append(append(in, tombs...), as...), bs...), []Entry{}...)
		for _, bottom := range []bool{false, true} {
			maxList := []int{0, 3, 4, 7}[rng.IntN(4)] // values are 3 or 4 bytes
			c := resolverCase{cfg: Resolver{Bottom: bottom, DropTombstones: bottom, MaxList: maxList}, in: in}
			out, _ := runResolver(t, c, iter%2 == 0)
			for _, e := range out {
				if maxList > 0 && len(e.Value) > max(maxList, 4) {
					t.Fatalf("MaxList %d: a piece of %d bytes: %s", maxList, len(e.Value), fmtEntries(out))
				}
			}
			for _, uk := range []string{"", "a", "b"} {
				want := pointRead(in, uk, bottom)
				got := pointRead(out, uk, bottom)
				if got != want {
					t.Fatalf("bottom %v user key %q: read of the output %q, of the input %q\nin  %s\nout %s",
						bottom, uk, got, want, fmtEntries(in), fmtEntries(out))
				}
			}
		}
	}
}

// pointRead reads key "k" (uk "") or the map entry "m"/uk through the
// Resolver's point-read API and renders the answer; at the bottom an
// incomplete answer is final (nothing lies below).
func pointRead(es []Entry, uk string, bottom bool) string {
	var r Resolver
	r.StartRead()
	var parts []string
	for i := range es {
		e := &es[i]
		if uk == "" && string(e.Key) == "k" {
			switch r.ReadKey(e) {
			case StepOperand, StepBase:
				parts = append([]string{string(e.Value)}, parts...)
			}
		}
		if uk != "" && string(e.Key) == "m" {
			if string(e.UserKey) == uk && r.ReadMapEntry(e) == StepBase {
				parts = append(parts, string(e.Value))
			}
			if len(e.UserKey) == 0 {
				r.ReadClear(e)
			}
		}
	}
	st, complete, _ := r.Answer()
	if st == Deleted || bottom && st == Absent {
		return "none"
	}
	return fmt.Sprintf("%v %v %s", st, complete || bottom, strings.Join(parts, ""))
}
