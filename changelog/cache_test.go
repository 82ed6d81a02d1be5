package changelog

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-db/strata/checkpoint"
	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/internal/vfs"
)

// getCounter counts whole-object Gets and ranged reads per object name.
type getCounter struct {
	checkpoint.Storage
	mu     sync.Mutex
	gets   map[string]int
	ranges atomic.Int64
	fail   atomic.Bool
}

func (g *getCounter) Get(ctx context.Context, name string) ([]byte, error) {
	if g.fail.Load() {
		return nil, errInjected
	}
	g.mu.Lock()
	g.gets[name]++
	g.mu.Unlock()
	time.Sleep(time.Millisecond) // let concurrent readers pile up on the fetch
	return g.Storage.Get(ctx, name)
}

func (g *getCounter) GetRange(ctx context.Context, name string, off, n int64) ([]byte, error) {
	g.ranges.Add(1)
	return g.Storage.GetRange(ctx, name, off, n)
}

// cacheFixture persists the records of four Stores through one shared Writer (one object per
// persist, holding every Store's segments) and returns each Store's handles and records.
func cacheFixture(t *testing.T) (*getCounter, [][]checkpoint.Object, [][]modelRec, []KeyGroupRange) {
	t.Helper()
	st := &getCounter{Storage: newStorage(t), gets: map[string]int{}}
	w, err := NewWriter(WriterOptions{Storage: st.Storage, Prefix: "tm-1"})
	if err != nil {
		t.Fatal(err)
	}
	ranges := []KeyGroupRange{{Start: 0, End: 31}, {Start: 32, End: 63}, {Start: 64, End: 95}, {Start: 96, End: 127}}
	logs := make([]*Log, len(ranges))
	models := make([][]modelRec, len(ranges))
	for i, kg := range ranges {
		if logs[i], err = w.Log(fmt.Sprintf("store-%d", i), kg); err != nil {
			t.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	seqs := make([]uint64, len(logs))
	for round := range 3 {
		for i, l := range logs {
			for range 200 {
				seqs[i]++
				r := randRec(rng, ranges[i], seqs[i])
				if err := appendModel(l, r); err != nil {
					t.Fatal(err)
				}
				models[i] = append(models[i], r)
			}
		}
		if _, err := w.Persist(context.Background()); err != nil {
			t.Fatal(err)
		}
		_ = round
	}
	hs := make([][]checkpoint.Object, len(logs))
	for i, l := range logs {
		if hs[i], err = l.Checkpoint(context.Background(), l.LastSeq()); err != nil {
			t.Fatal(err)
		}
	}
	return st, hs, models, ranges
}

// TestCacheFetchesOnce: Stores restoring concurrently from objects a shared Writer filled
// fetch each object once (FLINK-27155), and every one replays exactly its records.
func TestCacheFetchesOnce(t *testing.T) {
	st, hs, models, ranges := cacheFixture(t)
	c, err := NewCache(t.TempDir(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// A rescaled restore: eight Stores, each restoring half the key groups of one old Store,
	// all at once (one goroutine per Store, like the tasks of a process).
	var wg sync.WaitGroup
	for i := range 8 {
		old := i / 2
		r := ranges[old]
		mid := r.Start + (r.End-r.Start)/2
		kg := KeyGroupRange{Start: r.Start, End: mid}
		if i%2 == 1 {
			kg = KeyGroupRange{Start: mid + 1, End: r.End}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			rd := c.Reader(st)
			defer rd.Close()
			var got []modelRec
			err := Replay(context.Background(), rd, hs[old], kg, func(r *Record) error {
				got = append(got, fromRecord(r))
				return nil
			})
			if err != nil {
				t.Error(err)
				return
			}
			if want := filterKG(models[old], kg); !slices.Equal(got, want) {
				t.Errorf("store %d (%s): replayed %d records, want %d", i, kg, len(got), len(want))
			}
		}()
	}
	wg.Wait()
	objs := map[string]bool{}
	for _, h := range hs {
		for _, o := range h {
			objs[o.Name] = true
		}
	}
	for name, n := range st.gets {
		if n != 1 {
			t.Errorf("%s fetched %d times", name, n)
		}
	}
	s := c.Stats()
	if len(st.gets) != len(objs) || s.Fetches != int64(len(objs)) || st.ranges.Load() != 0 {
		t.Fatalf("%d objects: %d fetched (stats %d), %d ranged reads of the storage", len(objs), len(st.gets), s.Fetches, st.ranges.Load())
	}
	if s.Hits == 0 || s.Entries != len(objs) {
		t.Fatalf("stats %+v: want hits and %d entries kept (idle timeout of an hour)", s, len(objs))
	}
	// A later restore of the process is served from the cache.
	rd := c.Reader(st)
	if got := replayAll(t, rd, hs[0], ranges[0]); !slices.Equal(got, models[0]) {
		t.Fatalf("replayed %d records from the cache, want %d", len(got), len(models[0]))
	}
	// And read into an off-heap buffer (the reader's ReadRangeInto), as a restore collects.
	b, err := CollectParallel(context.Background(), rd, hs[0], ranges[0], 0, math.MaxUint64, CollectOptions{OffHeap: true})
	if err != nil {
		t.Fatal(err)
	}
	got := batchRecords(t, b)
	if err := b.Release(); err != nil || !slices.Equal(got, models[0]) {
		t.Fatalf("collected %d records off-heap from the cache (release: %v), want %d", len(got), err, len(models[0]))
	}
	rd.Close()
	if f := c.Stats().Fetches; f != int64(len(objs)) {
		t.Fatalf("%d fetches after a second restore, want %d", f, len(objs))
	}
}

// TestCacheLifecycle: references, the idle timeout, a failed fetch that is not cached, a
// cancelled wait, Close, and a damaged local copy that replay reports as corruption.
func TestCacheLifecycle(t *testing.T) {
	st, hs, models, ranges := cacheFixture(t)
	fsys := vfs.NewMem()
	c, err := newCache(fsys, "/cache", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1000, 0)
	c.now = func() time.Time { return now }
	ctx := context.Background()
	name := hs[0][0].Name

	// A failed fetch is returned to its reader and not kept.
	st.fail.Store(true)
	rd := c.Reader(st)
	if _, err := rd.Get(ctx, name); !errors.Is(err, errInjected) {
		t.Fatalf("fetch through a failing storage: %v", err)
	}
	st.fail.Store(false)
	if s := c.Stats(); s.Entries != 0 || s.Fetches != 0 {
		t.Fatalf("after a failed fetch: %+v", s)
	}
	// Held: not evicted however long it idles; released: evicted after the timeout.
	whole, err := rd.Get(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	part, err := rd.GetRange(ctx, name, 3, 10)
	if err != nil || !slices.Equal(part, whole[3:13]) {
		t.Fatalf("range: %v", err)
	}
	if _, err := rd.GetRange(ctx, name, int64(len(whole))-1, 2); !errors.Is(err, checkpoint.ErrRange) {
		t.Fatalf("range past the end: %v", err)
	}
	now = now.Add(time.Hour)
	c.Reader(st).Close() // any call evicts what idled out
	if c.Stats().Entries != 1 {
		t.Fatal("a held object was evicted")
	}
	rd.Close()
	if c.Stats().Entries != 1 {
		t.Fatal("a released object was evicted before its idle timeout")
	}
	now = now.Add(time.Minute)
	c.Reader(st).Close()
	if s := c.Stats(); s.Entries != 0 || s.Evictions != 1 {
		t.Fatalf("after the idle timeout: %+v", s)
	}
	if names, _ := fsys.List("/cache"); len(names) != 0 {
		t.Fatalf("files left after eviction: %v", names)
	}

	// A wait for another reader's fetch ends with its context.
	e := &cacheEntry{name: "pending", ready: make(chan struct{})}
	c.ents["pending"] = e
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := c.Reader(st).Get(cctx, "pending"); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait: %v", err)
	}
	if e.refs != 0 {
		t.Fatalf("a cancelled wait kept %d references", e.refs)
	}
	delete(c.ents, "pending")

	// A damaged local copy is corruption to the replay, never wrong records.
	rd = c.Reader(st)
	if _, err := rd.Get(ctx, name); err != nil {
		t.Fatal(err)
	}
	path := c.ents[name].path
	f, err := fsys.Create(path) // truncates the cached copy
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	err = Replay(ctx, rd, hs[0], ranges[0], func(*Record) error { return nil })
	if !errors.Is(err, base.ErrCorruption) {
		t.Fatalf("replay of a damaged cached copy: %v, want ErrCorruption", err)
	}
	rd.Close()

	// Close: held objects stay readable until released, then go; new reads fail.
	rd = c.Reader(st)
	now = now.Add(time.Hour)
	c.Reader(st).Close()
	if got := replayAll(t, rd, hs[1], ranges[1]); !slices.Equal(got, models[1]) {
		t.Fatal("replay before Close")
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if got := replayAll(t, rd, hs[1], ranges[1]); !slices.Equal(got, models[1]) {
		t.Fatal("a reader holding its objects stopped working at Close")
	}
	rd.Close()
	if _, err := c.Reader(st).Get(ctx, name); err == nil {
		t.Fatal("a read after Close worked")
	}
	if names, _ := fsys.List("/cache"); len(names) != 0 {
		t.Fatalf("files left after Close: %v", names)
	}
}
