package slice

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strata-db/strata/internal/base"
)

// relocateAll runs relocations until PickRelocation proposes none and
// returns how many it installed.
func relocateAll(t *testing.T, tb *Table) int {
	t.Helper()
	for n := 0; n < 10000; n++ {
		job, ok := tb.PickRelocation()
		if !ok {
			return n
		}
		if err := job.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := tb.InstallRelocation(job); err != nil {
			t.Fatal(err)
		}
	}
	t.Fatal("relocations did not converge")
	return 0
}

// heldBound is the most segments the allocator may hold for its blocks
// once relocations have run: ceil(blocks / per segment) + 1.
func heldBound(st AllocStats) int {
	return (st.Blocks+st.BlocksPerSegment-1)/st.BlocksPerSegment + 1
}

// TestFragmentation builds, compacts and evicts at random (some jobs
// cancelled, a relocation sometimes pending across them), and at
// checkpoints relocates until nothing is proposed: the allocator then
// holds at most ceil(live blocks / blocks per segment) + 1 segments, every
// key reads back, and after Close the allocator and budget are back to
// zero (newEnv's cleanup). Real geometry (256 KiB blocks, 64 per 16 MiB
// segment) and a small one (8 blocks per segment, many segments). The
// same runs without relocations must break the bound (or the test proves
// nothing); both report segments held over the ideal.
func TestFragmentation(t *testing.T) {
	for _, g := range []fragGeo{
		// 64 blocks per segment; live state of about 2-5 segments.
		{block: MaxSliceSize, bits: 5, hw: 100, batch: 32, entries: 100},
		// 8 blocks per segment; live state of about 4-8 segments.
		{block: MinSliceSize, perSeg: 8, bits: 3, hw: 30, batch: 4, entries: 20},
	} {
		for _, seed := range []uint64{1, 2, uint64(time.Now().UnixNano())} {
			t.Run(fmt.Sprintf("block=%dKiB/perSeg=%d/seed=%d", g.block>>10, g.perSeg, seed), func(t *testing.T) {
				t.Logf("replay: seed=%d", seed)
				off := fragmentation(t, g, seed, false)
				on := fragmentation(t, g, seed, true)
				t.Logf("segments held / ceil(live/per segment): without relocation mean %.2f max %.2f; "+
					"with relocations mean %.2f max %.2f between checkpoints, max %.2f after",
					off.mean(), off.worst, on.mean(), on.worst, on.after)
				if seed <= 2 && off.over == 0 {
					t.Errorf("without relocation the bound held at every checkpoint: the test proves nothing")
				}
			})
		}
	}
}

// fragGeo is a geometry for TestFragmentation: block size, blocks per
// segment (0: all), bucket bits; watermark, eviction batch (blocks) and
// entries per build, each from n to 2n.
type fragGeo struct {
	block, perSeg, bits int
	hw, batch, entries  int
}

// fragStats: segments held over ceil(live / per segment) at checkpoints.
type fragStats struct {
	sum, worst, after float64
	n, over           int // checkpoints; those over the bound
}

func (f fragStats) mean() float64 { return f.sum / float64(max(f.n, 1)) }

// fragmentation runs one seed's steps; with reloc false it never picks a
// relocation and only measures.
func fragmentation(t *testing.T, g fragGeo, seed uint64, reloc bool) fragStats {
	r := rand.New(rand.NewPCG(seed, 77))
	block := g.block
	e := newEnvSeg(t, block, g.perSeg, Options{BucketBits: g.bits, CompactionThreshold: 2 + r.IntN(3),
		HighWatermark: int64(g.hw+r.IntN(g.hw)) * int64(block), EvictionBatch: int64(g.batch+r.IntN(g.batch)) * int64(block),
		HeatHalfLife: time.Second, LowerTier: true})
	defer func() { _ = e.t.Close() }()
	per := e.a.BlocksPerSegment()
	low := &lowerTier{}
	vals := map[string]string{}
	orders := map[string]uint64{}
	seq := uint64(0)
	var pending *Relocation
	var fs fragStats
	var relocs, moved int
	ratio := func(st AllocStats) float64 {
		return float64(st.Segments) / float64(max((st.Blocks+per-1)/per, 1))
	}
	check := func(step int) {
		before := e.a.Stats()
		fs.n++
		fs.sum += ratio(before)
		fs.worst = max(fs.worst, ratio(before))
		if before.Segments > heldBound(before) {
			fs.over++
		}
		if reloc {
			n := relocateAll(t, e.t)
			after := e.a.Stats()
			relocs += n
			if after.Blocks != before.Blocks {
				t.Fatalf("step %d: relocation changed the live blocks %d -> %d", step, before.Blocks, after.Blocks)
			}
			if after.Segments > heldBound(after) {
				t.Fatalf("step %d: %d segments hold %d blocks (%d per segment) after relocating", step, after.Segments, after.Blocks, per)
			}
			fs.after = max(fs.after, ratio(after))
		}
		for k, want := range vals {
			v, st := e.t.Get(orders[k], []byte(k))
			got, ok := string(v), st == Found
			if st == Absent {
				got, ok = low.get(orders[k], k)
			}
			if !ok || got != want {
				t.Fatalf("step %d: Get(%s) = %.20q %v, want %.20q", step, k, got, ok, want)
			}
		}
	}
	steps := 600
	if testing.Short() || raceEnabled {
		steps = 200 // the race detector makes the copies slow; -race still runs every path
	}
	for step := 0; step < steps; step++ {
		switch op := r.IntN(20); {
		case op < 8:
			n := g.entries + r.IntN(g.entries)
			es := make([]base.Entry, 0, n)
			for range n {
				seq++
				k := fmt.Sprintf("k%d", r.IntN(3000))
				o, ok := orders[k]
				if !ok {
					o = r.Uint64()
					orders[k] = o
				}
				v := fmt.Sprintf("%d", seq) + strings.Repeat("v", r.IntN(block/64))
				es = append(es, kv(o, k, seq, v))
				vals[k] = v
			}
			e.install(t, es...)
		case op < 12:
			if job, ok := e.t.PickCompaction(); ok {
				if err := job.Run(context.Background()); err != nil {
					t.Fatal(err)
				}
				if r.IntN(8) == 0 {
					_ = e.t.CancelCompaction(job)
				} else if err := e.t.InstallCompaction(job); err != nil {
					t.Fatal(err)
				}
			}
		case op < 16:
			if job, ok := e.t.PickEviction(); ok {
				if err := job.Run(context.Background(), low); err != nil {
					t.Fatal(err)
				}
				if err := e.t.InstallEviction(job); err != nil {
					t.Fatal(err)
				}
			}
		case op < 17:
			e.clk.now += time.Duration(r.IntN(2000)) * time.Millisecond
		default:
			cancel := r.IntN(6) == 0
			if !reloc {
				continue
			}
			// A relocation pending across other jobs: picked now, run and
			// installed (or cancelled) at a later step.
			if pending == nil {
				pending, _ = e.t.PickRelocation()
				continue
			}
			if err := pending.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			moved += pending.Moved()
			if cancel {
				if err := e.t.CancelRelocation(pending); err != nil {
					t.Fatal(err)
				}
			} else if err := e.t.InstallRelocation(pending); err != nil {
				t.Fatal(err)
			}
			pending = nil
		}
		if step%50 == 49 && pending == nil {
			check(step)
		}
	}
	if pending != nil {
		_ = e.t.CancelRelocation(pending)
	}
	check(steps)
	st := e.t.Stats()
	t.Logf("relocate=%v: %d relocations to a fixpoint, %d slices moved by interleaved ones; table %+v", reloc, relocs, moved, st)
	if st.Compactions == 0 || st.Evictions == 0 || reloc && st.Relocations == 0 {
		t.Errorf("the run did not exercise compaction (%d), eviction (%d) and relocation (%d)", st.Compactions, st.Evictions, st.Relocations)
	}
	return fs
}

// TestRelocationJobRules: busy inputs, one pending job per table, Install
// and Cancel only once, Run twice, a cancelled Run, and jobs pending at
// Close installed or cancelled afterwards without leaks.
func TestRelocationJobRules(t *testing.T) {
	e := fragmentedEnv(t)
	st := e.a.Stats()
	job, ok := e.t.PickRelocation()
	if !ok || job.Slices() == 0 || job.Bytes() != int64(job.Slices()*MinSliceSize) {
		t.Fatalf("PickRelocation = %v, %v with %+v", job, ok, st)
	}
	if _, ok := e.t.PickRelocation(); ok {
		t.Fatal("two relocations pending on one table")
	}
	for _, s := range job.slices {
		if !s.moving || s.busy {
			t.Fatal("a relocation's input is not moving, or busy")
		}
	}
	if e.a.Stats().Draining != 1 {
		t.Fatal("the segment being emptied is not draining")
	}
	if err := e.t.InstallRelocation(job); !errors.Is(err, ErrJob) {
		t.Fatalf("install before Run: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := job.Run(ctx); !errors.Is(err, context.Canceled) || job.Moved() != 0 {
		t.Fatalf("cancelled Run: %v, moved %d", err, job.Moved())
	}
	if err := job.Run(context.Background()); !errors.Is(err, ErrJob) {
		t.Fatalf("second Run: %v", err)
	}
	if err := e.t.CancelRelocation(job); err != nil {
		t.Fatal(err)
	}
	if err := e.t.CancelRelocation(job); !errors.Is(err, ErrJob) {
		t.Fatalf("second cancel: %v", err)
	}
	if st := e.a.Stats(); st.Draining != 0 || st.Blocks != 8 || st.Segments != 6 {
		t.Fatalf("after cancel %+v", st)
	}
	// A relocation moves memory, not data: same values, same chains.
	before := chainsOf(e.t)
	n := relocateAll(t, e.t)
	if st := e.a.Stats(); n == 0 || st.Segments > heldBound(st) {
		t.Fatalf("%d relocations left %+v", n, st)
	}
	if after := chainsOf(e.t); after != before {
		t.Fatalf("chains changed by relocation:\n%s\n%s", before, after)
	}
	if ts := e.t.Stats(); ts.Relocations != int64(n) || ts.RelocatedSlices == 0 || ts.Segments != e.a.Stats().Segments {
		t.Fatalf("table stats %+v", ts)
	}

	for _, how := range []string{"install", "cancel", "unrun"} {
		t.Run("close/"+how, func(t *testing.T) {
			e := fragmentedEnv(t)
			job, ok := e.t.PickRelocation()
			if !ok {
				t.Fatal("no relocation")
			}
			if how != "unrun" {
				if err := job.Run(context.Background()); err != nil || job.Moved() == 0 {
					t.Fatal(err, job.Moved())
				}
			}
			if err := e.t.Close(); err != nil {
				t.Fatal(err)
			}
			if _, ok := e.t.PickRelocation(); ok {
				t.Fatal("a relocation after Close")
			}
			var err error
			switch how {
			case "install":
				if err = e.t.InstallRelocation(job); !errors.Is(err, base.ErrClosed) {
					t.Fatalf("install after Close: %v", err)
				}
			default:
				if err = e.t.CancelRelocation(job); err != nil {
					t.Fatal(err)
				}
			}
			// newEnv's cleanup checks that nothing is left.
		})
	}
}

// chainsOf renders every chain: runs, slices, entries.
func chainsOf(tb *Table) string {
	var b strings.Builder
	for i := range tb.buckets {
		fmt.Fprintf(&b, "%d:%q\n", i, chainEntries(tb, i))
	}
	return b.String()
}

// TestRelocationRace runs a relocation's copy beside a compaction, a build
// and the owner's reads, as the scheduler will (run with -race).
func TestRelocationRace(t *testing.T) {
	e := newEnvSeg(t, MinSliceSize, 4, Options{BucketBits: 4, CompactionThreshold: 2, HighWatermark: 1 << 30})
	r := rand.New(rand.NewPCG(3, 3))
	seq := uint64(0)
	keys := map[uint64]string{}
	batch := func() []base.Entry {
		var es []base.Entry
		for i := 0; i < 100; i++ {
			seq++
			o := r.Uint64()
			keys[o] = fmt.Sprint(seq)
			es = append(es, kv(o, "k", seq, fmt.Sprint(seq)))
		}
		return es
	}
	var all [][]*Slice
	for range 8 {
		all = append(all, e.install(t, batch()...))
	}
	// Free alternate runs' slices by compacting: sparse segments appear.
	compactAll(t, e.t)
	job, ok := e.t.PickRelocation()
	if !ok {
		t.Skipf("no relocation: %+v", e.a.Stats())
	}
	cj, cok := e.t.PickCompaction()
	next := batch()
	sortEntries(next)
	var wg sync.WaitGroup
	var built []*Slice
	var relErr, cErr, bErr error
	wg.Add(3)
	go func() { defer wg.Done(); relErr = job.Run(context.Background()) }()
	go func() {
		defer wg.Done()
		if cok {
			cErr = cj.Run(context.Background())
		}
	}()
	go func() { defer wg.Done(); built, bErr = e.t.Build(context.Background(), iterOf(next...)) }()
	for o := range keys {
		e.t.Get(o, []byte("k"))
	}
	wg.Wait()
	if relErr != nil || cErr != nil || bErr != nil {
		t.Fatal(relErr, cErr, bErr)
	}
	if err := e.t.InstallRelocation(job); err != nil {
		t.Fatal(err)
	}
	if cok {
		if err := e.t.InstallCompaction(cj); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.t.Install(built); err != nil {
		t.Fatal(err)
	}
	for o, want := range keys {
		if v, st := e.t.Get(o, []byte("k")); st != Found || string(v) != want {
			t.Fatalf("Get(%#x) = %q %v, want %q", o, v, st, want)
		}
	}
	_ = all
}

// TestRelocationYields: a relocation never holds back a compaction or an
// eviction. They take its slices while it is pending — before and after
// its Run — and the relocation then frees what left the table, drops the
// copy of what another job still reads, and moves the rest; reads stay
// right and nothing leaks.
func TestRelocationYields(t *testing.T) {
	for _, order := range []string{"compact-run-install", "run-compact-install", "run-evict-install",
		"evict-run-cancel", "run-pending-install", "run-install"} {
		t.Run(order, func(t *testing.T) {
			e := fragmentedEnv(t)
			job, ok := e.t.PickRelocation()
			if !ok {
				t.Fatalf("no relocation: %+v", e.a.Stats())
			}
			// A newer run in every bucket: the relocation's slice is in the
			// older run of a two-run chain, and at its end.
			var es []base.Entry
			for b := uint64(0); b < 8; b++ {
				es = append(es, kv(b<<61|2, "n", 100+b, "new"))
			}
			e.install(t, es...)
			e.t.opts.CompactionThreshold = 1
			low := &lowerTier{}
			var pend *Compaction
			for _, step := range strings.Split(order, "-") {
				switch step {
				case "compact", "pending":
					for {
						c, ok := e.t.PickCompaction()
						if !ok {
							break
						}
						if err := c.Run(context.Background()); err != nil {
							t.Fatal(err)
						}
						if step == "pending" && c.Bucket() == job.slices[0].bucket {
							pend = c // installed after the relocation
							continue
						}
						if err := e.t.InstallCompaction(c); err != nil {
							t.Fatal(err)
						}
					}
				case "evict":
					e.t.opts.EvictionBatch = 1 << 30
					ev, ok := e.t.PickEviction()
					if !ok {
						t.Fatal("no eviction")
					}
					if err := ev.Run(context.Background(), low); err != nil {
						t.Fatal(err)
					}
					if err := e.t.InstallEviction(ev); err != nil {
						t.Fatal(err)
					}
				case "run":
					if err := job.Run(context.Background()); err != nil {
						t.Fatal(err)
					}
				case "install", "cancel":
					taken := 0 // moving slices another job took
					for _, s := range job.slices {
						if s.dropped || s.busy {
							taken++
						}
					}
					if (taken == 0) != (order == "run-install") {
						t.Fatalf("%d of the relocation's %d slices taken by other jobs", taken, len(job.slices))
					}
					var err error
					if step == "install" {
						err = e.t.InstallRelocation(job)
					} else {
						err = e.t.CancelRelocation(job)
					}
					if err != nil {
						t.Fatal(err)
					}
				}
			}
			if pend != nil {
				if err := e.t.InstallCompaction(pend); err != nil {
					t.Fatal(err)
				}
			}
			for b := uint64(0); b < 8; b++ {
				v, st := e.t.Get(b<<61|1, []byte("k"))
				got := string(v)
				if st == Absent {
					got, _ = low.get(b<<61|1, "k")
				}
				if got != "2" {
					t.Fatalf("bucket %d: Get = %q %v", b, got, st)
				}
			}
			if ts, as := e.t.Stats(), e.a.Stats(); int64(as.Blocks*as.BlockSize) != ts.MemBytes || as.Draining != 0 {
				t.Fatalf("table %+v, allocator %+v", ts, as)
			}
			if ts := e.t.Stats(); order == "run-install" && ts.RelocatedSlices != 1 || order != "run-install" && ts.RelocatedSlices != 0 {
				t.Fatalf("%d slices relocated", ts.RelocatedSlices)
			}
			relocateAll(t, e.t)
			if as := e.a.Stats(); as.Segments > heldBound(as) {
				t.Fatalf("after relocating %+v", as)
			}
		})
	}
}

// fragmentedEnv: 8 buckets x 3 runs in segments of 4 blocks, bucket by
// bucket; then
// the two older runs of every bucket are evicted, and 8 blocks are
// left in 6 segments.
func fragmentedEnv(t *testing.T) *env {
	t.Helper()
	e := newEnvSeg(t, MinSliceSize, 4, Options{BucketBits: 3, CompactionThreshold: 100, HighWatermark: 1, EvictionBatch: 1})
	e.t.relocSegs = 1 // the tests built on it follow one segment's slice (TestRelocationSeveralSegments: more)
	seq := uint64(0)
	for b := uint64(0); b < 8; b++ {
		if _, ok := e.t.PickRelocation(); ok {
			t.Fatal("a relocation proposed with no free block")
		}
		for i := range 3 {
			seq++
			e.install(t, kv(b<<61|1, "k", seq, fmt.Sprint(i)))
		}
	}
	for range 10 {
		for b := uint64(0); b < 8; b++ {
			e.t.Get(b<<61|1, []byte("k")) // the newest runs are hot: evicted last
		}
	}
	for e.a.Stats().Blocks > 8 {
		job, ok := e.t.PickEviction()
		if !ok {
			t.Fatal("no eviction")
		}
		if err := job.Run(context.Background(), &lowerTier{}); err != nil {
			t.Fatal(err)
		}
		if err := e.t.InstallEviction(job); err != nil {
			t.Fatal(err)
		}
	}
	if st := e.a.Stats(); st.Segments != 6 {
		t.Fatalf("setup: %+v", st)
	}
	return e
}

// TestRelocationSeveralSegments: one relocation empties several of the
// least used segments when the free blocks of fuller ones take all their
// slices (invariant 13): every picked segment drains, every slice moves,
// the segments go back to the Pool at the install, and reads stay right.
// With one segment per job the same allocator needs a job per segment.
func TestRelocationSeveralSegments(t *testing.T) {
	e := fragmentedEnv(t)
	e.t.relocSegs = relocSegs
	before := e.a.Stats()
	job, ok := e.t.PickRelocation()
	if !ok {
		t.Fatalf("no relocation: %+v", before)
	}
	if len(job.segs) < 2 || e.a.Stats().Draining != len(job.segs) || len(job.src) != len(job.slices) {
		t.Fatalf("a job of %d segments (%d draining) for %d slices, allocator %+v", len(job.segs),
			e.a.Stats().Draining, len(job.slices), before)
	}
	if err := job.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if job.Moved() != job.Slices() {
		t.Fatalf("moved %d of %d slices", job.Moved(), job.Slices())
	}
	if err := e.t.InstallRelocation(job); err != nil {
		t.Fatal(err)
	}
	after := e.a.Stats()
	if after.Draining != 0 || after.Blocks != before.Blocks || after.Segments != before.Segments-len(job.segs) ||
		after.Segments > heldBound(after) {
		t.Fatalf("before %+v, after %+v, %d segments emptied", before, after, len(job.segs))
	}
	for b := uint64(0); b < 8; b++ {
		if v, st := e.t.Get(b<<61|1, []byte("k")); st != Found || string(v) != "2" {
			t.Fatalf("bucket %d: Get = %q %v", b, v, st)
		}
	}
}
