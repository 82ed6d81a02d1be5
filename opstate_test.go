package strata

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/strata-db/strata/checkpoint"
	"github.com/strata-db/strata/internal/checkpointfs"
	"github.com/strata-db/strata/internal/engine"
	"github.com/strata-db/strata/internal/vfs"
	"github.com/strata-db/strata/memory"

	goldenfile "github.com/strata-db/strata/internal/golden"
)

// opEnv runs jobs of Stores with operator state on a MemFS: a job is the Stores of one
// parallelism, each with an even-split list, a union list and a broadcast state.
type opEnv struct {
	t    *testing.T
	fs   vfs.FS
	st   *checkpoint.DirStorage
	dirs int
	jobs int
}

func newOpEnv(t *testing.T) *opEnv {
	fsys := vfs.NewMem()
	st, err := checkpointfs.NewDirStorage(fsys, "/ck")
	if err != nil {
		t.Fatal(err)
	}
	return &opEnv{t: t, fs: fsys, st: st}
}

// opSub is one subtask of a job.
type opSub struct {
	s *Store
	l *OperatorListState[string]
	u *OperatorListState[string]
	b *BroadcastState[string, int64]
}

// opts returns the options of subtask index of parallelism par in job (its owner).
func (e *opEnv) opts(job, par, index int) Options {
	o := Options{MaxParallelism: 128, MemoryBudget: 24 << 20, SegmentSize: 16 << 20, BackgroundWorkers: 1,
		Parallelism: par, SubtaskIndex: index,
		Checkpoint: CheckpointOptions{Storage: e.st, Owner: fmt.Sprintf("job%d-sub%d-of-%d", job, index, par), Grace: checkpoint.NoGrace}}
	o.fs = e.fs
	return o
}

func (e *opEnv) dir() string {
	e.dirs++
	return fmt.Sprintf("/store-%d", e.dirs)
}

// register registers the three operator states on s.
func registerOpSub(t *testing.T, s *Store) *opSub {
	t.Helper()
	sub := &opSub{s: s}
	var err error
	if sub.l, err = NewOperatorListState(s, OperatorListDescriptor[string]{Name: "even", Codec: String}); err != nil {
		t.Fatal(err)
	}
	if sub.u, err = NewUnionListState(s, OperatorListDescriptor[string]{Name: "union", Codec: String}); err != nil {
		t.Fatal(err)
	}
	if sub.b, err = NewBroadcastState(s, BroadcastDescriptor[string, int64]{Name: "rules", KeyCodec: String, ValueCodec: Int64}); err != nil {
		t.Fatal(err)
	}
	return sub
}

// start opens a new job of par subtasks.
func (e *opEnv) start(par int) []*opSub {
	e.t.Helper()
	e.jobs++
	var subs []*opSub
	for i := range par {
		s, err := Open(e.dir(), e.opts(e.jobs, par, i))
		if err != nil {
			e.t.Fatal(err)
		}
		e.t.Cleanup(func() { s.Close() })
		subs = append(subs, registerOpSub(e.t, s))
	}
	return subs
}

// checkpoint checkpoints every subtask as checkpoint id and returns the handles.
func (e *opEnv) checkpoint(subs []*opSub, id uint64) []CheckpointHandle {
	e.t.Helper()
	var hs []CheckpointHandle
	for _, sub := range subs {
		h, err := sub.s.Checkpoint(context.Background(), id, nil)
		if err != nil {
			e.t.Fatal(err)
		}
		hs = append(hs, h)
	}
	return hs
}

// restore starts a job of par subtasks, each restored from every handle of hs.
func (e *opEnv) restore(hs []CheckpointHandle, par int) []*opSub {
	e.t.Helper()
	e.jobs++
	var subs []*opSub
	for i := range par {
		s, err := Restore(e.dir(), e.opts(e.jobs, par, i), e.st, hs...)
		if err != nil {
			e.t.Fatalf("restore of subtask %d of %d: %v", i, par, err)
		}
		e.t.Cleanup(func() { s.Close() })
		subs = append(subs, registerOpSub(e.t, s))
	}
	return subs
}

func getList(t *testing.T, l *OperatorListState[string]) []string {
	t.Helper()
	xs, err := l.Get()
	if err != nil {
		t.Fatal(err)
	}
	return xs
}

func getMap(t *testing.T, b *BroadcastState[string, int64]) map[string]int64 {
	t.Helper()
	seq, errf := b.Entries()
	m := map[string]int64{}
	for k, v := range seq {
		m[k] = v
	}
	if err := errf(); err != nil {
		t.Fatal(err)
	}
	return m
}

// multiset returns xs counted.
func multiset(xs []string) map[string]int {
	m := map[string]int{}
	for _, x := range xs {
		m[x]++
	}
	return m
}

// refShares is the even split of n elements over par subtasks for the first (or only)
// even-split state of a restore: contiguous, the first n%par subtasks one element more.
func refShares(n, par int) [][2]int {
	var out [][2]int
	lo := 0
	for j := range par {
		k := n / par
		if j < n%par {
			k++
		}
		out = append(out, [2]int{lo, lo + k})
		lo += k
	}
	return out
}

// TestOperatorStateRedistribution: a job at one parallelism restored at another: every new
// subtask gets its contiguous even-split share of the old subtasks' lists concatenated in
// subtask order (the shares' multiset union is exactly the old lists'), the whole union of the
// union lists, and one old subtask's broadcast copy ((new index mod old parallelism)-th, not a
// merge); at an unchanged parallelism each subtask keeps its own list.
func TestOperatorStateRedistribution(t *testing.T) {
	for _, tc := range []struct{ from, to int }{{1, 3}, {3, 2}, {2, 5}, {3, 3}, {4, 1}} {
		t.Run(fmt.Sprintf("%d-to-%d", tc.from, tc.to), func(t *testing.T) {
			e := newOpEnv(t)
			old := e.start(tc.from)
			var even, union [][]string
			var copies []map[string]int64
			for i, sub := range old {
				var l, u []string
				for j := range 2 + 3*i {
					l = append(l, fmt.Sprintf("e%d-%d", i, j))
				}
				for j := range 1 + i {
					u = append(u, fmt.Sprintf("u%d-%d", i, j))
				}
				u = append(u, "same") // an element every subtask holds: counted once per holder
				if err := sub.l.AddAll(l); err != nil {
					t.Fatal(err)
				}
				for _, x := range u {
					if err := sub.u.Add(x); err != nil {
						t.Fatal(err)
					}
				}
				m := map[string]int64{"rule-a": 1, "rule-b": 2, "from": int64(i)}
				for k, v := range m {
					if err := sub.b.Put(k, v); err != nil {
						t.Fatal(err)
					}
				}
				even, union, copies = append(even, l), append(union, u), append(copies, m)
			}
			hs := e.checkpoint(old, 1)
			allEven, allUnion := slices.Concat(even...), slices.Concat(union...)
			subs := e.restore(hs, tc.to)
			var got []string
			shares := refShares(len(allEven), tc.to)
			for j, sub := range subs {
				l := getList(t, sub.l)
				want := allEven[shares[j][0]:shares[j][1]]
				if tc.from == tc.to {
					want = even[j]
				}
				if !slices.Equal(l, want) {
					t.Errorf("subtask %d of %d: even-split list %q, want %q", j, tc.to, l, want)
				}
				got = append(got, l...)
				if u := getList(t, sub.u); !slices.Equal(u, allUnion) {
					t.Errorf("subtask %d of %d: union list %q, want %q", j, tc.to, u, allUnion)
				}
				if m := getMap(t, sub.b); !maps.Equal(m, copies[j%tc.from]) {
					t.Errorf("subtask %d of %d: broadcast %v, want old subtask %d's %v", j, tc.to, m, j%tc.from, copies[j%tc.from])
				}
			}
			if !maps.Equal(multiset(got), multiset(allEven)) {
				t.Errorf("the shares hold %v, the old lists %v", multiset(got), multiset(allEven))
			}
		})
	}
}

// unionStored returns the union list elements the checkpoints hs store (their manifests'
// operator state), each id once, by element.
func (e *opEnv) unionStored(hs []CheckpointHandle) map[string]int {
	e.t.Helper()
	out := map[string]int{}
	seen := map[uint64]bool{}
	for _, h := range hs {
		m, err := checkpoint.ReadManifest(context.Background(), e.st, h.Owner, h.ID)
		if err != nil {
			e.t.Fatal(err)
		}
		o, err := engine.DecodeOps("m", m.OperatorState, true)
		if err != nil {
			e.t.Fatal(err)
		}
		for _, st := range o.States {
			if st.Name == "union" {
				for i, x := range st.Elems {
					if !seen[st.IDs[i]] {
						seen[st.IDs[i]] = true
						out[string(x)]++
					}
				}
			}
		}
	}
	return out
}

// unionTok is an element of the union model: its value and the instance it is (what Add
// created; an Update that hands an element back keeps its instance).
type unionTok struct {
	e string
	n int
}

// unionModel returns the union a restore gives from the subtasks' lists held: their
// concatenation in subtask order, each instance once (opstate.go, "Union state").
func unionModel(held [][]unionTok) ([]unionTok, map[string]int) {
	var out []unionTok
	seen := map[int]bool{}
	ms := map[string]int{}
	for _, l := range held {
		for _, t := range l {
			if !seen[t.n] {
				seen[t.n] = true
				out = append(out, t)
				ms[t.e]++
			}
		}
	}
	return out, ms
}

// TestUnionListNoDuplication: union state restored, re-checkpointed and restored again at
// parallelisms 2 → 3 → 2 → 5 → 1 → 4 is, at every restore, the union of what the old subtasks
// held — each element instance once (not once per subtask: flink-agents #824), none lost
// (each subtask's checkpoint stores its list as it holds it, as Flink's) — whether a subtask
// leaves the union it received alone, hands it back whole with Update (plus an element of its
// own), clears it and adds its own, or keeps every other element; the even-split list keeps
// exact counts too.
func TestUnionListNoDuplication(t *testing.T) {
	e := newOpEnv(t)
	subs := e.start(2)
	wantL := map[string]int{}
	held := make([][]unionTok, 2)
	next := 0
	tok := func(x string) unionTok { next++; return unionTok{x, next} }
	for i, sub := range subs {
		for j := range 3 {
			x := fmt.Sprintf("g0-s%d-%d", i, j)
			must(0, sub.u.Add(x))
			must(0, sub.l.Add(x))
			held[i] = append(held[i], tok(x))
			wantL[x]++
		}
	}
	must(0, subs[1].u.Add("g0-s0-0")) // a duplicate element: two of it, both kept
	held[1] = append(held[1], tok("g0-s0-0"))
	hs := e.checkpoint(subs, 1)
	for gen, par := range []int{3, 2, 5, 1, 4} {
		union, wantU := unionModel(held)
		if got := e.unionStored(hs); !maps.Equal(got, wantU) {
			t.Fatalf("generation %d: the checkpoints store the union %v, want %v", gen, got, wantU)
		}
		subs = e.restore(hs, par)
		held = make([][]unionTok, par)
		var even []string
		for j, sub := range subs {
			u := getList(t, sub.u)
			if !maps.Equal(multiset(u), wantU) {
				t.Fatalf("generation %d, subtask %d of %d: union %v, want %v", gen, j, par, multiset(u), wantU)
			}
			for i, x := range u {
				if x != union[i].e {
					t.Fatalf("generation %d, subtask %d of %d: union %q, want the old subtasks' lists in order %v", gen, j, par, u, union)
				}
			}
			even = append(even, getList(t, sub.l)...)
		}
		if !maps.Equal(multiset(even), wantL) {
			t.Fatalf("generation %d: even-split lists %v, want %v", gen, multiset(even), wantL)
		}
		for j, sub := range subs {
			x := fmt.Sprintf("g%d-s%d", gen+1, j)
			h := slices.Clone(union)
			switch j % 4 {
			case 0: // leaves the union it received alone, adds one element
				must(0, sub.u.Add(x))
				h = append(h, tok(x))
			case 1: // hands the union back whole, with one more element
				u := getList(t, sub.u)
				must(0, sub.u.Update(append(u, x)))
				h = append(h, tok(x))
			case 2: // drops the union, keeps only an element of its own
				must(0, sub.u.Clear())
				must(0, sub.u.Add(x))
				h = []unionTok{tok(x)}
			case 3: // keeps every other element (Update matches each instance in order)
				u := getList(t, sub.u)
				var keep []string
				h = nil
				for i := 0; i < len(u); i += 2 {
					keep = append(keep, u[i])
					h = append(h, union[i])
				}
				must(0, sub.u.Update(keep))
			}
			held[j] = h
			must(0, sub.l.Add(x))
			wantL[x]++
		}
		if par == 5 { // the others drop their unions too: what subtask 3 keeps is all that is left of it
			for j := range subs {
				if j%4 == 3 || j%4 == 2 {
					continue
				}
				x := fmt.Sprintf("g%d-s%d", gen+1, j)
				must(0, subs[j].u.Update([]string{x}))
				held[j] = held[j][len(held[j])-1:]
			}
		}
		hs = e.checkpoint(subs, uint64(gen+2))
	}
}

// TestUnionListKeptElements: the elements a subtask keeps through Update are in its
// checkpoint whichever subtask held them before (issue 21 item 4: 1 → 2 → 1 with
// Update([a c]) on subtask 0 and Update([b d]) on subtask 1 returned [a d] of [a b c d]), in
// the old subtasks' order, as Flink's union redistribution gives them.
func TestUnionListKeptElements(t *testing.T) {
	e := newOpEnv(t)
	subs := e.start(1)
	must(0, subs[0].u.AddAll([]string{"a", "b", "c", "d"}))
	hs := e.checkpoint(subs, 1)
	subs = e.restore(hs, 2)
	must(0, subs[0].u.Update([]string{"a", "c"}))
	must(0, subs[1].u.Update([]string{"b", "d"}))
	hs = e.checkpoint(subs, 2)
	subs = e.restore(hs, 1)
	if got := getList(t, subs[0].u); !slices.Equal(got, []string{"a", "c", "b", "d"}) {
		t.Fatalf("1 → 2 → 1: union %q, want [a c b d]", got)
	}
	// Only one subtask keeps the restored union; the other clears it.
	subs = e.restore(e.checkpoint(subs, 3), 2)
	must(0, subs[0].u.Clear())
	subs = e.restore(e.checkpoint(subs, 4), 1)
	if got := getList(t, subs[0].u); !slices.Equal(got, []string{"a", "c", "b", "d"}) {
		t.Fatalf("1 → 2 (subtask 0 clears) → 1: union %q, want [a c b d]", got)
	}
}

// TestOperatorStateCloseOpen: Close and Open keep the operator state of a restored subtask —
// its even-split share, its union with the elements' ids (its next checkpoint stores the
// union as it holds it), the broadcast copy — and an operator state restored but not
// registered again is kept too. Open with another SubtaskIndex or Parallelism is refused.
func TestOperatorStateCloseOpen(t *testing.T) {
	e := newOpEnv(t)
	old := e.start(1)
	must(0, old[0].l.AddAll([]string{"a", "b", "c", "d"}))
	must(0, old[0].u.AddAll([]string{"x", "y", "z"}))
	must(0, old[0].b.Put("k", 7))
	q := must(NewUnionListState(old[0].s, OperatorListDescriptor[int64]{Name: "unregistered", Codec: Int64}))
	must(0, q.AddAll([]int64{1, 2}))
	hs := e.checkpoint(old, 1)
	e.jobs++
	dir := e.dir()
	o := e.opts(e.jobs, 2, 1)
	s, err := Restore(dir, o, e.st, hs...)
	if err != nil {
		t.Fatal(err)
	}
	sub := registerOpSub(t, s)
	must(0, sub.u.Add("mine"))
	wantL, wantU := getList(t, sub.l), getList(t, sub.u)
	if !slices.Equal(wantL, []string{"c", "d"}) || !slices.Equal(wantU, []string{"x", "y", "z", "mine"}) {
		t.Fatalf("restored %q, %q", wantL, wantU)
	}
	used := s.Budget().UsedBy(memory.PurposeOperatorState)
	if used == 0 || used != s.opBytes {
		t.Fatalf("operator state charged %d, counted %d", used, s.opBytes)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, other := range [][2]int{{3, 1}, {2, 0}} { // another parallelism, another subtask, same key groups
		o2 := e.opts(e.jobs, other[0], other[1])
		o2.KeyGroups = o.withDefaults().KeyGroups
		if _, err := Open(dir, o2); !errors.Is(err, ErrIncompatibleStore) || !strings.Contains(err.Error(), "operator state") {
			t.Fatalf("Open as subtask %d of %d: %v, want ErrIncompatibleStore for the operator state", other[1], other[0], err)
		}
	}
	s, err = Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.Budget().UsedBy(memory.PurposeOperatorState); got != used {
		t.Fatalf("reopened: operator state charged %d, before Close %d", got, used)
	}
	sub = registerOpSub(t, s)
	if l, u := getList(t, sub.l), getList(t, sub.u); !slices.Equal(l, wantL) || !slices.Equal(u, wantU) {
		t.Fatalf("reopened: %q, %q; want %q, %q", l, u, wantL, wantU)
	}
	if m := getMap(t, sub.b); !maps.Equal(m, map[string]int64{"k": 7}) {
		t.Fatalf("reopened broadcast %v", m)
	}
	h, err := s.Checkpoint(context.Background(), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Subtask 1 of 2 stores its union as it holds it: [x y z], and what it added.
	if got := e.unionStored([]CheckpointHandle{h}); !maps.Equal(got, map[string]int{"x": 1, "y": 1, "z": 1, "mine": 1}) {
		t.Fatalf("reopened subtask's checkpoint stores the union %v, want x, y, z and mine", got)
	}
	q2 := must(NewUnionListState(s, OperatorListDescriptor[int64]{Name: "unregistered", Codec: Int64}))
	if xs, err := q2.Get(); err != nil || !slices.Equal(xs, []int64{1, 2}) {
		t.Fatalf("a state kept unregistered across a restore and a reopen: %v, %v", xs, err)
	}
}

// TestOperatorStateChangelog: with the changelog on, a changelog checkpoint (the log's tail on
// a materialization) stores the operator state whole as of its cut, and a restore brings it
// back with the keyed state replayed from the log.
func TestOperatorStateChangelog(t *testing.T) {
	ctx := context.Background()
	e := newOpEnv(t)
	e.jobs++
	o := e.opts(e.jobs, 1, 0)
	o.Checkpoint.Changelog = &ChangelogOptions{MaterializationInterval: -1}
	s, err := Open(e.dir(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sub := registerOpSub(t, s)
	vs := must(NewValueState(s, ValueDescriptor[int64]{Name: "v", Codec: Int64}))
	must(0, sub.l.Add("before-1"))
	must(0, sub.b.Put("r", 1))
	if _, err := s.Checkpoint(ctx, 1, nil); err != nil { // the first materialization
		t.Fatal(err)
	}
	must(0, s.NotifyCheckpointComplete(1))
	for i := range 50 {
		must(0, vs.Put(s.Key(fmt.Appendf(nil, "k%d", i)), int64(i)))
	}
	must(0, sub.l.Add("before-2"))
	must(0, sub.u.Add("u"))
	must(0, sub.b.Put("r", 2))
	p, err := s.StartCheckpoint(2, nil)
	if err != nil {
		t.Fatal(err)
	}
	must(0, sub.l.Add("after-2")) // after the cut: not in checkpoint 2
	must(0, sub.b.Remove("r"))
	h, err := p.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if h.Stats.MemoryBytes != 0 {
		t.Fatalf("checkpoint 2 is not a changelog checkpoint: %+v", h.Stats)
	}
	e.jobs++
	r, err := Restore(e.dir(), e.opts(e.jobs, 1, 0), e.st, h)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if n := r.RestoreStats().ChangelogRecords; n < 50 {
		t.Fatalf("%d changelog records replayed, want 50", n)
	}
	rs := registerOpSub(t, r)
	if l, u, m := getList(t, rs.l), getList(t, rs.u), getMap(t, rs.b); !slices.Equal(l, []string{"before-1", "before-2"}) ||
		!slices.Equal(u, []string{"u"}) || !maps.Equal(m, map[string]int64{"r": 2}) {
		t.Fatalf("restored %q %q %v", l, u, m)
	}
	rv := must(NewValueState(r, ValueDescriptor[int64]{Name: "v", Codec: Int64}))
	if v, ok, err := rv.Get(r.Key([]byte("k49"))); err != nil || !ok || v != 49 {
		t.Fatalf("keyed state replayed: %v %v %v", v, ok, err)
	}
}

// TestIncompleteOperatorState: list state is redistributed only over one checkpoint of each
// old subtask (ErrIncompleteOperatorState otherwise: a missing subtask, a duplicate); a set
// without list elements (broadcast only, or empty lists) restores from any subset.
func TestIncompleteOperatorState(t *testing.T) {
	e := newOpEnv(t)
	old := e.start(3)
	for i, sub := range old {
		must(0, sub.b.Put("k", int64(i)))
	}
	hs := e.checkpoint(old, 1)
	e.jobs++
	if _, err := Restore(e.dir(), e.opts(e.jobs, 1, 0), e.st, hs[1]); err != nil {
		t.Fatalf("broadcast state only, one handle of three: %v", err)
	}
	must(0, old[2].u.Add("x"))
	hs = e.checkpoint(old, 2)
	// As subtask 1 of 2 (key groups 64-127), which old subtask 0 (0-42) does not overlap: a
	// duplicate of it is no keyed overlap.
	for name, set := range map[string][]CheckpointHandle{
		"missing subtask": {hs[0], hs[2]},
		"duplicate":       {hs[0], hs[1], hs[2], hs[0]},
		"one of three":    {hs[2]},
		"two of three":    {hs[1], hs[2]},
	} {
		e.jobs++
		if _, err := Restore(e.dir(), e.opts(e.jobs, 2, 1), e.st, set...); !errors.Is(err, ErrIncompleteOperatorState) {
			t.Errorf("%s: Restore = %v, want ErrIncompleteOperatorState", name, err)
		}
	}
}

// TestOperatorStateRegistration: names are shared with keyed states; a name keeps its mode
// (Flink's incompatible assignment mode), codecs and type; writes are counted and charged to
// the budget, bounded by MaxOperatorStateSize, and refunded by Clear and Close.
func TestOperatorStateRegistration(t *testing.T) {
	s := openTest(t, Options{})
	l := must(NewOperatorListState(s, OperatorListDescriptor[string]{Name: "l", Codec: String}))
	must(NewValueState(s, ValueDescriptor[int64]{Name: "v", Codec: Int64}))
	for name, err := range map[string]error{
		"union over even":     second(NewUnionListState(s, OperatorListDescriptor[string]{Name: "l", Codec: String})),
		"broadcast over list": second(NewBroadcastState(s, BroadcastDescriptor[string, string]{Name: "l", KeyCodec: String, ValueCodec: String})),
		"other codec":         second(NewOperatorListState(s, OperatorListDescriptor[string]{Name: "l", Codec: stringAlt{}})),
		"other type":          second(NewOperatorListState(s, OperatorListDescriptor[int64]{Name: "l", Codec: Int64})),
		"keyed name":          second(NewOperatorListState(s, OperatorListDescriptor[string]{Name: "v", Codec: String})),
		"keyed over op":       second(NewValueState(s, ValueDescriptor[int64]{Name: "l", Codec: Int64})),
		"empty name":          second(NewOperatorListState(s, OperatorListDescriptor[string]{Codec: String})),
		"nil codec":           second(NewOperatorListState(s, OperatorListDescriptor[string]{Name: "n"})),
		"nil value codec":     second(NewBroadcastState(s, BroadcastDescriptor[string, string]{Name: "n", KeyCodec: String})),
	} {
		if !errors.Is(err, ErrIncompatibleState) {
			t.Errorf("%s: %v, want ErrIncompatibleState", name, err)
		}
	}
	if again := must(NewOperatorListState(s, OperatorListDescriptor[string]{Name: "l", Codec: String})); again != l {
		t.Fatal("registering again returned another state")
	}
	base := s.Budget().UsedBy(memory.PurposeOperatorState)
	must(0, l.AddAll([]string{"abc", "de"}))
	if got := s.Budget().UsedBy(memory.PurposeOperatorState) - base; got != 5+2*opElemCost {
		t.Fatalf("two elements of 5 bytes charged %d", got)
	}
	big := strings.Repeat("x", 1<<20)
	var err error
	for range 16 {
		if err = l.Add(big); err != nil {
			break
		}
	}
	if !errors.Is(err, ErrOperatorStateTooLarge) {
		t.Fatalf("adding 16 MiB: %v, want ErrOperatorStateTooLarge", err)
	}
	if n := must(l.Len()); n != 2+7 {
		t.Fatalf("%d elements after the refused Add, want 9", n)
	}
	must(0, l.Clear())
	if got := s.Budget().UsedBy(memory.PurposeOperatorState); got != base {
		t.Fatalf("after Clear %d charged, want %d", got, base)
	}
	b := must(NewBroadcastState(s, BroadcastDescriptor[string, string]{Name: "b", KeyCodec: String, ValueCodec: String}))
	must(0, b.PutAll(maps.All(map[string]string{"1": "one", "2": "two", "3": "three"})))
	must(0, b.Put("2", "deux"))
	must(0, b.Remove("1"))
	must(0, b.Remove("absent"))
	if v, ok, err := b.Get("2"); v != "deux" || !ok || err != nil {
		t.Fatalf("Get = %q %v %v", v, ok, err)
	}
	if ok := must(b.Contains("1")); ok {
		t.Fatal("a removed key is there")
	}
	seq, errf := b.Entries()
	var keys []string
	for k := range seq {
		keys = append(keys, k)
		b.Remove("3") // removing during the range: not yielded after
	}
	if errf() != nil || !slices.Equal(keys, []string{"2"}) {
		t.Fatalf("entries %q, %v", keys, errf())
	}
	must(0, b.Clear())
	if n := must(b.Len()); n != 0 {
		t.Fatalf("%d entries after Clear", n)
	}
	if got, want := s.Budget().UsedBy(memory.PurposeOperatorState), s.opBytes; got != want {
		t.Fatalf("charged %d, counted %d", got, want)
	}
	st := s.Budget()
	s.Close()
	if got := st.UsedBy(memory.PurposeOperatorState); got != 0 {
		t.Fatalf("after Close %d bytes still charged", got)
	}
	if _, err := l.Get(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Get after Close: %v", err)
	}
	if err := b.Put("x", "y"); !errors.Is(err, ErrClosed) {
		t.Fatalf("Put after Close: %v", err)
	}
}

// stringAlt is a codec of another type than String.
type stringAlt struct{}

func (stringAlt) Append(dst []byte, v string) []byte { return append(dst, v...) }
func (stringAlt) Decode(b []byte) (string, error)    { return string(b), nil }

func second[T any](_ T, err error) error { return err }

// TestOperatorStateOptions: Parallelism and SubtaskIndex are validated, and place the default
// key groups as Flink's KeyGroupRangeAssignment.
func TestOperatorStateOptions(t *testing.T) {
	for _, o := range []Options{{Parallelism: -1}, {Parallelism: 129}, {Parallelism: 2, SubtaskIndex: 2}, {SubtaskIndex: 1}, {SubtaskIndex: -1, Parallelism: 3}} {
		if err := o.Validate(); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("%+v: Validate = %v", o, err)
		}
	}
	d := Options{MaxParallelism: 128, Parallelism: 3, SubtaskIndex: 1}.withDefaults()
	if want := ComputeKeyGroupRangeForOperatorIndex(128, 3, 1); *d.KeyGroups != want {
		t.Fatalf("default key groups %v, want %v", *d.KeyGroups, want)
	}
	if d := (Options{}).withDefaults(); d.Parallelism != 1 || *d.KeyGroups != (KeyGroupRange{Start: 0, End: 127}) {
		t.Fatalf("defaults %d %v", d.Parallelism, *d.KeyGroups)
	}
}

// goldenOpSnapshot is the fixed content of testdata/opstate-v2.bin (internal/engine's
// opstate_test.go holds its golden tests): subtask 2 of 5, an even-split list (an empty
// element among them), a union list with its element ids, an empty list, and a broadcast map
// with an empty value.
func goldenOpSnapshot() *engine.OpSnapshot {
	const pkg = "github.com/strata-db/strata."
	return &engine.OpSnapshot{Subtask: 2, Parallelism: 5, States: []*engine.OpState{
		{Name: "empty", Kind: opList, Codecs: [2]string{pkg + "int64Codec", ""}},
		{Name: "offsets", Kind: opList, Codecs: [2]string{pkg + "int64Codec", ""},
			Elems: [][]byte{Int64.Append(nil, 42), {}, Int64.Append(nil, -1)}},
		{Name: "pending", Kind: opUnion, Codecs: [2]string{pkg + "stringCodec", ""},
			Elems: [][]byte{[]byte("received-0"), []byte("own"), []byte("received-1")}, IDs: []uint64{1, 0xfedcba9876543210, 1<<64 - 1}},
		{Name: "rules", Kind: opBroadcast, Codecs: [2]string{pkg + "stringCodec", pkg + "bytesCodec"},
			Map: map[string][]byte{"a": []byte("alpha"), "b": {}, "zz": {0, 0xff}}},
	}}
}

// goldenOpSnapshotV1 is what the operator state of registry-v2.bin, registry-v3-ops.bin and
// registry-v4.bin (and testdata/opstate-v1.bin) decodes to: goldenOpSnapshot with the
// union's ids derived from its index ("Union state", invariant 4).
func goldenOpSnapshotV1() *engine.OpSnapshot {
	o := goldenOpSnapshot()
	u := o.States[2]
	for i := range u.IDs {
		u.IDs[i] = engine.V1UnionID(2, 5, u.Name, i)
	}
	return o
}

// opEqual compares two snapshots.
func opEqual(a, b *engine.OpSnapshot) bool {
	if a.Subtask != b.Subtask || a.Parallelism != b.Parallelism || len(a.States) != len(b.States) {
		return false
	}
	for i, x := range a.States {
		y := b.States[i]
		if x.Name != y.Name || x.Kind != y.Kind || x.Codecs != y.Codecs || !slices.EqualFunc(x.Elems, y.Elems, bytes.Equal) ||
			!maps.EqualFunc(x.Map, y.Map, bytes.Equal) || len(x.Map) != len(y.Map) || !slices.Equal(x.IDs, y.IDs) {
			return false
		}
	}
	return true
}

// TestGoldenRegistryV2: the state registry with operator state (persist.go, version 2):
// testdata/registry-v2.bin (its operator state blob of version 1, no longer written) decodes
// to goldenRegistryStore's registry with goldenOpSnapshotV1; the registry with
// goldenOpSnapshot is version 2 still and decodes back.
func TestGoldenRegistryV2(t *testing.T) {
	s := goldenRegistryStore(t)
	r := s.registry()
	path := "testdata/registry-v2.bin"
	golden := goldenfile.Read(t, path)
	got, err := decodeReg(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !opEqual(got.ops, goldenOpSnapshotV1()) || !maps.Equal(got.States, r.States) || got.NextID != r.NextID {
		t.Fatalf("%s decodes to %+v", path, got)
	}
	if v := binary.LittleEndian.Uint16(golden[8:]); v != 2 {
		t.Fatalf("version %d", v)
	}
	ops := goldenOpSnapshot()
	b := encodeRegistryOps(r, ops)
	if got, err := decodeReg(b); err != nil || binary.LittleEndian.Uint16(b[8:]) != 2 || !opEqual(got.ops, ops) {
		t.Fatalf("a registry with operator state of version 2: %v, %v", got, err)
	}
	// Without operator state the registry stays version 1, byte for byte.
	if !bytes.Equal(encodeRegistryOps(r, &engine.OpSnapshot{Subtask: 0, Parallelism: 1}), s.encodeRegistry()) {
		t.Fatal("a registry with no operator state is not version 1")
	}
}

// TestOperatorStateCorruption: a checkpoint whose operator state is damaged or of another
// version fails Restore with ErrCorruption (ErrFormatVersion), naming the manifest (the blob's
// decoder is tested byte by byte in internal/engine: TestDecodeOpsDamage, FuzzDecodeOps).
func TestOperatorStateCorruption(t *testing.T) {
	// Through Restore: a checkpoint's manifest with a damaged operator state, committed under
	// a new id.
	e := newOpEnv(t)
	old := e.start(1)
	must(0, old[0].u.Add("x"))
	h := e.checkpoint(old, 1)[0]
	m, err := checkpoint.ReadManifest(context.Background(), e.st, h.Owner, h.ID)
	if err != nil {
		t.Fatal(err)
	}
	for i, damage := range []struct {
		edit  func([]byte) []byte
		cause error
	}{
		{func(b []byte) []byte { b[len(b)/2] ^= 0x10; return b }, ErrChecksum},
		{func(b []byte) []byte { b[8] = 9; return b }, ErrFormatVersion},
		{func(b []byte) []byte { return b[:len(b)-1] }, ErrTruncated},
	} {
		d := *m
		d.ID = uint64(10 + i)
		d.OperatorState = damage.edit(bytes.Clone(m.OperatorState))
		if err := checkpoint.Commit(context.Background(), e.st, h.Owner, &d); err != nil {
			t.Fatal(err)
		}
		dh := h
		dh.ID = d.ID
		e.jobs++
		_, err := Restore(e.dir(), e.opts(e.jobs, 1, 0), e.st, dh)
		if !errors.Is(err, ErrCorruption) || !errors.Is(err, damage.cause) || !strings.Contains(err.Error(), checkpoint.ManifestName(h.Owner, d.ID)) {
			t.Errorf("restore of damage %d: %v, want ErrCorruption with %v naming the manifest", i, err, damage.cause)
		}
	}
}
