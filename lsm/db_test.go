package lsm

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/internal/vfs"
	"github.com/strata-db/strata/lsm/sstable"
	"github.com/strata-db/strata/scheduler"
)

func TestOptionsValidate(t *testing.T) {
	cases := []struct {
		field string
		mod   func(o *Options)
	}{
		{"Dir", func(o *Options) { o.Dir = "" }},
		{"L0CompactionTrigger", func(o *Options) { o.L0CompactionTrigger = -1 }},
		{"LevelSizeRatio", func(o *Options) { o.LevelSizeRatio = 1 }},
		{"BaseLevelBytes", func(o *Options) { o.BaseLevelBytes = -5 }},
		{"NumLevels", func(o *Options) { o.NumLevels = MaxLevels + 1 }},
		{"NumLevels", func(o *Options) { o.NumLevels = 1 }},
		{"BlockSize", func(o *Options) { o.BlockSize = -1 }},
		{"TargetFileSize", func(o *Options) { o.TargetFileSize = -1 }},
		{"MaxManifestBytes", func(o *Options) { o.MaxManifestBytes = -1 }},
		{"MaxOpenFiles", func(o *Options) { o.MaxOpenFiles = -1 }},
	}
	if err := (Options{Dir: "/x"}).Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for _, c := range cases {
		o := Options{Dir: "/x"}
		c.mod(&o)
		err := o.Validate()
		if !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: %v", c.field, err)
		}
		if _, err := Open(o); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("Open with bad %s: %v", c.field, err)
		}
	}
}

// TestReopenWithFewerLevels: a manifest holding files at a level >= NumLevels
// is refused with ErrInvalidOptions, not silently misread.
func TestReopenWithFewerLevels(t *testing.T) {
	fs := vfs.NewMem()
	opts := smallOptions(fs)
	d, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	g := newGen(rand.New(rand.NewPCG(1, 1)), crashKeys)
	for range 8 {
		p, _ := d.WriteL0(&sliceIter{es: g.batch(30)})
		if err := d.InstallL0(p, g.seq); err != nil {
			t.Fatal(err)
		}
	}
	compactToBottom(t, d)
	persistClose(t, d)
	opts.NumLevels = 3
	if _, err := Open(opts); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("got %v", err)
	}
}

type failingIter struct {
	sliceIter
	failAt int
}

func (f *failingIter) Next() bool {
	if f.i == f.failAt {
		f.err = errors.New("source broke")
		return false
	}
	return f.sliceIter.Next()
}

// TestWriteL0Errors: a failing or out-of-order input leaves no file behind;
// an empty batch installs only the sequence number.
func TestWriteL0Errors(t *testing.T) {
	fs := vfs.NewMem()
	d, err := Open(smallOptions(fs))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	g := newGen(rand.New(rand.NewPCG(1, 1)), crashKeys)
	es := g.batch(200)
	if _, err := d.WriteL0(&failingIter{sliceIter: sliceIter{es: es}, failAt: 150}); err == nil || !strings.Contains(err.Error(), "source broke") {
		t.Fatalf("failing source: %v", err)
	}
	bad := append([]base.Entry{es[5]}, es...)
	if _, err := d.WriteL0(&sliceIter{es: bad}); !errors.Is(err, sstable.ErrOutOfOrder) {
		t.Fatalf("out of order: %v", err)
	}
	if err := noPartialFiles(d, nil); err != nil {
		t.Fatal(err)
	}
	p, err := d.WriteL0(&sliceIter{})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.InstallL0(p, 77); err != nil {
		t.Fatal(err)
	}
	if err := d.InstallL0(p, 78); err == nil {
		t.Fatal("second install of one pending file accepted")
	}
	if d.LastSeq() != 77 {
		t.Fatalf("LastSeq %d", d.LastSeq())
	}
	persistClose(t, d)
	d, err = Open(smallOptions(fs))
	if err != nil {
		t.Fatal(err)
	}
	if d.LastSeq() != 77 {
		t.Fatalf("LastSeq after reopen %d", d.LastSeq())
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); !errors.Is(err, base.ErrClosed) {
		t.Fatalf("second Close: %v", err)
	}
	if err := d.Get(1, nil, nil, func(*base.Entry) bool { return true }); !errors.Is(err, base.ErrClosed) {
		t.Fatalf("Get after Close: %v", err)
	}
}

// TestCompactionCancelled: a job whose context is cancelled removes its
// outputs; installing it reports the error and releases the inputs, which
// a later job compacts.
func TestCompactionCancelled(t *testing.T) {
	fs := vfs.NewMem()
	opts := smallOptions(fs)
	d, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	g := newGen(rand.New(rand.NewPCG(3, 1)), keySpace{values: 3000, orderBits: 64})
	m := newModel()
	for range 4 {
		es := g.batch(1500)
		p, _ := d.WriteL0(&sliceIter{es: es})
		if err := d.InstallL0(p, g.seq); err != nil {
			t.Fatal(err)
		}
		m.add(es)
	}
	j := d.PickCompaction()
	if j == nil || j.Level() != 0 {
		t.Fatalf("no L0 job: %v", j)
	}
	if d.PickCompaction() != nil {
		t.Fatal("a second job over busy levels")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := j.Run(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v", err)
	}
	if err := d.InstallCompaction(j); !errors.Is(err, context.Canceled) {
		t.Fatalf("InstallCompaction: %v", err)
	}
	if err := noPartialFiles(d, nil); err != nil {
		t.Fatal(err)
	}
	checkAll(t, d, m, g.keys, "after cancelled compaction")
	compactAll(t, d)
	checkAll(t, d, m, g.keys, "after compaction")
	if d.Metrics().Levels[0].Files != 0 {
		t.Fatal("L0 not compacted")
	}
}

// TestCompactionFilter: the filter sees bottom = true only when no deeper
// level overlaps, what it drops is gone, and what it rewrites is written.
func TestCompactionFilter(t *testing.T) {
	fs := vfs.NewMem()
	opts := smallOptions(fs)
	var mu sync.Mutex
	sawBottom := map[bool]int{}
	opts.NewFilter = func(bool) CompactionFilter {
		return func(e *base.Entry, bottom bool) (base.Decision, *base.Entry) {
			mu.Lock()
			sawBottom[bottom]++
			mu.Unlock()
			if string(e.Value) == "expired" {
				return base.FilterDrop, nil
			}
			if string(e.Value) == "rewrite" {
				r := *e
				r.Value = []byte("rewritten")
				return base.FilterRewrite, &r
			}
			return DefaultFilter(e, bottom)
		}
	}
	d, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	install := func(es []base.Entry) {
		p, err := d.WriteL0(&sliceIter{es: es})
		if err != nil {
			t.Fatal(err)
		}
		if err := d.InstallL0(p, es[len(es)-1].Seq); err != nil {
			t.Fatal(err)
		}
	}
	install([]base.Entry{
		{Order: 1, Seq: 1, Kind: base.KindValue, Key: []byte("a"), Value: []byte("keep")},
		{Order: 2, Seq: 2, Kind: base.KindValue, Key: []byte("b"), Value: []byte("expired")},
		{Order: 3, Seq: 3, Kind: base.KindTombstone, Key: []byte("c")},
		{Order: 4, Seq: 4, Kind: base.KindValue, Key: []byte("d"), Value: []byte("rewrite")},
	})
	j := d.CompactLevel(0)
	if !j.Bottom() {
		t.Fatal("L0→L1 over empty deeper levels is not bottom")
	}
	if err := j.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := d.InstallCompaction(j); err != nil {
		t.Fatal(err)
	}
	if st := j.Stats(); st.Dropped != 2 || st.Rewritten != 1 || st.EntriesOut != 2 {
		t.Fatalf("stats %+v", st)
	}
	var rw []string
	d.Get(4, []byte("d"), nil, func(e *base.Entry) bool { rw = append(rw, string(e.Value)); return true })
	if len(rw) != 1 || rw[0] != "rewritten" {
		t.Fatalf("the rewritten entry reads %q", rw)
	}
	// Move it down to L2, then compact new L0 data into L1: not bottom.
	j = d.CompactLevel(1)
	j.Run(context.Background())
	d.InstallCompaction(j)
	install([]base.Entry{{Order: 1, Seq: 5, Kind: base.KindTombstone, Key: []byte("a")}})
	j = d.CompactLevel(0)
	if j.Bottom() {
		t.Fatal("L0→L1 above L2 data is bottom")
	}
	j.Run(context.Background())
	d.InstallCompaction(j)
	var got []base.Kind
	d.Get(1, []byte("a"), nil, func(e *base.Entry) bool { got = append(got, e.Kind); return true })
	if len(got) != 2 || got[0] != base.KindTombstone || got[1] != base.KindValue {
		t.Fatalf("versions of a: %v (the tombstone must survive above data)", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if sawBottom[true] == 0 || sawBottom[false] == 0 {
		t.Fatalf("filter calls by bottom: %v", sawBottom)
	}
}

// TestScheduler runs the DB as the root package will: WriteL0 and compaction
// jobs on scheduler workers, installs on the owner goroutine, reads in
// between; -race checks the concurrency rules.
func TestScheduler(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 5))
	s, err := scheduler.New(scheduler.Options{Workers: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	opts := smallOptions(vfs.NewMem())
	opts.L0CompactionTrigger = 2
	d, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	g := newGen(rng, keySpace{values: 200, lists: 50, maps: 20, userKeys: 10, orderBits: 64})
	m := newModel()
	type flush struct {
		h  *scheduler.Handle
		p  *PendingFile
		es []base.Entry
	}
	var flushes []*flush // in submission order: installed in that order (invariant 6)
	type job struct {
		h *scheduler.Handle
		j *CompactionJob
	}
	var jobs []job
	submitted := 0
	for step := 0; submitted < 60 || len(flushes) > 0 || len(jobs) > 0; step++ {
		draining := submitted >= 60
		if !draining && len(flushes) < 4 {
			submitted++
			f := &flush{es: g.batch(20 + rng.IntN(80))}
			f.h, err = s.Submit(scheduler.Eviction, "flush", func(ctx context.Context) error {
				var err error
				f.p, err = d.WriteL0(&sliceIter{es: f.es})
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			flushes = append(flushes, f)
		}
		// Install finished flushes in submission order (block while draining).
	install:
		for len(flushes) > 0 {
			f := flushes[0]
			if !draining && len(flushes) < 4 {
				select {
				case <-f.h.Done():
				default:
					break install
				}
			}
			if err := f.h.Wait(); err != nil {
				t.Fatal(err)
			}
			if err := d.InstallL0(f.p, g.seq); err != nil {
				t.Fatal(err)
			}
			m.add(f.es)
			flushes = flushes[1:]
		}
		for i := 0; i < len(jobs); i++ {
			select {
			case <-jobs[i].h.Done():
				if err := jobs[i].h.Wait(); err != nil {
					t.Fatal(err)
				}
				if err := d.InstallCompaction(jobs[i].j); err != nil {
					t.Fatal(err)
				}
				jobs = append(jobs[:i], jobs[i+1:]...)
				i--
			default:
			}
		}
		if draining && len(flushes) == 0 && len(jobs) > 0 {
			jobs[0].h.Wait()
		}
		if !draining {
			for j := d.PickCompaction(); j != nil; j = d.PickCompaction() {
				h, err := s.Submit(scheduler.Compaction, j.String(), j.Run)
				if err != nil {
					t.Fatal(err)
				}
				jobs = append(jobs, job{h, j})
			}
		}
		if step%20 == 0 {
			if err := diffAll(d, m, g.keys); err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
		}
	}
	checkAll(t, d, m, g.keys, "end")
	mt := d.Metrics()
	t.Logf("levels %+v compactions %d WA %.2f", mt.Levels, mt.Compactions, mt.WriteAmplification)
	if mt.Compactions == 0 {
		t.Fatal("no compaction ran")
	}
}

// TestCurrentMissing: a directory with tables but no CURRENT is refused
// (the tables are not deleted); a directory with only a manifest left by a
// crash during creation opens as a new DB.
func TestCurrentMissing(t *testing.T) {
	fs, _, _, name, _ := manifestDB(t, 2)
	fs2 := fs.CrashClone()
	fs.Remove("/db/CURRENT")
	if _, err := Open(smallOptions(fs)); !errors.Is(err, base.ErrCorruption) {
		t.Fatalf("tables without CURRENT: %v", err)
	}
	names, _ := fs.List("/db")
	if len(names) < 3 {
		t.Fatalf("files deleted: %v", names)
	}
	// Only a manifest (crash before CURRENT of a new DB was durable).
	for _, n := range must(fs2.List("/db")) {
		if n != strings.TrimPrefix(name, "/db/") {
			fs2.Remove("/db/" + n)
		}
	}
	d, err := Open(smallOptions(fs2))
	if err != nil {
		t.Fatal(err)
	}
	if stray, _ := strayFiles(d); len(stray) > 0 {
		t.Fatalf("stray %v", stray)
	}
	d.Close()
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
