package slice

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/memory"
)

// mapAll collects a MapIter into "uk=v" strings.
func mapAll(t *testing.T, tb *Table, order uint64, key string) ([]string, bool) {
	t.Helper()
	it := tb.MapIter(order, []byte(key))
	var out []string
	for it.Next() {
		out = append(out, string(it.UserKey())+"="+string(it.Value()))
	}
	if it.Err() != nil {
		t.Fatal(it.Err())
	}
	return out, it.Complete()
}

// TestSeqTieMapClear: an entry with the same sequence number as its map's
// clear is not older than it (entry invariant 4): MapGet, MapIter and
// compaction must agree.
func TestSeqTieMapClear(t *testing.T) {
	e := newEnv(t, DefaultSliceSize, Options{BucketBits: -1, CompactionThreshold: 1})
	e.install(t, ment(7, "m", "a", 1, "old"), ment(7, "m", "b", 2, "old"))
	e.install(t, tomb(7, "m", 5), ment(7, "m", "a", 5, "tie"), ment(7, "m", "c", 4, "hidden"))
	v, st := e.t.MapGet(7, []byte("m"), []byte("a"))
	it, _ := mapAll(t, e.t, 7, "m")
	t.Logf("MapGet(a) = %q %v; MapIter = %v", v, st, it)
	itHas := slices.Contains(it, "a=tie")
	if (st == Found) != itHas {
		t.Errorf("MapGet(a) = %v but MapIter has a: %v", st, itHas)
	}
	compactAll(t, e.t)
	v2, st2 := e.t.MapGet(7, []byte("m"), []byte("a"))
	if st2 != st || string(v2) != string(v) {
		t.Errorf("after compaction MapGet(a) = %q %v, before %q %v", v2, st2, v, st)
	}
}

// TestPrefixKeysSameOrder: keys that are prefixes of each other, the empty
// key and empty user keys, all on one order hash, across runs and slices.
func TestPrefixKeysSameOrder(t *testing.T) {
	for _, bs := range []int{MinSliceSize, DefaultSliceSize} {
		// LowerTier keeps the tombstones through compaction.
		e := newEnv(t, bs, Options{BucketBits: -1, CompactionThreshold: 1, LowerTier: true})
		const o = 42
		pad := strings.Repeat("p", 900)
		e.install(t, kv(o, "", 1, "empty"+pad), kv(o, "a", 2, "a"+pad), kv(o, "ab", 3, "ab"+pad),
			ment(o, "a\x00", "", 4, "mapempty"+pad), ment(o, "a\x00", "x", 5, "x"+pad),
			lapp(o, "abc", 6, "1"), kv(o, "b", 7, "b"+pad))
		e.install(t, tomb(o, "a", 8), lapp(o, "abc", 9, "2"), ment(o, "a\x00", "", 10, "mapempty2"),
			tomb(o, "a\x00", 9))
		check := func(stage string) {
			for k, want := range map[string]string{"": "empty" + pad, "ab": "ab" + pad, "b": "b" + pad} {
				if v, st := e.t.Get(o, []byte(k)); st != Found || string(v) != want {
					t.Errorf("%s bs=%d: Get(%q) = %.10q %v", stage, bs, k, v, st)
				}
			}
			if _, st := e.t.Get(o, []byte("a")); st != Deleted {
				t.Errorf("%s: Get(a) = %v", stage, st)
			}
			if _, st := e.t.Get(o, []byte("abcd")); st != Absent {
				t.Errorf("%s: Get(abcd) = %v", stage, st)
			}
			if l, _ := e.t.ListGet(o, []byte("abc"), nil); joined(l) != "1|2" && joined(l) != "12" {
				t.Errorf("%s: ListGet(abc) = %q", stage, joined(l))
			}
			if v, st := e.t.MapGet(o, []byte("a\x00"), nil); st != Found || string(v) != "mapempty2" {
				t.Errorf("%s: MapGet(a\\0, \"\") = %q %v", stage, v, st)
			}
			if _, st := e.t.MapGet(o, []byte("a\x00"), []byte("x")); st != Deleted {
				t.Errorf("%s: MapGet(a\\0, x) = %v", stage, st)
			}
			if got, c := mapAll(t, e.t, o, "a\x00"); !slices.Equal(got, []string{"=mapempty2"}) || !c {
				t.Errorf("%s: MapIter(a\\0) = %q complete %v", stage, got, c)
			}
		}
		check("before")
		compactAll(t, e.t)
		check("after")
	}
}

// countingBudget: a pool over a small budget.
func smallEnv(t *testing.T, limit int64, opts Options) (*env, func()) {
	t.Helper()
	b := memory.NewBudget(limit)
	p, err := memory.NewPool(b, memory.SegmentSize16M)
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewAllocator(p, MinSliceSize)
	if err != nil {
		t.Fatal(err)
	}
	clk := &clock{}
	opts.Allocator, opts.Now = a, clk.Now
	tb, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return &env{budget: b, pool: p, a: a, t: tb, clk: clk}, func() {
		_ = tb.Close()
		if st := a.Stats(); st.Blocks != 0 || st.Oversized != 0 {
			t.Errorf("leak after Close: %+v", st)
		}
		_ = p.Close()
	}
}

// TestBudgetExhaustion: Build and Compaction.Run that run out of budget
// fail with ErrMemoryBudget, leave the table as it was and leak nothing.
func TestBudgetExhaustion(t *testing.T) {
	e, done := smallEnv(t, memory.SegmentSize16M+64<<10, Options{BucketBits: 2, CompactionThreshold: 1})
	defer done()
	var seq uint64
	mk := func(n, vlen int) []base.Entry {
		var es []base.Entry
		for i := 0; i < n; i++ {
			seq++
			es = append(es, kv(uint64(i)*0x9e3779b97f4a7c15, "k", seq, strings.Repeat("v", vlen)))
		}
		sortEntries(es)
		return es
	}
	e.install(t, mk(100, 10)...)
	e.install(t, mk(100, 10)...)
	base := e.a.Stats()
	stBase := e.t.Stats()
	// An oversized entry over budget.
	seq++
	big := kv(5, "big", seq, strings.Repeat("B", 1<<20))
	if _, err := e.t.Build(context.Background(), iterOf(big)); !errors.Is(err, memory.ErrMemoryBudget) {
		t.Fatalf("oversized Build over budget: %v", err)
	}
	// Many blocks: more than one segment.
	if _, err := e.t.Build(context.Background(), iterOf(mk(20000, 3000)...)); !errors.Is(err, memory.ErrMemoryBudget) {
		t.Fatalf("Build over budget: %v", err)
	}
	if st := e.a.Stats(); st.Blocks != base.Blocks || st.Oversized != base.Oversized {
		t.Fatalf("Build leaked: %+v, baseline %+v", st, base)
	}
	// Fill the segment nearly, then compact: the compaction needs blocks.
	var held []*Slice
	for {
		out, err := e.t.Build(context.Background(), iterOf(kv(1, "fill", 1, "x")))
		if err != nil {
			break
		}
		held = append(held, out...)
	}
	job, ok := e.t.PickCompaction()
	if !ok {
		t.Fatal("no compaction")
	}
	if err := job.Run(context.Background()); !errors.Is(err, memory.ErrMemoryBudget) {
		t.Fatalf("compaction over budget: %v", err)
	}
	if err := e.t.InstallCompaction(job); !errors.Is(err, ErrJob) {
		t.Fatalf("install failed compaction: %v", err)
	}
	if err := e.t.CancelCompaction(job); err != nil {
		t.Fatal(err)
	}
	e.t.Release(held)
	if st := e.a.Stats(); st.Blocks != base.Blocks || st.Oversized != base.Oversized {
		t.Fatalf("Compaction leaked: %+v, baseline %+v", st, base)
	}
	if st := e.t.Stats(); st.Slices != stBase.Slices || st.Runs != stBase.Runs || st.Entries != stBase.Entries {
		t.Fatalf("table changed: %+v, was %+v", st, stBase)
	}
	compactAll(t, e.t)
}

// TestCompactionInstallInterleaving: a compaction picked, then a transform
// installed into the same bucket, then the compaction installed.
func TestCompactionInstallInterleaving(t *testing.T) {
	for _, lower := range []bool{false, true} {
		e := newEnv(t, DefaultSliceSize, Options{BucketBits: -1, CompactionThreshold: 1, LowerTier: lower})
		e.install(t, kv(1, "a", 1, "a1"), lapp(2, "l", 2, "x"), ment(3, "m", "u", 3, "u1"))
		e.install(t, tomb(1, "a", 4), lapp(2, "l", 5, "y"), tomb(3, "m", 6))
		job, ok := e.t.PickCompaction()
		if !ok {
			t.Fatal("no compaction")
		}
		e.install(t, kv(1, "a", 7, "a7"), lapp(2, "l", 8, "z"), ment(3, "m", "v", 9, "v9"))
		if err := job.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		e.install(t, lapp(2, "l", 10, "w"))
		if err := e.t.InstallCompaction(job); err != nil {
			t.Fatal(err)
		}
		if v, st := e.t.Get(1, []byte("a")); st != Found || string(v) != "a7" {
			t.Errorf("Get = %q %v", v, st)
		}
		if l, c := e.t.ListGet(2, []byte("l"), nil); joined(l) != "xy|z|w" || c != !lower {
			t.Errorf("lower=%v ListGet = %q %v", lower, joined(l), c)
		}
		if m, c := mapAll(t, e.t, 3, "m"); !slices.Equal(m, []string{"v=v9"}) || c != lower {
			t.Errorf("MapIter = %v %v", m, c)
		}
		// Another compaction now takes everything.
		for {
			j, ok := e.t.PickCompaction()
			if !ok {
				break
			}
			if err := j.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			if err := e.t.InstallCompaction(j); err != nil {
				t.Fatal(err)
			}
		}
		if l, c := e.t.ListGet(2, []byte("l"), nil); joined(l) != "xyzw" || c != !lower {
			t.Errorf("lower=%v ListGet after all = %q %v", lower, joined(l), c)
		}
	}
}

// TestCorruptEveryByte flips each byte of small slices: Decode errors or
// the slice reads back identically; never a panic.
func TestCorruptEveryByte(t *testing.T) {
	for _, b := range seedSlices(t) {
		good, err := Decode(aligned(b))
		if err != nil {
			t.Fatal(err)
		}
		var want []base.Entry
		for i := 0; i < good.Len(); i++ {
			var x base.Entry
			good.Entry(i, &x)
			want = append(want, x)
		}
		for off := range b {
			for _, bit := range []byte{1, 0x80, 0xff} {
				c := aligned(b)
				c[off] ^= bit
				s, err := Decode(c)
				if err != nil {
					if !errors.Is(err, base.ErrCorruption) {
						t.Fatalf("off %d: %v", off, err)
					}
					continue
				}
				if s.Len() != len(want) {
					t.Fatalf("off %d: accepted with %d entries", off, s.Len())
				}
				for i := range want {
					var x base.Entry
					s.Entry(i, &x)
					w := want[i]
					if x.Order != w.Order || x.Seq != w.Seq || x.Kind != w.Kind || string(x.Key) != string(w.Key) ||
						string(x.UserKey) != string(w.UserKey) || string(x.Value) != string(w.Value) {
						t.Fatalf("off %d bit %#x: accepted different entry %d", off, bit, i)
					}
				}
			}
		}
	}
}

// TestJobsInterleaved: a compaction of the newer runs and an eviction of
// the oldest run pending together, transforms installed in between, the
// eviction installed first (its run leaves the chain), then the
// compaction; reads stay correct through the lower tier.
func TestJobsInterleaved(t *testing.T) {
	e := newEnv(t, MinSliceSize, Options{BucketBits: -1, CompactionThreshold: 2, HighWatermark: 1, EvictionBatch: 1 << 30})
	pad := strings.Repeat("p", 300)
	// A map larger than a slice in the oldest run.
	var es []base.Entry
	for i := 0; i < 40; i++ {
		es = append(es, ment(9, "m", string(rune('A'+i)), uint64(i+1), "old"+pad))
	}
	es = append(es, kv(3, "a", 50, "a-old"), lapp(4, "l", 51, "x"))
	e.install(t, es...)
	e.install(t, tomb(9, "m", 60), ment(9, "m", "B", 61, "new"), tomb(3, "a", 62), lapp(4, "l", 63, "y"))
	e.install(t, ment(9, "m", "C", 70, "newer"), lapp(4, "l", 71, "z"))
	ev, ok := e.t.PickEviction()
	if !ok {
		t.Fatal("no eviction")
	}
	cj, ok := e.t.PickCompaction()
	if !ok || cj.Runs() != 2 {
		t.Fatalf("PickCompaction: %v %v", cj, ok)
	}
	e.install(t, lapp(4, "l", 80, "w"))
	sink := &lowerTier{}
	if err := ev.Run(context.Background(), sink); err != nil {
		t.Fatal(err)
	}
	if err := cj.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := e.t.InstallEviction(ev); err != nil {
		t.Fatal(err)
	}
	if err := e.t.InstallCompaction(cj); err != nil {
		t.Fatal(err)
	}
	if _, st := e.t.Get(3, []byte("a")); st != Deleted {
		t.Errorf("Get(a) = %v, want the tombstone kept over the evicted value", st)
	}
	if l, c := e.t.ListGet(4, []byte("l"), nil); c || joined(l) != "yz|w" {
		t.Errorf("ListGet = %q %v", joined(l), c)
	}
	if m, c := mapAll(t, e.t, 9, "m"); !slices.Equal(m, []string{"B=new", "C=newer"}) || !c {
		t.Errorf("MapIter = %q %v", m, c)
	}
	if _, st := e.t.MapGet(9, []byte("m"), []byte("A")); st != Deleted {
		t.Errorf("MapGet(A) = %v, want Deleted by the clear", st)
	}
	if len(sink.es) != 42 {
		t.Errorf("sink got %d entries", len(sink.es))
	}
}

// TestCloseCancelPaths: jobs pending at Close (not run, run, failed) end
// without leaks, and a Run after Close still reads live memory.
func TestCloseCancelPaths(t *testing.T) {
	for variant := 0; variant < 4; variant++ {
		e := newEnv(t, MinSliceSize, Options{BucketBits: -1, CompactionThreshold: 1, HighWatermark: 1, EvictionBatch: 1})
		big := strings.Repeat("B", 10000)
		e.install(t, kv(1, "a", 1, big), kv(2, "b", 2, "x"))
		e.install(t, kv(1, "a", 3, big), kv(5, "c", 4, "y"))
		e.install(t, kv(1, "a", 5, "small"), kv(7, "d", 6, big))
		ev, ok := e.t.PickEviction()
		if !ok {
			t.Fatal("no eviction")
		}
		cj, ok := e.t.PickCompaction()
		if !ok {
			t.Fatal("no compaction")
		}
		if variant&1 == 1 {
			if err := cj.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			if err := ev.Run(context.Background(), &lowerTier{}); err != nil {
				t.Fatal(err)
			}
		}
		if err := e.t.Close(); err != nil {
			t.Fatal(err)
		}
		if variant&1 == 0 {
			// Background jobs still running when the owner closed.
			if err := cj.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			if err := ev.Run(context.Background(), &lowerTier{}); err != nil {
				t.Fatal(err)
			}
		}
		if variant&2 == 0 {
			if err := e.t.InstallCompaction(cj); !errors.Is(err, base.ErrClosed) {
				t.Fatalf("InstallCompaction after Close: %v", err)
			}
			if err := e.t.InstallEviction(ev); !errors.Is(err, base.ErrClosed) {
				t.Fatalf("InstallEviction after Close: %v", err)
			}
		} else {
			if err := e.t.CancelCompaction(cj); err != nil {
				t.Fatal(err)
			}
			if err := e.t.CancelEviction(ev); err != nil {
				t.Fatal(err)
			}
		}
		if st := e.a.Stats(); st.Blocks != 0 || st.Oversized != 0 {
			t.Fatalf("variant %d: leak %+v", variant, st)
		}
	}
}

// TestDecodeCraftedRecords: CRC-valid slices of two records whose offsets,
// varints or key references lie — overlapping records, a key length
// running past the record's end (or, read as an int on a 32-bit host,
// negative), overlong or truncated varints, a key reference to no record,
// to the wrong offset or before the slice, an inline key that should have
// been a reference. Decode must refuse each on every architecture, and
// accept the well-formed controls.
func TestDecodeCraftedRecords(t *testing.T) {
	kv := func(key string, seq byte) []byte { // kind, klen, key, seq, value "v"
		return append(append([]byte{byte(base.KindValue), byte(len(key))}, key...), seq, 'v')
	}
	for _, tc := range []struct {
		name   string
		r0, r1 []byte
		off1   int // offset of record 1 from record 0; -1: after r0
		ok     bool
	}{
		{"control", kv("a", 2), kv("b", 1), -1, true},
		{"overlap", kv("a", 2), kv("b", 1), 2, false},
		{"same offset", kv("a", 2), kv("b", 1), 0, false},
		{"key past end", []byte{byte(base.KindValue), 30, 'a', 2}, kv("b", 1), -1, false},
		{"negative key length", []byte{byte(base.KindValue), 0xe2, 0xff, 0xff, 0xff, 0x0f, 'a', 2}, kv("b", 1), -1, false},
		{"overlong key length", []byte{byte(base.KindValue), 0x81, 0x00, 'a', 2}, kv("b", 1), -1, false},
		{"overlong seq", []byte{byte(base.KindValue), 1, 'a', 0x82, 0x00}, kv("b", 1), -1, false},
		{"truncated seq", []byte{byte(base.KindValue), 1, 'a', 0x82}, kv("b", 1), -1, false},
		{"no seq", []byte{byte(base.KindValue), 2, 'a', 'a'}, kv("b", 1), -1, false},
		{"bad kind", []byte{0, 1, 'a', 2}, kv("b", 1), -1, false},
		{"key reference", kv("a", 2), []byte{byte(base.KindValue) | kindKeyRef, 5, 1, 'w'}, -1, true},
		{"reference first", []byte{byte(base.KindValue) | kindKeyRef, 1, 2}, kv("b", 1), -1, false},
		{"reference off by one", kv("a", 2), []byte{byte(base.KindValue) | kindKeyRef, 4, 1, 'w'}, -1, false},
		{"reference past start", kv("a", 2), []byte{byte(base.KindValue) | kindKeyRef, 0xff, 0x7f, 1, 'w'}, -1, false},
		{"repeated inline key", kv("a", 2), kv("a", 1), -1, false},
	} {
		const n = 2
		off0 := headerSize + (fpSize+offSize)*n
		off1 := off0 + len(tc.r0)
		if tc.off1 >= 0 {
			off1 = off0 + tc.off1
		}
		size := off0 + len(tc.r0) + len(tc.r1)
		b := make([]byte, size)
		le := binary.LittleEndian
		le.PutUint32(b[hdrMagic:], sliceMagic)
		le.PutUint16(b[hdrVersion:], formatVersion)
		b[hdrCsum] = csumCRC32C
		le.PutUint32(b[hdrSize:], uint32(size))
		le.PutUint32(b[hdrCount:], n)
		le.PutUint64(b[hdrMinOrd:], 1)
		le.PutUint64(b[hdrMaxOrd:], 2)
		le.PutUint64(b[hdrMinSeq:], 1)
		le.PutUint64(b[hdrMaxSeq:], 2)
		le.PutUint64(b[headerSize:], 1)
		le.PutUint64(b[headerSize+fpSize:], 2)
		le.PutUint32(b[headerSize+fpSize*n:], uint32(off0))
		le.PutUint32(b[headerSize+fpSize*n+offSize:], uint32(off1))
		copy(b[off0:], tc.r0)
		copy(b[off0+len(tc.r0):], tc.r1)
		le.PutUint32(b[hdrCRC:], checksum(b))
		s, err := Decode(aligned(b))
		if tc.ok {
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			continue
		}
		if err == nil {
			var e base.Entry
			for i := 0; i < s.Len(); i++ {
				s.Entry(i, &e)
			}
			t.Fatalf("%s: Decode accepted it", tc.name)
		}
		if !errors.Is(err, base.ErrCorruption) {
			t.Fatalf("%s: %v", tc.name, err)
		}
	}
}

// TestEvictionUnitsAtBucketEdges: a map at the last order hash of a bucket
// spanning slices, next to a key at the first order hash of the next
// bucket; with a tiny batch each eviction takes whole units only.
func TestEvictionUnitsAtBucketEdges(t *testing.T) {
	e := newEnv(t, MinSliceSize, Options{BucketBits: 3, HighWatermark: 1, EvictionBatch: 1})
	pad := strings.Repeat("q", 700)
	var es []base.Entry
	for b := uint64(1); b < 8; b++ {
		edge := b << 61
		for i := 0; i < 12; i++ {
			es = append(es, ment(edge-1, "m", string(rune('a'+i)), uint64(b*100)+uint64(i), pad))
		}
		es = append(es, kv(edge, "k", b*100+50, "first"), kv(edge-2, "j", b*100+51, "before"))
	}
	e.install(t, es...)
	sink := &lowerTier{}
	for round := 0; ; round++ {
		job, ok := e.t.PickEviction()
		if !ok {
			break
		}
		if err := job.Run(context.Background(), sink); err != nil {
			t.Fatal(err)
		}
		if err := e.t.InstallEviction(job); err != nil {
			t.Fatal(err)
		}
		// Every map is wholly in the table or wholly in the sink.
		for b := uint64(1); b < 8; b++ {
			it := e.t.MapIter(b<<61-1, []byte("m"))
			n := 0
			for it.Next() {
				n++
			}
			low := 0
			for _, x := range sink.es {
				if x.Order == b<<61-1 {
					low++
				}
			}
			if n+low != 12 || n != 0 && low != 0 {
				t.Fatalf("round %d bucket edge %d: %d map entries in the table, %d below", round, b, n, low)
			}
		}
	}
	if st := e.t.Stats(); st.Slices != 0 || len(sink.es) != 7*14 {
		t.Fatalf("after evicting everything: %+v, sink %d", st, len(sink.es))
	}
}

// TestMaxListMergeCapped: a resolved list is one value, so MaxListMerge
// never lets compaction build one Build refuses.
func TestMaxListMergeCapped(t *testing.T) {
	e := newEnv(t, MinSliceSize, Options{MaxListMerge: math.MaxInt})
	if e.t.opts.MaxListMerge > MaxValueSize {
		t.Fatalf("MaxListMerge %d above MaxValueSize", e.t.opts.MaxListMerge)
	}
}

// TestListOpsExhaustive: every sequence of up to 5 list writes (append,
// base, clear), split into runs in every way, with batches that make the
// versions span slices; reads before and after compaction (with and
// without a lower tier, with a list-merge cap that resolves and one that
// does not) must give the list the writes make.
func TestListOpsExhaustive(t *testing.T) {
	for _, cfg := range []struct {
		lower bool
		merge int
	}{{false, 1 << 20}, {true, 1 << 20}, {false, 2500}, {true, 2500}} {
		e := newEnv(t, MinSliceSize, Options{BucketBits: 16, CompactionThreshold: 1, LowerTier: cfg.lower, MaxListMerge: cfg.merge})
		type tcase struct {
			order uint64
			want  string
		}
		var cases []tcase
		caseNo := uint64(0)
		seqs := map[uint64]uint64{}
		maxN := 5
		if testing.Short() {
			maxN = 3
		}
		for n := 1; n <= maxN; n++ {
			total := 1
			for i := 0; i < n; i++ {
				total *= 3
			}
			for code := 0; code < total; code++ {
				for split := 0; split < 1<<(n-1); split++ {
					caseNo++
					order := caseNo << 48
					var runs [][]base.Entry
					var cur []base.Entry
					want := ""
					c := code
					for i := 0; i < n; i++ {
						op := c % 3
						c /= 3
						seqs[order]++
						seq := seqs[order]
						el := string(rune('a'+i)) + strings.Repeat(string(rune('a'+i)), (i%2)*1500)
						switch op {
						case 0:
							cur = append(cur, lapp(order, "L", seq, el))
							want += el
						case 1:
							cur = append(cur, lbase(order, "L", seq, el))
							want = el
						case 2:
							cur = append(cur, tomb(order, "L", seq))
							want = ""
						}
						if split>>i&1 == 1 || i == n-1 {
							runs = append(runs, cur)
							cur = nil
						}
					}
					for _, r := range runs {
						e.install(t, r...)
					}
					cases = append(cases, tcase{order, want})
				}
			}
		}
		check := func(stage string) {
			for _, c := range cases {
				l, _ := e.t.ListGet(c.order, []byte("L"), nil)
				if got := string(bytesJoin(l)); got != c.want {
					t.Fatalf("%+v %s: case %d: ListGet = %.20q, want %.20q", cfg, stage, c.order>>48, got, c.want)
				}
			}
		}
		check("before")
		for {
			job, ok := e.t.PickCompaction()
			if !ok {
				break
			}
			if err := job.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			if err := e.t.InstallCompaction(job); err != nil {
				t.Fatal(err)
			}
		}
		check("after")
		if st := e.t.Stats(); st.MaxChain > 1 {
			t.Fatalf("chains not compacted: %+v", st)
		}
		_ = e.t.Close()
	}
}

// TestMapOpsExhaustive: every sequence of up to 4 map writes (put or
// remove of user key "" — which sorts with the map's clears — or "x", and
// clear), split into runs in every way; MapGet and MapIter before and
// after compaction, with and without a lower tier.
func TestMapOpsExhaustive(t *testing.T) {
	for _, lower := range []bool{false, true} {
		e := newEnv(t, MinSliceSize, Options{BucketBits: 16, CompactionThreshold: 1, LowerTier: lower})
		type tcase struct {
			order uint64
			want  map[string]string
			ops   string
		}
		var cases []tcase
		caseNo := uint64(0)
		maxN := 4
		if testing.Short() {
			maxN = 3
		}
		for n := 1; n <= maxN; n++ {
			total := 1
			for i := 0; i < n; i++ {
				total *= 5
			}
			for code := 0; code < total; code++ {
				for split := 0; split < 1<<(n-1); split++ {
					caseNo++
					order := caseNo << 48
					var runs [][]base.Entry
					var cur []base.Entry
					want := map[string]string{}
					ops := ""
					c := code
					for i := 0; i < n; i++ {
						op := c % 5
						c /= 5
						seq := uint64(i + 1)
						v := string(rune('a'+i)) + strings.Repeat("p", (i%2)*1500)
						switch op {
						case 0, 1:
							uk := []string{"", "x"}[op]
							cur = append(cur, ment(order, "M", uk, seq, v))
							want[uk] = v
						case 2, 3:
							uk := []string{"", "x"}[op-2]
							cur = append(cur, mtomb(order, "M", uk, seq))
							delete(want, uk)
						case 4:
							cur = append(cur, tomb(order, "M", seq))
							clear(want)
						}
						ops += string("PpDdC"[op])
						if split>>i&1 == 1 || i == n-1 {
							runs = append(runs, cur)
							cur = nil
							ops += "|"
						}
					}
					for _, r := range runs {
						e.install(t, r...)
					}
					cases = append(cases, tcase{order, want, ops})
				}
			}
		}
		check := func(stage string) {
			for _, c := range cases {
				for _, uk := range []string{"", "x"} {
					v, st := e.t.MapGet(c.order, []byte("M"), []byte(uk))
					w, ok := c.want[uk]
					if (st == Found) != ok || string(v) != w {
						t.Fatalf("lower=%v %s: ops %s: MapGet(%q) = %.10q %v, want %.10q %v", lower, stage, c.ops, uk, v, st, w, ok)
					}
				}
				got, _ := mapAll(t, e.t, c.order, "M")
				var want []string
				for _, uk := range []string{"", "x"} {
					if w, ok := c.want[uk]; ok {
						want = append(want, uk+"="+w)
					}
				}
				if !slices.Equal(got, want) {
					t.Fatalf("lower=%v %s: ops %s: MapIter = %.30q, want %.30q", lower, stage, c.ops, got, want)
				}
			}
		}
		check("before")
		for {
			job, ok := e.t.PickCompaction()
			if !ok {
				break
			}
			if err := job.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			if err := e.t.InstallCompaction(job); err != nil {
				t.Fatal(err)
			}
		}
		check("after")
		_ = e.t.Close()
	}
}
