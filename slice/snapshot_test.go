package slice

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/memory"
)

// snapWorkload drives a table with mixed batches (values, tombstones, list
// operands and bases, map entries and clears over a small pool of keys, so
// keys have versions in several runs) and the owner's jobs.
type snapWorkload struct {
	t    *testing.T
	e    *env
	r    *rand.Rand
	seq  uint64
	pool []uint64 // order hashes
}

func newSnapWorkload(t *testing.T, e *env, seed uint64) *snapWorkload {
	w := &snapWorkload{t: t, e: e, r: rand.New(rand.NewPCG(seed, seed))}
	for range 1000 {
		w.pool = append(w.pool, w.r.Uint64())
	}
	return w
}

// batch returns n entries of new sequence numbers, sorted.
func (w *snapWorkload) batch(n int) []base.Entry {
	var es []base.Entry
	for range n {
		w.seq++
		o := w.pool[w.r.IntN(len(w.pool))]
		val := fmt.Sprintf("v%d-%s", w.seq, strings.Repeat("x", w.r.IntN(40)))
		switch o % 3 {
		case 0:
			uk := fmt.Sprint("u", w.r.IntN(4))
			switch w.r.IntN(8) {
			case 0:
				es = append(es, tomb(o, "m", w.seq))
			case 1:
				es = append(es, mtomb(o, "m", uk, w.seq))
			default:
				es = append(es, ment(o, "m", uk, w.seq, val))
			}
		case 1:
			if w.r.IntN(6) == 0 {
				es = append(es, tomb(o, "k", w.seq))
			} else {
				es = append(es, kv(o, "k", w.seq, val))
			}
		default:
			if w.r.IntN(4) == 0 {
				es = append(es, lbase(o, "l", w.seq, val))
			} else {
				es = append(es, lapp(o, "l", w.seq, val))
			}
		}
	}
	sortEntries(es)
	return es
}

func (w *snapWorkload) install(n int) { w.e.install(w.t, w.batch(n)...) }

// compact installs compactions until none is proposed.
func (w *snapWorkload) compact() int {
	n := 0
	for ; ; n++ {
		job, ok := w.e.t.PickCompaction()
		if !ok {
			return n
		}
		if err := job.Run(context.Background()); err != nil {
			w.t.Fatal(err)
		}
		if err := w.e.t.InstallCompaction(job); err != nil {
			w.t.Fatal(err)
		}
	}
}

// evict installs evictions until none is proposed.
func (w *snapWorkload) evict() int {
	n := 0
	for ; ; n++ {
		job, ok := w.e.t.PickEviction()
		if !ok {
			return n
		}
		if err := job.Run(context.Background(), &lowerTier{}); err != nil {
			w.t.Fatal(err)
		}
		if err := w.e.t.InstallEviction(job); err != nil {
			w.t.Fatal(err)
		}
	}
}

// drain reads it to the end, copying every entry (so the copies outlive
// the memory), and checks strict entry order.
func drain(tb testing.TB, it base.Iterator) []base.Entry {
	tb.Helper()
	var out []base.Entry
	for it.Next() {
		e := *it.Entry()
		e.Key, e.UserKey, e.Value = clone(e.Key), clone(e.UserKey), clone(e.Value)
		if n := len(out); n > 0 && base.Compare(&out[n-1], &e) >= 0 {
			tb.Errorf("entry %d out of order: %+v after %+v", n, e, out[n-1])
			return out
		}
		out = append(out, e)
	}
	if err := it.Err(); err != nil {
		tb.Errorf("iterator: %v", err)
	}
	return out
}

// installedEntries lists every entry of every installed slice of t, all
// versions, sorted: the snapshot's content computed without its merge.
func installedEntries(t *Table) []base.Entry {
	var out []base.Entry
	var e base.Entry
	for b := range t.buckets {
		for _, r := range t.buckets[b].runs {
			for _, s := range r.slices {
				for i := range s.count {
					s.Entry(i, &e)
					c := e
					c.Key, c.UserKey, c.Value = clone(e.Key), clone(e.UserKey), clone(e.Value)
					out = append(out, c)
				}
			}
		}
	}
	sortEntries(out)
	return out
}

func sameEntries(tb testing.TB, what string, got, want []base.Entry) {
	tb.Helper()
	if len(got) != len(want) {
		tb.Fatalf("%s: %d entries, want %d", what, len(got), len(want))
	}
	for i := range got {
		g, w := &got[i], &want[i]
		if base.Compare(g, w) != 0 || g.Kind != w.Kind || g.Hash != w.Hash || g.UserHash != w.UserHash ||
			string(g.Value) != string(w.Value) {
			tb.Fatalf("%s: entry %d = %+v, want %+v", what, i, *g, *w)
		}
	}
}

// snapEnv is a table on an allocator of 4 blocks per segment, holding
// chains of 10 runs, whose oldest slices were partly evicted, so the
// segments have holes a relocation can drain. From then on chains above 3
// runs are compacted and evictions are proposed only once the test lowers
// HighWatermark.
func snapEnv(t *testing.T, seed uint64) (*env, *snapWorkload) {
	e := newEnvSeg(t, MinSliceSize, 4, Options{BucketBits: 3, CompactionThreshold: 100, EvictionBatch: 1})
	w := newSnapWorkload(t, e, seed)
	for range 10 {
		w.install(300)
	}
	e.t.opts.HighWatermark = e.t.memBytes * 2 / 3
	if w.evict() == 0 || e.a.slack() <= 4 {
		t.Fatalf("setup: no eviction or no free blocks to relocate into: %+v", e.a.Stats())
	}
	e.t.opts.HighWatermark = 1 << 40
	e.t.opts.CompactionThreshold = 3
	return e, w
}

// TestSnapshotSurvivesJobs: a snapshot taken, then relocations,
// compactions, evictions and new installs — which, without the pin, would
// free the snapshot's blocks and build new slices into them — yields
// exactly the entries installed when it was taken.
func TestSnapshotSurvivesJobs(t *testing.T) {
	e, w := snapEnv(t, 1)
	want := installedEntries(e.t)
	snap := e.t.Snapshot()
	sameEntries(t, "at snapshot", drain(t, snap.Iter()), want)
	if st := e.t.Stats(); snap.Slices() != st.Slices || snap.Bytes() != st.MemBytes || st.Snapshots != 1 {
		t.Fatalf("snapshot of %d slices, %d bytes; table %+v", snap.Slices(), snap.Bytes(), st)
	}

	relocs := relocateAll(t, e.t)
	w.install(300)
	compactions := w.compact()
	e.t.opts.HighWatermark = 1
	evictions := w.evict()
	w.install(300) // into blocks nothing freed: the pinned ones are not free
	compactions += w.compact()
	st := e.t.Stats()
	if relocs == 0 || compactions == 0 || evictions == 0 || st.RelocatedSlices == 0 {
		t.Fatalf("the owner did too little: %d relocations, %d compactions, %d evictions; %+v",
			relocs, compactions, evictions, st)
	}
	if st.PinnedBytes < snap.Bytes()/2 {
		t.Fatalf("pinned %d bytes of the snapshot's %d", st.PinnedBytes, snap.Bytes())
	}
	sameEntries(t, "after jobs", drain(t, snap.Iter()), want)

	e.t.ReleaseSnapshot(snap)
	if it := snap.Iter(); it.Next() || !errors.Is(it.Err(), ErrSnapshotReleased) {
		t.Fatalf("Iter after release: err %v", it.Err())
	}
	// The table reads on after the release performed the deferred frees.
	now := installedEntries(e.t)
	s2 := e.t.Snapshot()
	sameEntries(t, "second snapshot", drain(t, s2.Iter()), now)
	e.t.ReleaseSnapshot(s2)
}

// TestSnapshotRace iterates a snapshot on other goroutines while the owner
// relocates, compacts, evicts and installs, with the jobs' Runs on
// goroutines of their own (run with -race: the snapshot's views and
// iterators are Go memory the race detector watches; the blocks are
// mapped outside the heap, where the comparison with the entries taken at
// snapshot time catches a freed or reused block).
func TestSnapshotRace(t *testing.T) {
	e, w := snapEnv(t, 2)
	want := installedEntries(e.t)
	snap := e.t.Snapshot()
	const readers = 2
	got := make([][]base.Entry, readers*2)
	var wg sync.WaitGroup
	for i := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range 2 {
				got[i*2+k] = drain(t, snap.Iter())
			}
		}()
	}
	bg := func(f func() error) {
		t.Helper()
		done := make(chan error)
		go func() { done <- f() }()
		for range 200 {
			e.t.Get(w.pool[w.r.IntN(len(w.pool))], []byte("k"))
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	for round := range 6 {
		if r, ok := e.t.PickRelocation(); ok {
			bg(func() error { return r.Run(context.Background()) })
			if err := e.t.InstallRelocation(r); err != nil {
				t.Fatal(err)
			}
		}
		next := w.batch(200)
		var built []*Slice
		bg(func() (err error) { built, err = e.t.Build(context.Background(), iterOf(next...)); return err })
		if err := e.t.Install(built); err != nil {
			t.Fatal(err)
		}
		if c, ok := e.t.PickCompaction(); ok {
			bg(func() error { return c.Run(context.Background()) })
			if err := e.t.InstallCompaction(c); err != nil {
				t.Fatal(err)
			}
		}
		if round == 3 {
			e.t.opts.HighWatermark = 1
		}
		if ev, ok := e.t.PickEviction(); ok {
			bg(func() error { return ev.Run(context.Background(), &lowerTier{}) })
			if err := e.t.InstallEviction(ev); err != nil {
				t.Fatal(err)
			}
		}
	}
	wg.Wait()
	if st := e.t.Stats(); st.Evictions == 0 || st.Compactions < 2 || st.RelocatedSlices == 0 || st.PinnedBytes == 0 {
		t.Fatalf("the owner did too little: %+v", st)
	}
	for i := range got {
		sameEntries(t, fmt.Sprint("reader pass ", i), got[i], want)
	}
	e.t.ReleaseSnapshot(snap)
}

// TestSnapshotAccounting: blocks (and an oversized region) that leave the
// table while snapshots are open stay allocated and counted — by the
// Allocator, the Budget and Stats.PinnedBytes — until the last open
// snapshot is released; ReleaseSnapshot is idempotent; Close releases
// what open snapshots pinned (newEnv's cleanup checks nothing leaks).
func TestSnapshotAccounting(t *testing.T) {
	e := newEnv(t, MinSliceSize, Options{BucketBits: 1, CompactionThreshold: 1, HighWatermark: 1})
	big := strings.Repeat("B", 3*MinSliceSize) // an oversized slice of its own
	e.install(t, kv(1, "a", 1, "x"), kv(1<<63|1, "big", 2, big))
	e.install(t, kv(1, "a", 3, "y"), kv(1<<63|2, "b", 4, "z"))
	w := &snapWorkload{t: t, e: e}

	s1 := e.t.Snapshot()
	s2 := e.t.Snapshot()
	before := e.a.Stats()
	usedBefore := e.budget.UsedBy(memory.PurposeSlice)
	if before.Oversized != 1 || s1.Slices() != 4 || s1.Bytes() != e.t.Stats().MemBytes {
		t.Fatalf("setup: %+v, snapshot of %d slices, %d bytes", before, s1.Slices(), s1.Bytes())
	}
	w.compact() // frees 4 slices (the outputs take new blocks)
	w.evict()   // frees the outputs
	st := e.t.Stats()
	if st.Slices != 0 || st.MemBytes != 0 {
		t.Fatalf("the table still holds slices: %+v", st)
	}
	after := e.a.Stats()
	if st.PinnedBytes <= s1.Bytes() || after.Blocks < before.Blocks || after.Oversized < before.Oversized ||
		after.OversizedSize < before.OversizedSize {
		t.Fatalf("pinned %d bytes (snapshot %d); allocator before %+v, after %+v",
			st.PinnedBytes, s1.Bytes(), before, after)
	}
	pinnedBlocks := after.Blocks
	if pinnedBlocks*MinSliceSize+int(after.OversizedSize) != int(st.PinnedBytes) {
		t.Fatalf("allocator holds %d blocks and %d oversized bytes, table pins %d bytes",
			after.Blocks, after.OversizedSize, st.PinnedBytes)
	}
	if u := e.budget.UsedBy(memory.PurposeSlice); u < usedBefore {
		t.Fatalf("slice memory in the budget fell from %d to %d while pinned", usedBefore, u)
	}

	e.t.ReleaseSnapshot(s1)
	e.t.ReleaseSnapshot(s1) // idempotent: s2 still pins
	if st := e.t.Stats(); st.PinnedBytes == 0 || st.Snapshots != 1 || e.a.Stats().Blocks != pinnedBlocks {
		t.Fatalf("released with a snapshot open: %+v %+v", st, e.a.Stats())
	}
	sameEntries(t, "second snapshot", drain(t, s2.Iter()), drain(t, s2.Iter()))
	e.t.ReleaseSnapshot(s2)
	if st, a := e.t.Stats(), e.a.Stats(); st.PinnedBytes != 0 || st.Snapshots != 0 || a.Blocks != 0 ||
		a.Oversized != 0 || a.Segments != 0 {
		t.Fatalf("after the last release: %+v %+v", st, a)
	}
	if u := e.budget.UsedBy(memory.PurposeSlice); u != 0 {
		t.Fatalf("budget holds %d slice bytes after the release", u)
	}

	// Close with a snapshot open releases what it pinned.
	e.install(t, kv(1, "a", 5, "x"))
	e.install(t, kv(1, "a", 6, "y"))
	s3 := e.t.Snapshot()
	w.compact()
	if e.t.Stats().PinnedBytes == 0 {
		t.Fatal("nothing pinned")
	}
	if err := e.t.Close(); err != nil {
		t.Fatal(err)
	}
	if it := s3.Iter(); it.Next() || !errors.Is(it.Err(), ErrSnapshotReleased) {
		t.Fatalf("Iter after Close: err %v", it.Err())
	}
	e.t.ReleaseSnapshot(s3) // a no-op after Close
	if a := e.a.Stats(); a.Blocks != 0 || a.Segments != 0 {
		t.Fatalf("after Close: %+v", a)
	}
	if s := e.t.Snapshot(); s.Slices() != 0 || s.Iter().Next() {
		t.Fatal("a snapshot after Close is not empty")
	}
}

// TestSnapshotHotPaths: reads allocate nothing while a snapshot is open
// and blocks are pinned (the pin is checked only where memory is released).
func TestSnapshotHotPaths(t *testing.T) {
	e := newEnv(t, DefaultSliceSize, Options{CompactionThreshold: 1})
	e.install(t, kv(5, "a", 1, "v"), lapp(6, "l", 2, "x"), ment(7, "m", "u", 3, "w"))
	e.install(t, kv(5, "a", 4, "v2"), lapp(6, "l", 5, "y"), ment(7, "m", "v", 6, "w2"))
	s := e.t.Snapshot()
	defer e.t.ReleaseSnapshot(s)
	compactAll(t, e.t)
	if e.t.Stats().PinnedBytes == 0 {
		t.Fatal("nothing pinned")
	}
	dst := make([][]byte, 0, 4)
	a, l, m, v := []byte("a"), []byte("l"), []byte("m"), []byte("v")
	n := testing.AllocsPerRun(1000, func() {
		e.t.Get(5, a)
		dst, _ = e.t.ListGet(6, l, dst[:0])
		e.t.MapGet(7, m, v)
		it := e.t.MapIter(7, m)
		for it.Next() {
		}
	})
	if n != 0 {
		t.Fatalf("hot paths allocate %.1f times per run with a snapshot open", n)
	}
	if v, st := e.t.Get(5, a); st != Found || string(v) != "v2" {
		t.Fatalf("Get = %q %v", v, st)
	}
}

// BenchmarkSnapshot: the owner's cost of Snapshot and ReleaseSnapshot (no
// deferred release) for a table of 1M entries in 16 KiB slices, 1,024
// buckets, chains of 4 runs; reports the slices captured.
func BenchmarkSnapshot(b *testing.B) {
	e := newEnv(b, DefaultSliceSize, Options{CompactionThreshold: 100})
	installRuns(b, e.t, benchKeys(1<<20), 4)
	b.ReportAllocs()
	var n int
	for b.Loop() {
		s := e.t.Snapshot()
		n = s.Slices()
		e.t.ReleaseSnapshot(s)
	}
	b.ReportMetric(float64(n), "slices")
}
