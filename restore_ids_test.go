package strata

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-db/strata/checkpoint"
	"github.com/strata-db/strata/internal/checkpointfs"
	"github.com/strata-db/strata/internal/vfs"
)

// idsEnv is a job whose subtasks register their states lazily, in orders of their own.
type idsEnv struct {
	t   *testing.T
	fs  vfs.FS
	st  *checkpoint.DirStorage
	now *atomic.Int64
	n   int
}

func (e *idsEnv) opts(kg KeyGroupRange, owner string) Options {
	o := Options{MaxParallelism: 128, MemoryBudget: 64 << 20, SegmentSize: 16 << 20, BackgroundWorkers: 1,
		KeyGroups: &kg, Clock: e.now.Load,
		Checkpoint: CheckpointOptions{Storage: e.st, Owner: owner, Grace: checkpoint.NoGrace}}
	o.fs = e.fs
	return o
}

func (e *idsEnv) dir() string { e.n++; return fmt.Sprintf("/s%d", e.n) }

// idsStates are the states of the job, each registered by idsRegister in the order given.
type idsStates struct {
	v     *ValueState[string] // "v", no TTL
	l     *ListState[string]  // "l", no TTL
	t     *ValueState[string] // "t", a TTL of one hour
	onlyA *ValueState[string] // "onlyA": registered by subtask A only (and later Stores)
	onlyB *ValueState[string] // "onlyB": by subtask B only
}

// idsRegister registers the states named in order on s (the others stay nil).
func idsRegister(t *testing.T, s *Store, order ...string) *idsStates {
	t.Helper()
	x := &idsStates{}
	for _, name := range order {
		switch name {
		case "v":
			x.v = must(NewValueState(s, ValueDescriptor[string]{Name: "v", Codec: String}))
		case "l":
			x.l = must(NewListState(s, ListDescriptor[string]{Name: "l", Codec: String}))
		case "t":
			x.t = must(NewValueState(s, ValueDescriptor[string]{Name: "t", Codec: String, TTL: &TTLConfig{TTL: time.Hour}}))
		case "onlyA":
			x.onlyA = must(NewValueState(s, ValueDescriptor[string]{Name: "onlyA", Codec: String}))
		case "onlyB":
			x.onlyB = must(NewValueState(s, ValueDescriptor[string]{Name: "onlyB", Codec: String}))
		}
	}
	return x
}

// idsKeys returns the keys 0..n-1 of s's key groups.
func idsKeys(s *Store, n int) []Key {
	var out []Key
	kg := *s.opts.KeyGroups
	for i := range n {
		k := s.Key(fmt.Appendf(nil, "key-%d", i))
		if int(k.kg) >= kg.Start && int(k.kg) <= kg.End {
			out = append(out, k)
		}
	}
	return out
}

// idsCheck checks every state of x on s for the keys 0..n-1: a value per key written by
// idsWrite, "t" only while alive.
func idsCheck(t *testing.T, s *Store, x *idsStates, n int, tAlive bool, what string) {
	t.Helper()
	kg := *s.opts.KeyGroups
	a, b := KeyGroupRange{Start: 0, End: 63}, KeyGroupRange{Start: 64, End: 127}
	var keys []string
	for _, k := range idsKeys(s, n) {
		name := string(k.b)
		keys = append(keys, name)
		inA := int(k.kg) <= a.End
		want := map[string]string{"v": vPrefix + name, "t": "t-" + name}
		if inA {
			want["onlyA"] = "A-" + name
		} else if int(k.kg) >= b.Start {
			want["onlyB"] = "B-" + name
		}
		for st, vs := range map[string]*ValueState[string]{"v": x.v, "t": x.t, "onlyA": x.onlyA, "onlyB": x.onlyB} {
			if vs == nil {
				continue
			}
			got, ok, err := vs.Get(k)
			w, wok := want[st]
			if st == "t" && !tAlive {
				wok = false
			}
			if err != nil || ok != wok || (ok && got != w) {
				t.Fatalf("%s: state %q of %s (key group %d): %q, %v, %v; want %q, %v", what, st, name, k.kg, got, ok, err, w, wok)
			}
		}
		if x.l != nil {
			if got := listOf(t, x.l, k); !slices.Equal(got, []string{"l1-" + name, "l2-" + name}) {
				t.Fatalf("%s: list of %s (key group %d): %q", what, name, k.kg, got)
			}
		}
	}
	if x.v != nil { // a scan: every key once, whatever id its key group stores "v" under
		seq, errf := s.Keys(x.v, nil)
		var got []string
		for k := range seq {
			got = append(got, string(k.b))
		}
		if err := errf(); err != nil {
			t.Fatal(err)
		}
		slices.Sort(got)
		slices.Sort(keys)
		if !slices.Equal(got, keys) {
			t.Fatalf("%s: Keys(v) over %v: %d keys, want %d", what, kg, len(got), len(keys))
		}
	}
}

// vPrefix starts the values of "v": read as a TTL value (a state with a TTL stores its
// timestamp in the first 8 bytes, big endian), they expired at 1 ms — so a TTL filter that
// took "v" for "t" (whose own id "v" has in part B) would drop them.
const vPrefix = "\x00\x00\x00\x00\x00\x00\x00\x01v-"

// idsWrite writes the states of x registered for the keys 0..n-1 of s's key groups.
func idsWrite(t *testing.T, s *Store, x *idsStates, n int) {
	t.Helper()
	for _, k := range idsKeys(s, n) {
		name := string(k.b)
		must(0, x.v.Put(k, vPrefix+name))
		must(0, x.t.Put(k, "t-"+name))
		must(0, x.l.Add(k, "l1-"+name))
		must(0, x.l.Add(k, "l2-"+name))
		if x.onlyA != nil {
			must(0, x.onlyA.Put(k, "A-"+name))
		}
		if x.onlyB != nil {
			must(0, x.onlyB.Put(k, "B-"+name))
		}
	}
}

// TestRestoreStatesByName (issue 21 item 3): two subtasks registered their states in
// different orders, and each one a state the other lacks, so one name has different ids and
// one id different names in their checkpoints; the scale-in restores both into one Store,
// states matched by name (persist.go, "State id aliases"): every value is read under its
// name, a scan of a state finds the keys of both parts, the TTL of "t" applies to "t" alone in
// a compaction of the restored tables (an id that is "t" in one part is a list in the other),
// new writes land where reads find them, and the ids survive Close/Open, a checkpoint and a
// scale-out of the merged Store, and a second scale-in.
func TestRestoreStatesByName(t *testing.T) {
	ctx := context.Background()
	fsys := vfs.NewMem()
	st := must(checkpointfs.NewDirStorage(fsys, "/ck"))
	e := &idsEnv{t: t, fs: fsys, st: st, now: new(atomic.Int64)}
	e.now.Store(1_000_000)
	const n = 400
	a, b := KeyGroupRange{Start: 0, End: 63}, KeyGroupRange{Start: 64, End: 127}
	sa := must(Open(e.dir(), e.opts(a, "a")))
	xa := idsRegister(t, sa, "l", "v", "t", "onlyA")
	sb := must(Open(e.dir(), e.opts(b, "b")))
	xb := idsRegister(t, sb, "t", "l", "v", "onlyB")
	idsWrite(t, sa, xa, n)
	idsWrite(t, sb, xb, n)
	// Into the tables: a restore imports them, and the TTL compaction below must judge them.
	must(0, sa.seal())
	must(0, sa.WaitBackground())
	must(0, sb.seal())
	must(0, sb.WaitBackground())
	ha := must(sa.Checkpoint(ctx, 1, nil))
	hb := must(sb.Checkpoint(ctx, 1, nil))
	must(0, sa.Close())
	must(0, sb.Close())

	all := KeyGroupRange{Start: 0, End: 127}
	dir := e.dir()
	s, err := Restore(dir, e.opts(all, "c"), st, ha, hb)
	if err != nil {
		t.Fatalf("scale-in of two parts that registered their states in different orders: %v", err)
	}
	x := idsRegister(t, s, "onlyB", "t", "onlyA", "v", "l")
	idsCheck(t, s, x, n, true, "restored")
	// A new state gets an id no part used; new writes go where reads look.
	nw := must(NewValueState(s, ValueDescriptor[string]{Name: "new", Codec: String}))
	for _, k := range idsKeys(s, n) {
		must(0, nw.Put(k, "new"))
		must(0, x.v.Put(k, vPrefix+string(k.b)))
	}
	idsCheck(t, s, x, n, true, "restored and written")
	// The TTL of "t" (id 3 in A, id 1 in B; id 3 is the value state "v" in B) in a
	// compaction: "t"'s data is removed in both parts, "v"'s kept in both.
	e.now.Add(2 * time.Hour.Milliseconds())
	must(0, s.e.CompactLSM())
	idsCheck(t, s, x, n, false, "after a TTL compaction")
	for _, k := range idsKeys(s, n) {
		key, h := s.compose(k, x.t.idAt(k))
		if _, st := s.e.Get(h, key); st == found {
			t.Fatalf("key %s (key group %d): the expired value of \"t\" is still stored after a TTL compaction", k.b, k.kg)
		}
	}
	e.now.Add(-2 * time.Hour.Milliseconds())
	must(0, s.Close())
	s = must(Open(dir, e.opts(all, "c")))
	x = idsRegister(t, s, "v", "l", "t", "onlyA", "onlyB")
	idsCheck(t, s, x, n, false, "reopened")
	for _, k := range idsKeys(s, n) {
		must(0, x.t.Put(k, "t-"+string(k.b)))
	}
	// Scale out the merged Store with its aliases, and in again with a part that registered
	// nothing but "onlyB" and "v".
	hc := must(s.Checkpoint(ctx, 1, nil))
	must(0, s.Close())
	var hs []CheckpointHandle
	for i, part := range []KeyGroupRange{{Start: 0, End: 40}, {Start: 41, End: 127}} {
		p := must(Restore(e.dir(), e.opts(part, fmt.Sprintf("d%d", i)), st, hc))
		var px *idsStates
		if i == 0 {
			px = idsRegister(t, p, "onlyB", "v", "t", "l", "onlyA")
		} else {
			px = idsRegister(t, p, "v", "onlyB")
		}
		idsCheck(t, p, px, n, true, fmt.Sprintf("part %v", part))
		extra := must(NewValueState(p, ValueDescriptor[string]{Name: fmt.Sprintf("extra-%d", i), Codec: String}))
		for _, k := range idsKeys(p, n) {
			must(0, extra.Put(k, "x"))
		}
		hs = append(hs, must(p.Checkpoint(ctx, 1, nil)))
		must(0, p.Close())
	}
	s = must(Restore(e.dir(), e.opts(all, "e"), st, hs...))
	defer s.Close()
	x = idsRegister(t, s, "t", "l", "v", "onlyA", "onlyB")
	idsCheck(t, s, x, n, true, "second scale-in")
	counts := map[string]int{}
	for i := range 2 {
		ex := must(NewValueState(s, ValueDescriptor[string]{Name: fmt.Sprintf("extra-%d", i), Codec: String}))
		for _, k := range idsKeys(s, n) {
			if _, ok := must2(ex.Get(k)); ok {
				counts[fmt.Sprint(i)]++
			}
		}
	}
	if c := counts; len(c) != 2 || c["0"]+c["1"] != len(idsKeys(s, n)) {
		t.Fatalf("the states each part alone registered: %v of %d keys", maps.Clone(c), len(idsKeys(s, n)))
	}
}
