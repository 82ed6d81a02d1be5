package engine

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
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
				e := openTest(t, o)
				for i := range tables + tail {
					id := uint16(1)
					if i >= tables {
						id = 3 // seqs for the tail to take (nothing reads state 3)
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
			hold := make(chan struct{})
			var released atomic.Bool
			lazy.tailHook = func() { <-hold }
			lazy.queueTail(b, "tail")
			lazy.startTail()
			if err := lazy.Apply(opPut(keyOf(1, 7), hashOf(1, 7), []byte("written"))); err != nil {
				t.Fatal(err)
			}
			if ts := lazy.TailStats(); !ts.Pending || lazy.bulkFiles != 0 {
				t.Fatalf("tail %+v, %d files before the release: want pending, none", ts, lazy.bulkFiles)
			}
			go func() {
				time.Sleep(20 * time.Millisecond)
				released.Store(true)
				close(hold)
			}()
			for id := uint16(1); id <= 2; id++ {
				for i := range tables {
					k, h := testKey(id, fmt.Appendf(nil, "k%d", i))
					want, ws := sync.Get(h, k)
					if id == 1 && i == 7 {
						want, ws = []byte("written"), found
					}
					want = bytes.Clone(want)
					got, gs := lazy.Get(h, k)
					if !released.Load() {
						t.Fatal("a read returned before the held tail was installed")
					}
					if gs != ws || !bytes.Equal(got, want) {
						t.Fatalf("state %d key %d: lazy %v %q, sync %v %q", id, i, gs, got, ws, want)
					}
				}
			}
			ts := lazy.TailStats()
			if ts.Pending || ts.Files < 2 || lazy.bulkParallel != 1 || ts.Applied+ts.Skipped != tail || ts.Skipped == 0 ||
				lazy.bulkFiles != sync.bulkFiles {
				t.Fatalf("tail %+v, %d files (sync %d), %d in parts: want installed in parts, %d records",
					ts, lazy.bulkFiles, sync.bulkFiles, lazy.bulkParallel, tail)
			}
		})
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
	b, err := changelog.Collect(ctx, st, hs, r, 0, last)
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
	e.queueTail(b, "tail")
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
				e.queueTail(b, "tail")
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
