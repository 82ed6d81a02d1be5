package engine

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-db/strata/changelog"
	"github.com/strata-db/strata/checkpoint"
	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/internal/checkpointfs"
	"github.com/strata-db/strata/internal/vfs"
)

// TestLazyTailEngine: a log tail written by the lazy tail's driver (queueTail, startTail) and
// installed by the first read (awaitTail) reads as the same tail written synchronously
// (bulkReplay), key by key, over restored tables (a persisted directory reopened, as Restore
// opens one); the tail is split into parts (invariant 30) written on one lane and on two
// (Workers 1 and 2: forEachInTask); a put written while the driver is held wins over the
// tail's version of its key, and the read that installs waits for the held driver.
func TestLazyTailEngine(t *testing.T) {
	ctx := context.Background()
	const tables, tail = 400, 3000
	for _, workers := range []int{1, 2} {
		t.Run(fmt.Sprintf("workers=%d", workers), func(t *testing.T) {
			all := checkpoint.KeyGroupRange{Start: 0, End: 127}
			dirs := []string{t.TempDir(), t.TempDir()}
			// The restored tables: state 1's keys, persisted below seq tables+tail.
			for _, dir := range dirs {
				o := restoreSeqOptions(dir, all)
				o.Workers = workers
				persistTailTables(t, o, tables, tail)
			}
			b := lazyTailLog(t, tables, tail)
			open := func(dir string) *Engine {
				o := restoreSeqOptions(dir, all)
				o.Workers = workers
				o.BulkParallelMin = 1 // the small tail is split into parts
				e := openTest(t, o)
				if !e.canBulkReplay() || e.Seq() != tables+tail {
					t.Fatalf("reopened: bulk replay %v, seq %d", e.canBulkReplay(), e.Seq())
				}
				return e
			}
			sync, lazy := open(dirs[0]), open(dirs[1])
			if _, _, err := sync.bulkReplay(ctx, b, nil, "tail", true); err != nil {
				t.Fatal(err)
			}
			var released atomic.Bool
			release := holdTail(t, lazy, b)
			if err := lazy.Apply(opPut(keyOf(1, 7), hashOf(1, 7), []byte("written"))); err != nil {
				t.Fatal(err)
			}
			if ts := lazy.TailStats(); !ts.Pending || lazy.bulkFiles != 0 {
				t.Fatalf("tail %+v, %d files before the release: want pending, none", ts, lazy.bulkFiles)
			}
			// Every key read twice: first while the driver is held (Gets answered by the tail's
			// value index, invariant 39), then after a read that waits for it installed the tail.
			check := func(pending bool) {
				t.Helper()
				for id := uint16(1); id <= 2; id++ {
					for i := range tables {
						k, h := testKey(id, fmt.Appendf(nil, "k%d", i))
						want, ws := sync.Get(h, k)
						if id == 1 && i == 7 {
							want, ws = []byte("written"), found
						}
						want = bytes.Clone(want)
						got, gs := lazy.Get(h, k)
						if gs != ws || !bytes.Equal(got, want) {
							t.Fatalf("pending %v: state %d key %d: lazy %v %q, sync %v %q", pending, id, i, gs, got, ws, want)
						}
					}
				}
				if ts := lazy.TailStats(); ts.Pending != pending {
					t.Fatalf("tail %+v after the Gets: pending %v, want %v", ts, ts.Pending, pending)
				}
			}
			check(true)
			if ts := lazy.TailStats(); ts.Served == 0 || lazy.bulkFiles != 0 {
				t.Fatalf("tail %+v, %d files while held: want Gets served by the index, no file", ts, lazy.bulkFiles)
			}
			// A value read before the install stays valid after it (copied out of the Batch).
			k, h := testKey(2, []byte("k3"))
			early, _ := lazy.Get(h, k)
			earlyCopy := bytes.Clone(early)
			go func() {
				time.Sleep(20 * time.Millisecond)
				released.Store(true)
				release()
			}()
			if _, st := lazy.MapGet(h, k, 1, []byte("u")); st == failed || !released.Load() {
				t.Fatalf("a map read returned (status %v) before the held tail was installed", st)
			}
			if !bytes.Equal(early, earlyCopy) {
				t.Fatalf("a value read before the install changed: %q, was %q", early, earlyCopy)
			}
			check(false)
			ts := lazy.TailStats()
			if ts.Pending || ts.Files < 2 || lazy.bulkParallel != 1 || ts.Applied+ts.Skipped != tail || ts.Skipped == 0 ||
				lazy.bulkFiles != sync.bulkFiles {
				t.Fatalf("tail %+v, %d files (sync %d), %d in parts: want installed in parts, %d records",
					ts, lazy.bulkFiles, sync.bulkFiles, lazy.bulkParallel, tail)
			}
		})
	}
}

// holdTail queues b as e's lazy tail and starts its driver held by e's tail hook until the
// returned release is called (idempotent; also called at the test's cleanup, which runs
// before the cleanup of an Engine opened earlier, so its Close never waits for a held driver).
func holdTail(t *testing.T, e *Engine, b *changelog.Batch) (release func()) {
	t.Helper()
	hold := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(hold) }) }
	t.Cleanup(release)
	e.tailHook = func() { <-hold }
	if err := e.queueTail(b, "tail"); err != nil {
		t.Fatal(err)
	}
	e.startTail()
	return release
}

// persistTailTables writes the restored tables of the lazy tail tests into the directory of
// o and closes it: puts "table-<i>" to state 1's keys "k0".."k<tables-1>", then tail more puts
// to state 3 (nothing reads it), whose seqs a tail of tail records then takes (tables+1 ..
// tables+tail), persisted.
func persistTailTables(t *testing.T, o Options, tables, tail int) {
	t.Helper()
	e := openTest(t, o)
	for i := range tables + tail {
		id := uint16(1)
		if i >= tables {
			id = 3
		}
		k, h := testKey(id, fmt.Appendf(nil, "k%d", i%tables))
		if err := e.Apply(opPut(k, h, fmt.Appendf(nil, "table-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Persist(nil); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
}

// keyOf and hashOf are testKey's composite key and hash of "k<i>" of state id.
func keyOf(id uint16, i int) []byte {
	k, _ := testKey(id, fmt.Appendf(nil, "k%d", i))
	return k
}

func hashOf(id uint16, i int) uint64 {
	_, h := testKey(id, fmt.Appendf(nil, "k%d", i))
	return h
}

// lazyTailLog returns the collected log of n value puts with seqs tables+1..tables+n:
// states 1 (over the tables' keys) and 2 (new keys) in turn, keys "k0".."k<tables-1>",
// several versions per key.
func lazyTailLog(t *testing.T, tables, n int) *changelog.Batch {
	t.Helper()
	b := memTail(t, uint64(tables+n), func(l *changelog.Log, _ *changelog.Writer) error {
		for i := range n {
			id := uint16(1 + i%2)
			k, _ := testKey(id, fmt.Appendf(nil, "k%d", (i*7)%tables))
			if err := l.Append(uint8(OpPut), uint16(k[0])<<8|uint16(k[1]), uint64(tables+i+1), k, nil, fmt.Appendf(nil, "tail-%d", i)); err != nil {
				return err
			}
		}
		return nil
	})
	if b.Len() != n {
		t.Fatalf("collected %d records of %d", b.Len(), n)
	}
	return b
}

// memTail is the changelog tail a restore collects (changelog.Collect, key groups 0-127) of
// the records fill appends to a Log over an in-memory DirStorage — fill may persist through
// the Writer to spread them over several objects — checkpointed at seq last: the input of
// the replay tests and benchmarks. It fails tb on any error.
func memTail(tb testing.TB, last uint64, fill func(*changelog.Log, *changelog.Writer) error) *changelog.Batch {
	tb.Helper()
	return collectMemTail(tb, last, changelog.CollectOptions{}, fill)
}

// memTailOffHeap is memTail collected as a Restore collects it: off the Go heap
// (changelog.CollectOptions.OffHeap, through a storage that reads into our memory), so that
// Batch.Release unmaps what its records alias.
func memTailOffHeap(tb testing.TB, last uint64, fill func(*changelog.Log, *changelog.Writer) error) *changelog.Batch {
	tb.Helper()
	return collectMemTail(tb, last, changelog.CollectOptions{OffHeap: true}, fill)
}

// collectMemTail is memTail with the Collect options o.
func collectMemTail(tb testing.TB, last uint64, o changelog.CollectOptions, fill func(*changelog.Log, *changelog.Writer) error) *changelog.Batch {
	tb.Helper()
	ctx := context.Background()
	st, err := checkpointfs.NewDirStorage(vfs.NewMem(), "/ck")
	if err != nil {
		tb.Fatal(err)
	}
	w, err := changelog.NewWriter(changelog.WriterOptions{Storage: st, Prefix: "owner"})
	if err != nil {
		tb.Fatal(err)
	}
	defer w.Close()
	r := changelog.KeyGroupRange{Start: 0, End: 127}
	l, err := w.Log("s", r)
	if err != nil {
		tb.Fatal(err)
	}
	if err := fill(l, w); err != nil {
		tb.Fatal(err)
	}
	hs, err := l.Checkpoint(ctx, last)
	if err != nil {
		tb.Fatal(err)
	}
	b, err := changelog.CollectParallel(ctx, st, hs, r, 0, last, o)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// TestLazyTailPersistAllTimerFile: PersistAll (the root's Close) with a lazy tail pending and
// timers (invariant 38): the install's deferred persist removes every timer file but the
// restore's, so PersistAll must install the tail before it writes its own; before the fix the
// final persist point named a removed file and the directory failed to reopen.
func TestLazyTailPersistAllTimerFile(t *testing.T) {
	const tables, tail = 50, 200
	all := checkpoint.KeyGroupRange{Start: 0, End: 127}
	dir := t.TempDir()
	o := restoreSeqOptions(dir, all)
	e := openTest(t, o)
	for i := range tables + tail {
		k, h := testKey(3, fmt.Appendf(nil, "k%d", i))
		if err := e.Apply(opPut(k, h, []byte("v"))); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Persist(nil); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	b := lazyTailLog(t, tables, tail)
	e = openTest(t, restoreSeqOptions(dir, all))
	q := e.TimerQueues("svc")
	tm := testTimer(1)
	if _, err := q.Add(EventTime, tm.KeyGroup, base.HashKey(tm.Key), tm.KeyHash, tm.Key, tm.Namespace, tm.Timestamp); err != nil {
		t.Fatal(err)
	}
	if err := e.queueTail(b, "tail"); err != nil {
		t.Fatal(err)
	}
	e.startTail()
	if err := e.deferTailPersist(func(r TimerFileRef) []byte { return []byte("restore:" + r.Name) }, nil); err != nil {
		t.Fatal(err)
	}
	var ref TimerFileRef
	if err := e.PersistAll(func(r TimerFileRef) []byte { ref = r; return []byte(r.Name) }); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if ref.Name == "" {
		t.Fatal("no timer file")
	}
	if _, err := os.Stat(filepath.Join(dir, ref.Name)); err != nil {
		e2 := openTest(t, restoreSeqOptions(dir, all))
		e2.TimerQueues("svc")
		lerr := e2.LoadTimerFile(ref)
		e2.Close()
		t.Fatalf("the persist point names timer file %s, which is gone: %v; reopen: LoadTimerFile: %v", ref.Name, err, lerr)
	}
}

// TestLazyTailTTLSummary: a TTL table set (the root's Register of a TTL state) after the lazy
// tail's driver wrote its files but before their install (invariant 38): ForgetExpiry reaches
// only the files of the current version, so without the install's own ForgetExpiry the tail's
// files kept the empty summary noted under the old (nil) table and the TTL sweep never found
// them due. An eager restore's tail files are in the version at SetTTL and due at the unknown
// bound; the lazy ones must be too.
func TestLazyTailTTLSummary(t *testing.T) {
	const tables, tail = 50, 2000
	all := checkpoint.KeyGroupRange{Start: 0, End: 127}
	for _, lazy := range []bool{false, true} {
		t.Run(fmt.Sprint("lazy=", lazy), func(t *testing.T) {
			dir := t.TempDir()
			e := openTest(t, restoreSeqOptions(dir, all))
			for i := range tables + tail {
				k, h := testKey(3, fmt.Appendf(nil, "k%d", i))
				if err := e.Apply(opPut(k, h, []byte("v"))); err != nil {
					t.Fatal(err)
				}
			}
			if err := e.Persist(nil); err != nil {
				t.Fatal(err)
			}
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			b := lazyTailLog(t, tables, tail)
			e = openTest(t, restoreSeqOptions(dir, all))
			defer e.Close()
			if lazy {
				if err := e.queueTail(b, "tail"); err != nil {
					t.Fatal(err)
				}
				e.startTail()
				for e.tail.wrote.Load() == 0 {
					time.Sleep(time.Millisecond)
				}
			} else if _, _, err := e.bulkReplay(context.Background(), b, nil, "tail", false); err != nil {
				t.Fatal(err)
			}
			now := func() int64 { return 1 << 40 }
			sts := map[uint16]base.TTLState{}
			for id := uint16(1); id <= 3; id++ {
				sts[id] = base.TTLState{TTL: 1000, Layout: base.TTLValue, Compaction: true, QueryEvery: 1, ReclaimWithin: 1000}
			}
			e.SetTTL(base.NewTTLTable(now, sts))
			k, h := testKey(1, []byte("k1"))
			e.Get(h, k) // installs a lazy tail
			files := e.db.Metrics()
			due, _, _ := e.db.ExpiryStats(now(), now())
			t.Logf("lazy=%v: %d files due of L0 %d, tail files %d", lazy, due, e.l0Files, e.bulkFiles)
			if due < int(e.bulkFiles)+1 {
				t.Fatalf("only %d files due for the sweep; the tail's %d files are not (metrics %+v)", due, e.bulkFiles, files.Levels[0])
			}
		})
	}
}

// TestLazyTailValueIndex: while the lazy tail's driver is held, a Get is answered without
// waiting (invariant 39) and equals the Get of the same tail written synchronously: keys the
// tail puts over a restored table value, deletes (over a table value, after a put, then put
// again), keys it does not touch, list keys beside them in the tail, and keys written or
// deleted after Restore (the FreshTable, above the tail). After the install the answers are
// the same.
func TestLazyTailValueIndex(t *testing.T) {
	ctx := context.Background()
	const tables, tail = 200, 2000
	all := checkpoint.KeyGroupRange{Start: 0, End: 127}
	dirs := []string{t.TempDir(), t.TempDir()}
	for _, dir := range dirs {
		persistTailTables(t, restoreSeqOptions(dir, all), tables, tail)
	}
	// The tail: 20 rounds over state 1's keys k0..k99 (the table's keys) — every fourth record
	// an append to a list of state 2 instead, so keys ≡ 3 mod 4 get none —, rounds 0, 3, …, 18
	// deletes, the others puts, except that the last round deletes every third key.
	b := memTail(t, uint64(tables+tail), func(l *changelog.Log, _ *changelog.Writer) error {
		for i := range tail {
			seq := uint64(tables + i + 1)
			if i%4 == 3 {
				k, _ := testKey(2, fmt.Appendf(nil, "k%d", i%50))
				if err := l.Append(uint8(OpListAppend), uint16(k[0])<<8|uint16(k[1]), seq, k, nil, frame(fmt.Appendf(nil, "e%d", i))); err != nil {
					return err
				}
				continue
			}
			k, _ := testKey(1, fmt.Appendf(nil, "k%d", i%100))
			kind, v := OpPut, fmt.Appendf(nil, "tail-%d", i)
			if round := i / 100; (round%3 == 0 && round < 19) || (round == 19 && (i%100)%3 == 0) {
				kind, v = OpDelete, nil // deleted and put again; the last round deletes every third key
			}
			if err := l.Append(uint8(kind), uint16(k[0])<<8|uint16(k[1]), seq, k, nil, v); err != nil {
				return err
			}
		}
		return nil
	})
	open := func(dir string) *Engine {
		e := openTest(t, restoreSeqOptions(dir, all))
		if !e.canBulkReplay() {
			t.Fatal("reopened: no bulk replay")
		}
		return e
	}
	eager, lazy := open(dirs[0]), open(dirs[1])
	if _, _, err := eager.bulkReplay(ctx, b, nil, "tail", true); err != nil {
		t.Fatal(err)
	}
	release := holdTail(t, lazy, b)
	// Written after Restore, on both: a put over a tail delete, a delete over a tail put.
	for _, e := range []*Engine{eager, lazy} {
		if err := e.Apply(opPut(keyOf(1, 0), hashOf(1, 0), []byte("after"))); err != nil {
			t.Fatal(err)
		}
		if err := e.Apply(Op{Kind: OpDelete, Hash: hashOf(1, 1), Key: keyOf(1, 1)}); err != nil {
			t.Fatal(err)
		}
	}
	check := func(pending bool) {
		t.Helper()
		var deletes, puts int
		for i := range tables + 20 { // 20 keys nothing holds
			k, h := testKey(1, fmt.Appendf(nil, "k%d", i))
			want, ws := eager.Get(h, k)
			want = bytes.Clone(want)
			got, gs := lazy.Get(h, k)
			if gs != ws || !bytes.Equal(got, want) {
				t.Fatalf("pending %v: key %d: lazy %v %q, eager %v %q", pending, i, gs, got, ws, want)
			}
			if i < 100 && ws == deleted {
				deletes++
			} else if i < 100 && ws == found {
				puts++
			}
		}
		if deletes == 0 || puts == 0 {
			t.Fatalf("the tail's keys read %d deleted, %d found: want both", deletes, puts)
		}
		if ts := lazy.TailStats(); ts.Pending != pending {
			t.Fatalf("tail %+v: pending %v, want %v", ts, ts.Pending, pending)
		}
	}
	check(true)
	if ts := lazy.TailStats(); ts.Served != 73 {
		t.Fatalf("tail %+v: %d Gets served by the index, want 73 (75 keys with value records, 2 written since)", ts, ts.Served)
	}
	release()
	// The first write after the driver ended installs the tail (Apply's preamble).
	for deadline := time.Now().Add(time.Minute); lazy.TailStats().Pending; {
		if time.Now().After(deadline) {
			t.Fatalf("tail %+v: still pending a minute after the driver's release", lazy.TailStats())
		}
		if err := lazy.Apply(opPut(keyOf(3, 0), hashOf(3, 0), []byte("x"))); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
	check(false)
	var dst [][]byte
	kl, hl := testKey(2, []byte("k3"))
	want, _, _ := eager.ListGet(hl, kl, nil, nil)
	got, _, _ := lazy.ListGet(hl, kl, dst, nil)
	if len(got) == 0 || !bytes.Equal(bytes.Join(got, nil), bytes.Join(want, nil)) {
		t.Fatalf("list after the install: %q, want %q", got, want)
	}
}

// BenchmarkTailIndex: the lazy tail's value index (newTailIndex, invariant 39) of 500,000
// value puts (100-byte values) to 250,000 random keys: the cost it adds to a lazy Restore,
// per record (ns/record).
func BenchmarkTailIndex(b *testing.B) {
	const records, keys = 500_000, 250_000
	bt := benchPutLog(b, records, keys)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		x, err := newTailIndex(bt, "bench")
		if err != nil {
			b.Fatal(err)
		}
		x.release()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*records), "ns/record")
}

// TestTailIndexCollision: two keys whose tags meet in one probe sequence share a slot, holding
// the newer record of the two (tailIndex): the lookup of that record's key answers it, the
// other key's lookup answers "unknown" (known false), never the other key's value; and an
// engine Get that meets such a slot waits for the tail and reads the installed one.
func TestTailIndexCollision(t *testing.T) {
	const tables = 10
	twoPuts := func(l *changelog.Log, _ *changelog.Writer) error { // k0 = v0, k1 = v1
		for i := range 2 {
			k, _ := testKey(1, fmt.Appendf(nil, "k%d", i))
			if err := l.Append(uint8(OpPut), uint16(k[0])<<8|uint16(k[1]), uint64(tables+i+1), k, nil, fmt.Appendf(nil, "v%d", i)); err != nil {
				return err
			}
		}
		return nil
	}
	b := memTail(t, tables+2, twoPuts)
	x, err := newTailIndex(b, "tail")
	if err != nil {
		t.Fatal(err)
	}
	defer x.release()
	k0, h0 := testKey(1, []byte("k0"))
	k1, h1 := testKey(1, []byte("k1"))
	for _, c := range []struct {
		key  []byte
		h    uint64
		want string
	}{{k0, h0, "v0"}, {k1, h1, "v1"}} {
		if v, st, ok, known := x.get(c.h, c.key); !ok || !known || st != found || string(v) != c.want {
			t.Fatalf("get %q: %q %v ok %v known %v, want %q", c.key, v, st, ok, known, c.want)
		}
	}
	// k1's record put under k0's hash: the slot of k0 now holds k1's (newer) record.
	x.insert(h0, 2)
	if _, _, ok, known := x.get(h0, k0); ok || known {
		t.Fatalf("get k0 over k1's record: ok %v known %v, want unknown", ok, known)
	}

	// The engine: Get of k0 meets the collision, waits for the held tail, reads it installed.
	all := checkpoint.KeyGroupRange{Start: 0, End: 127}
	dir := t.TempDir()
	persistTailTables(t, restoreSeqOptions(dir, all), tables, 2)
	e := openTest(t, restoreSeqOptions(dir, all))
	release := holdTail(t, e, memTail(t, tables+2, twoPuts))
	e.tail.srcs[0].idx.insert(h0, 2) // the collision
	if v, st := e.Get(h1, k1); st != found || string(v) != "v1" || !e.TailStats().Pending {
		t.Fatalf("get k1 while held: %q %v (tail %+v), want v1 from the index", v, st, e.TailStats())
	}
	var released atomic.Bool
	go func() {
		time.Sleep(20 * time.Millisecond)
		released.Store(true)
		release()
	}()
	v, st := e.Get(h0, k0)
	if !released.Load() || st != found || string(v) != "v0" {
		t.Fatalf("get k0 at the collision: %q %v, released %v: want v0 after the install", v, st, released.Load())
	}
	if ts := e.TailStats(); ts.Pending || ts.Collisions != 1 || ts.Served != 1 {
		t.Fatalf("tail %+v: want installed, 1 collision, 1 served", ts)
	}
}

// TestLazyTailValueOutlivesInstall: a value a Get took from the tail's index (invariant 39)
// stays readable and unchanged after a later Get installs the tail and releases the Batch,
// collected off the Go heap as a Restore collects it, so the release unmaps it (found by
// review: with the Batch on the Go heap no test failed without tailGet's copy; this one
// faults without it).
func TestLazyTailValueOutlivesInstall(t *testing.T) {
	const tables, tail = 50, 200
	all := checkpoint.KeyGroupRange{Start: 0, End: 127}
	dir := t.TempDir()
	persistTailTables(t, restoreSeqOptions(dir, all), tables, tail)
	b := memTailOffHeap(t, uint64(tables+tail), func(l *changelog.Log, _ *changelog.Writer) error {
		for i := range tail {
			k, _ := testKey(1, fmt.Appendf(nil, "k%d", i%tables))
			if err := l.Append(uint8(OpPut), uint16(k[0])<<8|uint16(k[1]), uint64(tables+i+1), k, nil, fmt.Appendf(nil, "tail-value-%04d", i)); err != nil {
				return err
			}
		}
		return nil
	})
	e := openTest(t, restoreSeqOptions(dir, all))
	release := holdTail(t, e, b)
	k, h := testKey(1, []byte("k3"))
	early, st := e.Get(h, k)
	if st != found || e.TailStats().Served != 1 {
		t.Fatalf("get while held: %v %q (tail %+v), want found from the index", st, early, e.TailStats())
	}
	want := bytes.Clone(early)
	release()
	for e.TailStats().Written == 0 {
		time.Sleep(time.Millisecond)
	}
	k2, h2 := testKey(1, []byte("k4"))
	e.Get(h2, k2) // the driver ended: this Get installs the tail and unmaps the Batch
	if e.TailStats().Pending {
		t.Fatal("still pending after a Get past the driver's end")
	}
	if !bytes.Equal(early, want) { // faults here without tailGet's copy
		t.Fatalf("a value served by the index changed at the install: %q, was %q", early, want)
	}
}

// TestLowerHoldsPendingTail: while a lazy restore's tail is pending its data lies below with no
// file to show it, so lowerHolds answers yes for its keys' buckets (no compaction may drop a
// tombstone written since Restore that hides a tail value, slice invariant 10); after the
// install the tail's files answer.
func TestLowerHoldsPendingTail(t *testing.T) {
	all := checkpoint.KeyGroupRange{Start: 0, End: 127}
	dir := t.TempDir()
	persistTailTables(t, restoreSeqOptions(dir, all), 1, 20) // below: states 1 and 3's k0
	b := lazyTailLog(t, 1, 20)                               // the tail: states 1 and 2's k0
	e := openTest(t, restoreSeqOptions(dir, all))
	k, h := testKey(2, []byte("k0"))
	order := e.orderOf(k, h)
	if e.db == nil || e.db.Overlaps(order, order) {
		t.Fatalf("premise: the LsmStore holds state 2's k0 before the tail (db %v)", e.db != nil)
	}
	release := holdTail(t, e, b)
	if !e.lowerHolds(order, order) {
		t.Fatal("lowerHolds: no, while the tail that holds the key is pending")
	}
	release()
	if err := e.awaitTail(); err != nil {
		t.Fatal(err)
	}
	if v, st := e.Get(h, k); st != found || !bytes.HasPrefix(v, []byte("tail-")) {
		t.Fatalf("after the install: %v %q", st, v)
	}
	if e.tail != nil || !e.lowerHolds(order, order) {
		t.Fatalf("after the install: tail pending %v, lowerHolds %v: want the tail's file to hold the key", e.tail != nil, e.lowerHolds(order, order))
	}
}
