package engine

import (
	"bytes"
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-db/strata/changelog"
	"github.com/strata-db/strata/checkpoint"
	"github.com/strata-db/strata/internal/checkpointfs"
	"github.com/strata-db/strata/internal/engine/enginetest"
	"github.com/strata-db/strata/internal/vfs"
	"github.com/strata-db/strata/memory"
)

// openChangelogTest opens an in-memory engine with the changelog on, over a DirStorage in a
// temporary directory.
func openChangelogTest(t *testing.T) (*Engine, *changelog.Writer, checkpoint.Storage) {
	t.Helper()
	st, err := checkpointfs.NewDirStorage(vfs.Default(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	w, err := changelog.NewWriter(changelog.WriterOptions{Storage: st, Prefix: "owner"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	e := openTest(t, Options{Changelog: &ChangelogOptions{Writer: w, MaterializationInterval: -1,
		Spec: CheckpointSpec{Storage: st, Owner: "owner", MaxParallelism: 128, KeyGroups: checkpoint.KeyGroupRange{Start: 0, End: 127}}}})
	return e, w, st
}

// TestChangelogEveryOp: every OpKind the engine applies is logged as one record of that kind
// with the op's key, user key and value, and replaying the records gives them back in order.
// A new OpKind fails here until the table below (and the changelog's record kinds) have it.
func TestChangelogEveryOp(t *testing.T) {
	e, w, st := openChangelogTest(t)
	vk, vh := testKey(1, []byte("v"))
	lk, lh := testKey(2, []byte("l"))
	mk, mh := testKey(3, []byte("m"))
	ops := []Op{
		opPut(vk, vh, []byte("x")),
		{Kind: OpDelete, Hash: vh, Key: vk},
		{Kind: OpListAppend, Hash: lh, Key: lk, Value: frame([]byte("a"))},
		{Kind: OpListReplace, Hash: lh, Key: lk, Value: frame([]byte("b"))},
		{Kind: OpListDelete, Hash: lh, Key: lk},
		opMapPut(mk, mh, []byte("u"), []byte("1")),
		opMapRemove(mk, mh, []byte("u")),
		{Kind: OpMapClear, Hash: mh, Key: mk},
	}
	covered := map[OpKind]bool{}
	for _, op := range ops {
		if err := e.Apply(op); err != nil {
			t.Fatalf("%v: %v", op.Kind, err)
		}
		covered[op.Kind] = true
	}
	for k := OpKind(1); k < numOpKinds; k++ {
		if !covered[k] {
			t.Errorf("OpKind %v is not logged by this test: add it here and to the changelog's record kinds", k)
		}
	}
	if changelog.MaxKind != uint8(numOpKinds-1) {
		t.Errorf("changelog.MaxKind = %d, the engine's last OpKind is %d", changelog.MaxKind, numOpKinds-1)
	}
	e.cl.publishLog() // the owner's records reach the persist at its Publish
	if _, err := w.Persist(context.Background()); err != nil {
		t.Fatal(err)
	}
	hs, err := e.cl.gens[0].log.Handles(e.Seq())
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	var last uint64
	err = changelog.Replay(context.Background(), st, hs, changelog.KeyGroupRange{Start: 0, End: 127}, func(r *changelog.Record) error {
		if i >= len(ops) {
			t.Fatalf("record %d beyond the %d ops", i, len(ops))
		}
		op := ops[i]
		if OpKind(r.Kind) != op.Kind || !bytes.Equal(r.Key, op.Key) || !bytes.Equal(r.UserKey, op.UserKey) || !bytes.Equal(r.Value, op.Value) || r.Seq <= last {
			t.Errorf("record %d = %+v, want op %+v after seq %d", i, r, op, last)
		}
		last = r.Seq
		i++
		return nil
	})
	if err != nil || i != len(ops) {
		t.Fatalf("replay: %d records, %v", i, err)
	}
	if last != e.Seq() {
		t.Errorf("last record seq %d, engine seq %d", last, e.Seq())
	}
}

// TestChangelogOffAllocates nothing extra: with the changelog off, Apply does not touch it
// (the off path is one nil check).
func TestChangelogOff(t *testing.T) {
	e := openTest(t, Options{})
	if e.cl != nil || e.ChangelogStats().Enabled {
		t.Fatal("changelog on without Options.Changelog")
	}
}

// failPuts is a checkpoint.Storage whose Put fails while fail is set: a checkpoint storage
// that is down.
type failPuts struct {
	checkpoint.Storage
	fail atomic.Bool
}

func (s *failPuts) Put(ctx context.Context, name string, data []byte) error {
	if s.fail.Load() {
		return errors.New("test: checkpoint storage down")
	}
	return s.Storage.Put(ctx, name, data)
}

// TestThresholdWaitKeepsState: a write that the changelog Writer's Threshold refuses
// (changelog.ErrThreshold) waits for a persist, and never seals the FreshTable or evicts slices
// for it, since neither frees the Writer's buffer. With the checkpoint storage down, the write
// fails after BackpressureTimeout with ErrMemoryBudget while the budget has room, the slices
// stay in memory and no segment was sealed; once the storage is back, writes go on. Before the
// fix, the wait fell through to the FreshTable's backpressure, which sealed and evicted state
// that fitted the budget (the flight demo at 64 MiB evicted with 38 MiB of room).
func TestThresholdWaitKeepsState(t *testing.T) {
	ds, err := checkpointfs.NewDirStorage(vfs.Default(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	st := &failPuts{Storage: ds}
	w, err := changelog.NewWriter(changelog.WriterOptions{Storage: st, Prefix: "owner", Threshold: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	e := openTest(t, Options{Budget: memory.NewBudget(64 << 20), SegmentSize: 4 << 20, Lower: enginetest.NewMemLower(),
		BackpressureTimeout: 300 * time.Millisecond,
		Changelog: &ChangelogOptions{Writer: w, MaterializationInterval: -1,
			Spec: CheckpointSpec{Storage: st, Owner: "owner", MaxParallelism: 128, KeyGroups: checkpoint.KeyGroupRange{Start: 0, End: 127}}}})
	val := bytes.Repeat([]byte("v"), 100)
	for i := range 5000 {
		k, h := testKey(1, u64(uint64(i)))
		if err := e.Apply(opPut(k, h, val)); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Seal(); err != nil {
		t.Fatal(err)
	}
	if err := e.Drain(); err != nil {
		t.Fatal(err)
	}
	before := e.Stats()
	if before.Slices == 0 {
		t.Fatal("no slices to evict: the test would prove nothing")
	}

	st.fail.Store(true)
	big := bytes.Repeat([]byte("w"), 1000)
	var werr error
	for i := 0; i < 4000 && werr == nil; i++ {
		k, h := testKey(2, u64(uint64(i)))
		werr = e.Apply(opPut(k, h, big))
	}
	if !errors.Is(werr, memory.ErrMemoryBudget) {
		t.Fatalf("write with the checkpoint storage down: %v, want ErrMemoryBudget once the Writer's Threshold is reached", werr)
	}
	after := e.Stats()
	if after.Evictions != before.Evictions || after.Transforms != before.Transforms || after.SealedSegments != 0 {
		t.Errorf("the Writer's Threshold evicted or sealed state: evictions %d → %d, transforms %d → %d, %d sealed segments",
			before.Evictions, after.Evictions, before.Transforms, after.Transforms, after.SealedSegments)
	}
	if room := e.budget.WriterRoom(); room < 16<<20 {
		t.Fatalf("budget room %d: the refusal should be the Writer's Threshold alone", room)
	}

	st.fail.Store(false)
	k, h := testKey(3, []byte("after"))
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := e.Apply(opPut(k, h, val))
		if err == nil {
			break
		}
		if !errors.Is(err, memory.ErrMemoryBudget) || time.Now().After(deadline) {
			t.Fatalf("write after the storage came back: %v", err)
		}
	}
}
