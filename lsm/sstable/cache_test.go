package sstable

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"testing"

	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/internal/vfs"
	"github.com/strata-db/strata/memory"
)

func TestCacheBudget(t *testing.T) {
	b := memory.NewBudget(1 << 20)
	c, err := NewCache(b, 256<<10, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.UsedBy(memory.PurposeBlockCache); got < 256<<10 || got > 256<<10+int64(os.Getpagesize()) {
		t.Fatalf("block cache accounts %d bytes, want 256 KiB", got)
	}
	if st := c.Stats(); st.Frames != 64 || st.Bytes < 256<<10 || c.FrameSize() != 4096 {
		t.Fatalf("Stats = %+v", st)
	}
	if _, err := NewCache(b, 1<<20, 4096); !errors.Is(err, memory.ErrMemoryBudget) {
		t.Fatalf("over-budget cache: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if b.Used() != 0 {
		t.Fatalf("after Close the budget still holds %d bytes", b.Used())
	}
	for _, bad := range []struct {
		capacity int64
		bs       int
	}{{100, 4096}, {1 << 20, -1}, {1 << 20, 2 << 30}} {
		if _, err := NewCache(b, bad.capacity, bad.bs); !errors.Is(err, ErrInvalidOptions) {
			t.Fatalf("NewCache(%d, %d) = %v", bad.capacity, bad.bs, err)
		}
	}
}

// manyBlocks writes a file of small blocks and returns it with its entries.
func manyBlocks(t testing.TB, fs vfs.FS, name string, seed uint64, keys int) []ent {
	es := genEntries(rand.New(rand.NewPCG(seed, 1)), genOpts{keys: keys, maxVersions: 3, mapShare: 20,
		mapSize: 20, collide: 5, maxValue: 60, bigValue: 1, bigSize: 2048})
	writeFile(t, fs, name, es, WriterOptions{BlockSize: 1024})
	return es
}

func TestCacheHitsAndEviction(t *testing.T) {
	fs := vfs.NewMem()
	es := manyBlocks(t, fs, "a.sst", 1, 2000)
	c := newCache(t, 8*1024, 1024) // 8 frames: constant eviction
	r := openFile(t, fs, "a.sst", c, 7)
	if r.Meta().Blocks < 50 {
		t.Fatalf("only %d blocks", r.Meta().Blocks)
	}
	checkAll(t, r, es)
	st := c.Stats()
	if st.Resident == 0 || st.Resident > 8 || st.Misses == 0 || st.Hits == 0 {
		t.Fatalf("Stats after a full check = %+v", st)
	}
	// The same key twice: the second read is a hit.
	x := es[len(es)/2]
	get := func() {
		if err := r.Get(x.Order, x.Key, x.UserKey, func(*base.Entry) bool { return true }); err != nil {
			t.Fatal(err)
		}
	}
	get()
	before := c.Stats()
	get()
	if after := c.Stats(); after.Hits <= before.Hits || after.Misses != before.Misses {
		t.Fatalf("repeated Get: stats %+v then %+v", before, after)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if st := c.Stats(); st.Resident != 0 {
		t.Fatalf("Close left %d frames of the file", st.Resident)
	}
}

// TestCacheFrameTooSmall: blocks longer than the frames bypass the cache and
// still read correctly.
func TestCacheFrameTooSmall(t *testing.T) {
	fs := vfs.NewMem()
	es := manyBlocks(t, fs, "a.sst", 2, 300)
	c := newCache(t, 64*256, 256)
	r := openFile(t, fs, "a.sst", c, 1)
	defer r.Close()
	checkAll(t, r, es)
	small := 0
	for _, h := range r.idx {
		if h.length <= 256 {
			small++
		}
	}
	if st := c.Stats(); st.Resident > small || small == len(r.idx) {
		t.Fatalf("%d blocks cached, %d of %d fit a frame", st.Resident, small, len(r.idx))
	}
}

// TestCacheConcurrent reads several files sharing a tiny cache from many
// goroutines (run with -race): every read is right, frames are reused while
// others are pinned, and a shard whose frames are all pinned falls back.
func TestCacheConcurrent(t *testing.T) {
	fs := vfs.NewMem()
	const files = 3
	var readers [files]*Reader
	var sets [files][]ent
	c := newCache(t, 16*1024, 1024)
	for i := range files {
		name := fmt.Sprintf("%d.sst", i)
		sets[i] = manyBlocks(t, fs, name, uint64(10+i), 400)
		readers[i] = openFile(t, fs, name, c, uint64(i+1))
	}
	defer func() {
		for _, r := range readers {
			r.Close()
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(uint64(g), 3))
			for range 2000 {
				f := rnd.IntN(files)
				es := sets[f]
				x := es[rnd.IntN(len(es))]
				n := 0
				err := readers[f].Get(x.Order, x.Key, x.UserKey, func(e *base.Entry) bool {
					if e.Order != x.Order || string(e.Key) != string(x.Key) || string(e.UserKey) != string(x.UserKey) {
						n = -1 << 20
					}
					if e.Seq == x.Seq && string(e.Value) != string(x.Value) {
						n = -1 << 20
					}
					n++
					return true
				})
				if err == nil && n <= 0 {
					err = fmt.Errorf("file %d: Get(%v) read %d versions", f, x, n)
				}
				if err != nil {
					errs <- err
					return
				}
				if g%4 == 0 && rnd.IntN(50) == 0 {
					it := readers[f].NewIter()
					k := 0
					for it.Next() {
						k++
					}
					if it.Err() != nil || k != len(es) {
						errs <- fmt.Errorf("iteration: %d entries, %v", k, it.Err())
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if st := c.Stats(); st.Hits == 0 || st.Resident > st.Frames {
		t.Fatalf("Stats = %+v", st)
	}
}

// TestCacheAllPinned: with every frame pinned by a visitor that is still
// running, reads of other blocks fall back to private buffers.
func TestCacheAllPinned(t *testing.T) {
	fs := vfs.NewMem()
	es := manyBlocks(t, fs, "a.sst", 3, 500)
	c := newCache(t, 1024, 1024) // one frame
	r := openFile(t, fs, "a.sst", c, 1)
	defer r.Close()
	x, y := es[0], es[len(es)-1]
	inner := 0
	err := r.Get(x.Order, x.Key, x.UserKey, func(*base.Entry) bool {
		// The only frame is pinned by this Get: the nested one must fall back.
		if err := r.Get(y.Order, y.Key, y.UserKey, func(*base.Entry) bool { inner++; return true }); err != nil {
			t.Fatal(err)
		}
		return false
	})
	if err != nil || inner == 0 {
		t.Fatalf("nested Get: %v, %d versions", err, inner)
	}
}

// TestGetAllocs pins 0 allocations per cached Get, per filtered-out Get and
// per iterated entry in steady state.
func TestGetAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	fs := vfs.NewMem()
	es := manyBlocks(t, fs, "a.sst", 4, 500)
	c := newCache(t, 1<<20, 1024)
	r := openFile(t, fs, "a.sst", c, 1)
	defer r.Close()
	var sum int
	visit := func(e *base.Entry) bool { sum += len(e.Value); return true }
	i := 0
	if n := testing.AllocsPerRun(1000, func() {
		x := &es[i%len(es)]
		i++
		if err := r.Get(x.Order, x.Key, x.UserKey, visit); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("cached Get: %v allocs", n)
	}
	if n := testing.AllocsPerRun(1000, func() {
		x := &es[i%len(es)]
		i++
		if err := r.MapRange(x.Order, x.Key, visit); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("cached MapRange: %v allocs", n)
	}
	if n := testing.AllocsPerRun(1000, func() {
		i++
		if err := r.Get(uint64(i)*0x9E3779B97F4A7C15, es[0].Key, nil, visit); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("absent Get: %v allocs", n)
	}
	it := r.NewIter()
	if n := testing.AllocsPerRun(1000, func() {
		if !it.Next() {
			it = r.NewIter() // (allocates once per pass, amortised below 1)
		}
	}); n >= 0.01 {
		t.Fatalf("Iter.Next: %v allocs per entry", n)
	}
	// Uncached reads reuse pooled buffers too.
	r2 := openFile(t, fs, "a.sst", nil, 2)
	defer r2.Close()
	if n := testing.AllocsPerRun(1000, func() {
		x := &es[i%len(es)]
		i++
		if err := r2.Get(x.Order, x.Key, x.UserKey, visit); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("uncached Get: %v allocs", n)
	}
}

// TestCacheHoldsWorkingSet: a cache with more frames than the file has
// blocks keeps every block after one pass, however the blocks hash to the
// lookup shards (frames are one pool).
func TestCacheHoldsWorkingSet(t *testing.T) {
	fs := vfs.NewMem()
	es := manyBlocks(t, fs, "a.sst", 5, 3000)
	probe := openFile(t, fs, "a.sst", nil, 0)
	small := 0
	for _, h := range probe.idx {
		if h.length <= 1024 {
			small++
		}
	}
	probe.Close()
	c := newCache(t, int64(small+small/8)*1024, 1024)
	if len(c.shards) < 4 {
		t.Fatalf("only %d shards: the test needs several", len(c.shards))
	}
	r := openFile(t, fs, "a.sst", c, 1)
	defer r.Close()
	read := func() {
		for i := range es {
			if err := r.Get(es[i].Order, es[i].Key, es[i].UserKey, func(*base.Entry) bool { return true }); err != nil {
				t.Fatal(err)
			}
		}
	}
	read()
	before := c.Stats()
	read()
	after := c.Stats()
	if after.Misses != before.Misses || after.Resident != small {
		t.Fatalf("second pass missed %d times; %d of %d cacheable blocks resident",
			after.Misses-before.Misses, after.Resident, small)
	}
}
