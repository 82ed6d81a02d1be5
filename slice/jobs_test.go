package slice

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/strata-db/strata/internal/base"
)

// chainEntries returns every entry of bucket b's chain, newest run first.
func chainEntries(tb *Table, b int) []string {
	var out []string
	for _, r := range tb.buckets[b].runs {
		for _, s := range r.slices {
			for i := 0; i < s.count; i++ {
				var e base.Entry
				s.Entry(i, &e)
				out = append(out, e.Kind.String()+":"+string(e.Key)+"/"+string(e.UserKey)+"="+string(e.Value))
			}
		}
	}
	return out
}

func compactAll(t *testing.T, tb *Table) *Compaction {
	t.Helper()
	job, ok := tb.PickCompaction()
	if !ok {
		t.Fatal("PickCompaction proposed nothing")
	}
	if err := job.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := tb.InstallCompaction(job); err != nil {
		t.Fatal(err)
	}
	return job
}

func TestCompactionResolves(t *testing.T) {
	for _, lower := range []bool{false, true} {
		e := newEnv(t, DefaultSliceSize, Options{BucketBits: -1, CompactionThreshold: 1, LowerTier: lower})
		e.install(t, kv(1, "v", 1, "old"), lapp(2, "l", 2, "a"), lbase(3, "b", 3, "B"), tomb(4, "d", 4),
			ment(5, "m", "x", 5, "x1"), ment(5, "m", "y", 6, "y1"), lapp(6, "o", 7, "p"))
		e.install(t, kv(1, "v", 8, "new"), lapp(2, "l", 9, "b"), lapp(3, "b", 10, "C"), kv(4, "d", 11, "D"),
			tomb(5, "m", 12), ment(5, "m", "y", 13, "y2"), mtomb(5, "m", "z", 14), lapp(6, "o", 15, "q"))
		e.install(t, tomb(1, "v", 16), lapp(2, "l", 17, "c"), tomb(6, "o", 18), lapp(6, "o", 19, "r"))
		job := compactAll(t, e.t)
		if job.Runs() != 3 {
			t.Fatalf("compaction took %d runs, want 3", job.Runs())
		}
		got := chainEntries(e.t, 0)
		want := []string{"list-append:l/=abc", "list-base:b/=BC", "value:d/=D", "map-entry:m/y=y2", "list-base:o/=r"}
		if lower {
			// Something may lie below: tombstones stay, operands over nothing stay operands.
			want = []string{"tombstone:v/=", "list-append:l/=abc", "list-base:b/=BC", "value:d/=D",
				"tombstone:m/=", "map-entry:m/y=y2", "map-entry-tombstone:m/z=", "list-base:o/=r"}
		} else {
			want[0] = "list-base:l/=abc"
		}
		if !slices.Equal(got, want) {
			t.Errorf("lower=%v: chain after compaction\n got %q\nwant %q", lower, got, want)
		}
		if st := e.t.Stats(); st.Runs != 1 || st.Compactions != 1 || st.CompactedIn == 0 {
			t.Errorf("stats %+v", st)
		}
		if l, ok := e.t.ListGet(2, []byte("l"), nil); joined(l) != "abc" || ok != !lower {
			t.Errorf("ListGet after compaction = %q, %v", joined(l), ok)
		}
	}
}

func TestCompactionPickAndCancel(t *testing.T) {
	e := newEnv(t, DefaultSliceSize, Options{BucketBits: 1, CompactionThreshold: 2})
	for i := uint64(1); i <= 3; i++ {
		e.install(t, kv(1, "a", i, "x"))
	}
	e.install(t, kv(1<<63, "b", 10, "y"))
	job, ok := e.t.PickCompaction()
	if !ok || job.Bucket() != 0 || job.Runs() != 3 {
		t.Fatalf("PickCompaction = %v, %v", job, ok)
	}
	if _, ok := e.t.PickCompaction(); ok {
		t.Fatal("a chain under compaction was picked twice")
	}
	if err := e.t.InstallCompaction(job); !errors.Is(err, ErrJob) {
		t.Fatalf("installing a job that has not run: %v", err)
	}
	if err := job.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := e.t.CancelCompaction(job); err != nil {
		t.Fatal(err)
	}
	if err := e.t.CancelCompaction(job); !errors.Is(err, ErrJob) {
		t.Fatalf("second cancel: %v", err)
	}
	if st := e.t.Stats(); st.Runs != 4 || st.Blocks != 4 {
		t.Fatalf("after cancel %+v", st)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	job, _ = e.t.PickCompaction()
	if err := job.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	_ = e.t.CancelCompaction(job)
}

// TestEvictionPicksColdest: with hits on some slices, eviction takes the
// cold ones from the ends of chains, hands them to the sink as one sorted
// run, and removes them; reads then miss (the store would ask the LSM).
func TestEvictionPicksColdest(t *testing.T) {
	e := newEnv(t, MinSliceSize, Options{BucketBits: 3, HighWatermark: 1, EvictionBatch: 3 * MinSliceSize, HeatHalfLife: time.Second})
	// One slice per bucket, all born together.
	var es []base.Entry
	for b := uint64(0); b < 8; b++ {
		es = append(es, kv(b<<61|1, "k", b+1, "v"))
	}
	e.install(t, es...)
	// Buckets 0..4 are read; 5, 6, 7 stay cold.
	for i := 0; i < 100; i++ {
		for b := uint64(0); b < 5; b++ {
			e.t.Get(b<<61|1, []byte("k"))
		}
	}
	e.clk.now += 10 * time.Second
	job, ok := e.t.PickEviction()
	if !ok || job.Slices() != 3 {
		t.Fatalf("PickEviction = %v slices, %v", job, ok)
	}
	sink := &lowerTier{}
	if err := job.Run(context.Background(), sink); err != nil {
		t.Fatal(err)
	}
	if err := e.t.InstallEviction(job); err != nil {
		t.Fatal(err)
	}
	var got []uint64
	for _, x := range sink.es {
		got = append(got, x.Order>>61)
	}
	if !slices.Equal(got, []uint64{5, 6, 7}) {
		t.Fatalf("evicted buckets %v, want the cold ones [5 6 7] in order", got)
	}
	for b := uint64(0); b < 8; b++ {
		_, st := e.t.Get(b<<61|1, []byte("k"))
		if want := map[bool]Status{true: Found, false: Absent}[b < 5]; st != want {
			t.Errorf("bucket %d: Get = %v, want %v", b, st, want)
		}
	}
	if st := e.t.Stats(); st.Evictions != 1 || st.EvictedSlices != 3 || st.Slices != 5 {
		t.Errorf("stats %+v", st)
	}
}

// TestEvictionOnlyFromChainEnds: a newer run never goes below an older one.
func TestEvictionOnlyFromChainEnds(t *testing.T) {
	e := newEnv(t, MinSliceSize, Options{BucketBits: -1, HighWatermark: 1, EvictionBatch: 1 << 20})
	e.install(t, kv(1, "a", 1, "old"))
	e.install(t, kv(1, "a", 2, "new"))
	job, ok := e.t.PickEviction()
	if !ok || job.Slices() != 1 {
		t.Fatalf("PickEviction: %v %v", job, ok)
	}
	sink := &lowerTier{fail: true}
	if err := job.Run(context.Background(), sink); err == nil {
		t.Fatal("the sink's error was lost")
	}
	if err := e.t.InstallEviction(job); !errors.Is(err, ErrJob) {
		t.Fatalf("installing a failed eviction: %v", err)
	}
	if err := e.t.CancelEviction(job); err != nil {
		t.Fatal(err)
	}
	job, _ = e.t.PickEviction()
	sink.fail = false
	if err := job.Run(context.Background(), sink); err != nil {
		t.Fatal(err)
	}
	if err := e.t.InstallEviction(job); err != nil {
		t.Fatal(err)
	}
	if len(sink.es) != 1 || string(sink.es[0].Value) != "old" {
		t.Fatalf("evicted %v, want the older run", sink.es)
	}
	if v, _ := e.t.Get(1, []byte("a")); string(v) != "new" {
		t.Fatalf("Get = %q", v)
	}
}

// TestBackgroundJobsRace runs compactions, evictions and builds on other
// goroutines while the owner reads, as the scheduler will (run with -race).
func TestBackgroundJobsRace(t *testing.T) {
	e := newEnv(t, MinSliceSize, Options{BucketBits: 2, CompactionThreshold: 2, HighWatermark: 1 << 30})
	r := rand.New(rand.NewPCG(9, 9))
	seq := uint64(0)
	batch := func() []base.Entry {
		var es []base.Entry
		for i := 0; i < 200; i++ {
			seq++
			es = append(es, kv(r.Uint64(), "k", seq, "value"))
		}
		sortEntries(es)
		return es
	}
	for i := 0; i < 6; i++ {
		e.install(t, batch()...)
	}
	job, ok := e.t.PickCompaction()
	if !ok {
		t.Fatal("no compaction")
	}
	next := batch()
	var wg sync.WaitGroup
	var built []*Slice
	var runErr, buildErr error
	wg.Add(2)
	go func() { defer wg.Done(); runErr = job.Run(context.Background()) }()
	go func() { defer wg.Done(); built, buildErr = e.t.Build(context.Background(), iterOf(next...)) }()
	for i := 0; i < 2000; i++ {
		e.t.Get(r.Uint64(), []byte("k"))
	}
	wg.Wait()
	if runErr != nil || buildErr != nil {
		t.Fatal(runErr, buildErr)
	}
	if err := e.t.InstallCompaction(job); err != nil {
		t.Fatal(err)
	}
	if err := e.t.Install(built); err != nil {
		t.Fatal(err)
	}
	for _, x := range next {
		if v, st := e.t.Get(x.Order, x.Key); st != Found || string(v) != "value" {
			t.Fatalf("Get after concurrent build: %v", st)
		}
	}
}

func TestMapIterInvalidated(t *testing.T) {
	e := newEnv(t, DefaultSliceSize, Options{BucketBits: -1, CompactionThreshold: 1})
	e.install(t, ment(1, "m", "a", 1, "x"), ment(1, "m", "b", 2, "y"))
	e.install(t, ment(1, "m", "c", 3, "z"))
	it := e.t.MapIter(1, []byte("m"))
	if !it.Next() {
		t.Fatal("empty")
	}
	compactAll(t, e.t)
	if it.Next() || !errors.Is(it.Err(), ErrInvalidated) {
		t.Fatalf("MapIter after an install: err %v", it.Err())
	}
}

func TestCloseWithPendingJobs(t *testing.T) {
	e := newEnv(t, DefaultSliceSize, Options{BucketBits: -1, CompactionThreshold: 1, HighWatermark: 1})
	e.install(t, kv(1, "a", 1, "x"))
	e.install(t, kv(2, "b", 2, "y"))
	e.install(t, kv(3, "c", 3, "z"))
	cj, _ := e.t.PickCompaction()
	if err := cj.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := e.t.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.t.InstallCompaction(cj); !errors.Is(err, base.ErrClosed) {
		t.Fatalf("install after close: %v", err)
	}
	if _, st := e.t.Get(1, []byte("a")); st != Absent {
		t.Fatalf("Get after close: %v", st)
	}
}
