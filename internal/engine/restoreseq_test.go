package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"testing"

	"github.com/strata-db/strata/checkpoint"
	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/internal/vfs"
	"github.com/strata-db/strata/memory"
)

// restoreSeqSource is one Store of the old job in TestRestoreSequence: its lineage, key
// groups, the ids it registered its states under, and its subtask's union list element.
type restoreSeqSource struct {
	owner   string
	kg      checkpoint.KeyGroupRange
	ids     map[string]uint16 // "v" (value state), "t" (timer service)
	union   []byte
	unionID uint64
	subtask int
}

// restoreSeqOptions returns the engine options of a Store over dir owning kg (128 key groups).
func restoreSeqOptions(dir string, kg checkpoint.KeyGroupRange) Options {
	return Options{Dir: dir, FS: vfs.Default(), Budget: memory.NewBudget(256 << 20), SegmentSize: 16 << 20,
		MaxParallelism: 128, BackpressureTimeout: 10e9, L0StopWrites: 12, KeyGroups: kg, KeyGroupOfHash: timerKG}
}

// keyGroupOf is testKey's key group of key.
func keyGroupOf(key []byte) int { return int(uint32(base.HashKey(key)) % 128) }

// restoreSeqKeys are the test's keys: "k0".."k299", value u64(i).
func restoreSeqKeys() [][]byte {
	var ks [][]byte
	for i := range 300 {
		ks = append(ks, fmt.Appendf(nil, "k%03d", i))
	}
	return ks
}

// TestRestoreSequence: Restore, the engine's one restore call (doc.go, "The restore
// sequence"), scales two checkpoints in (key groups 0..63 and 64..127, states registered in
// other orders) into one Store: every value is read under its key group's effective id (state
// id aliases), the one timer comes back, the union lists of both subtasks are merged, the
// writer file holds the epoch above the manifests', the RESTORING marker is gone, and the
// directory reopens (Open) to the same registry, operator state and timers (step 8 persisted
// them). A Restore that fails (overlapping handles, another max parallelism, a missing
// manifest; a missing timer object after the engine opened) leaves the directory empty and
// nothing open (invariant 28).
func TestRestoreSequence(t *testing.T) {
	ctx := context.Background()
	storage, err := checkpoint.NewDirStorage(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	srcs := []restoreSeqSource{
		{owner: "a", kg: checkpoint.KeyGroupRange{Start: 0, End: 63}, ids: map[string]uint16{"v": 1, "t": 2}, union: []byte("x"), unionID: 11, subtask: 0},
		{owner: "b", kg: checkpoint.KeyGroupRange{Start: 64, End: 127}, ids: map[string]uint16{"t": 1, "v": 2}, union: []byte("y"), unionID: 22, subtask: 1},
	}
	keys := restoreSeqKeys()
	for _, src := range srcs {
		e := openTest(t, restoreSeqOptions(t.TempDir(), src.kg))
		n := 0
		for i, k := range keys {
			if kg := keyGroupOf(k); kg < src.kg.Start || kg > src.kg.End {
				continue
			}
			ck, h := testKey(src.ids["v"], k)
			if err := e.Apply(opPut(ck, h, u64(uint64(i)))); err != nil {
				t.Fatal(err)
			}
			n++
		}
		if n == 0 {
			t.Fatalf("%s: no key in its key groups", src.owner)
		}
		// One timer, in the source's first key group.
		tm := testTimer(src.kg.Start)
		if _, err := e.TimerQueues("t").Add(EventTime, tm.KeyGroup, base.HashKey(tm.Key), tm.KeyHash, tm.Key, tm.Namespace, tm.Timestamp); err != nil {
			t.Fatal(err)
		}
		reg := &Registry{MaxParallelism: 128, KeyGroups: src.kg, NextID: 3, States: map[string]PersistedState{
			"v": {ID: src.ids["v"], Kind: KindValue, Codecs: [2]string{"int64", ""}},
			"t": {ID: src.ids["t"], Kind: KindTimerService, Codecs: [2]string{"string", ""}},
		}}
		ops := &OpSnapshot{Subtask: src.subtask, Parallelism: 2, States: []*OpState{
			{Name: "u", Kind: OpStateUnion, Codecs: [2]string{"bytes", ""}, Elems: [][]byte{src.union}, IDs: []uint64{src.unionID}}}}
		p, err := e.StartCheckpoint(CheckpointSpec{ID: 1, Storage: storage, Owner: src.owner, Epoch: 1, MaxParallelism: 128,
			KeyGroups: src.kg, Registry: reg.Encode(), OperatorState: ops.Encode()})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.WaitCheckpoint(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	all := checkpoint.KeyGroupRange{Start: 0, End: 127}
	spec := RestoreSpec{Storage: storage, Handles: []RestoreHandle{{"a", 1}, {"b", 1}}, Owner: "c",
		CheckpointStorage: storage, Subtask: 0, Parallelism: 1}

	// Failures leave the directory as they found it.
	for _, c := range []struct {
		name string
		o    func(*Options)
		h    []RestoreHandle
		want error
	}{
		{"overlap", nil, []RestoreHandle{{"a", 1}, {"a", 1}}, ErrOverlappingHandles},
		{"max parallelism", func(o *Options) { o.MaxParallelism = 256 }, nil, ErrMaxParallelismMismatch},
		{"missing", nil, []RestoreHandle{{"a", 7}}, checkpoint.ErrNotFound},
	} {
		dir := filepath.Join(t.TempDir(), "s")
		o := restoreSeqOptions(dir, all)
		if c.o != nil {
			c.o(&o)
		}
		sp := spec
		if c.h != nil {
			sp.Handles = c.h
		}
		if _, err := Restore(ctx, o, sp); !errors.Is(err, c.want) {
			t.Fatalf("%s: Restore: %v, want %v", c.name, err, c.want)
		}
		if names, err := vfs.Default().List(dir); len(names) > 0 || (err != nil && !errors.Is(err, fs.ErrNotExist)) {
			t.Fatalf("%s: a failed Restore left %v (%v)", c.name, names, err)
		}
	}

	dir := filepath.Join(t.TempDir(), "s")
	o := restoreSeqOptions(dir, all)
	r, err := Restore(ctx, o, spec)
	if err != nil {
		t.Fatal(err)
	}
	e := r.Engine
	if !slices.Equal(r.Used, []int{0, 1}) || r.RestoredOwn != 0 {
		t.Fatalf("Used %v, RestoredOwn %d", r.Used, r.RestoredOwn)
	}
	if r.Writer.Epoch != 2 || r.Writer.Point != 1 || r.Writer.Writer == 0 {
		t.Fatalf("writer %+v, want epoch 2 (above the manifests' 1), point 1", r.Writer)
	}
	if w, ok, err := ReadWriterFile(vfs.Default(), dir); err != nil || !ok || w != r.Writer {
		t.Fatalf("WRITER file %+v %v %v, want %+v", w, ok, err, r.Writer)
	}
	if _, err := vfs.Default().Stat(filepath.Join(dir, RestoringMarker)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("RESTORING marker after Restore: %v", err)
	}
	if st := r.Stats; st.Tables < 2 || st.Timers != 2 || st.Bytes == 0 || st.PersistTime == 0 {
		t.Fatalf("stats %+v: want >= 2 tables, 2 timers, a persist", st)
	}
	// The effective id of state name in key group kg, by the restored registry.
	effective := func(reg *Registry, name string, kg int) uint16 {
		id := reg.States[name].ID
		for _, a := range reg.Aliases[name] {
			if int(a.Lo) <= kg && kg <= int(a.Hi) {
				id = a.ID
			}
		}
		return id
	}
	check := func(what string, e *Engine, reg *Registry, ops *OpSnapshot) {
		t.Helper()
		if len(reg.States) != 2 || reg.States["v"].Kind != KindValue || reg.States["t"].Kind != KindTimerService {
			t.Fatalf("%s: registry %+v", what, reg.States)
		}
		for i, k := range keys {
			kg := keyGroupOf(k)
			id := effective(reg, "v", kg)
			src := srcs[0]
			if kg > 63 {
				src = srcs[1]
			}
			if id != src.ids["v"] {
				t.Fatalf("%s: key group %d: effective id of v %d, the source's %d", what, kg, id, src.ids["v"])
			}
			ck, h := testKey(id, k)
			v, st := e.Get(h, ck)
			if st != Found || !slices.Equal(v, u64(uint64(i))) {
				t.Fatalf("%s: key %s (key group %d, id %d): %x %v", what, k, kg, id, v, st)
			}
		}
		if n := e.TimerQueues("t").Len(EventTime); n != 2 {
			t.Fatalf("%s: %d timers, want 2", what, n)
		}
		if len(ops.States) != 1 || !slices.EqualFunc(ops.States[0].Elems, [][]byte{[]byte("x"), []byte("y")}, slices.Equal[[]byte]) {
			t.Fatalf("%s: operator state %+v, want the union [x y]", what, ops.States)
		}
	}
	check("restored", e, r.Registry, r.Ops)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	// Reopen: the persist point of step 8 names the same registry, operator state and timers.
	e2, rec, err := Open(o)
	if err != nil {
		t.Fatal(err)
	}
	defer e2.Close()
	reg, ops, err := DecodeRegistryOps(rec.Meta)
	if err != nil || ops == nil || reg.TimerFile.Name == "" {
		t.Fatalf("reopened registry %+v, ops %v: %v", reg, ops, err)
	}
	e2.TimerQueues("t")
	if err := e2.LoadTimerFile(reg.TimerFile); err != nil {
		t.Fatal(err)
	}
	check("reopened", e2, reg, ops)

	// A failure after the engine is open (step 7: b's timer object is gone) closes it and
	// removes the directory (invariant 28).
	m, err := checkpoint.ReadManifest(ctx, storage, "b", 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, ob := range m.Objects {
		if ob.Kind == checkpoint.KindTimers {
			if err := storage.Delete(ctx, ob.Name); err != nil {
				t.Fatal(err)
			}
		}
	}
	dir3 := filepath.Join(t.TempDir(), "s")
	o3 := restoreSeqOptions(dir3, all)
	if _, err := Restore(ctx, o3, spec); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Fatalf("Restore without b's timers: %v, want ErrNotFound", err)
	}
	if names, err := vfs.Default().List(dir3); len(names) > 0 || (err != nil && !errors.Is(err, fs.ErrNotExist)) {
		t.Fatalf("a Restore that failed after Open left %v (%v)", names, err)
	}
	if u := o3.Budget.Used(); u != 0 {
		t.Fatalf("a Restore that failed after Open left %d bytes of its budget charged (engine not closed)", u)
	}
}
