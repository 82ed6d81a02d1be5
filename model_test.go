package strata

import (
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/strata-db/strata/internal/engine"
	"github.com/strata-db/strata/internal/engine/enginetest"
)

var modelSeed = flag.Int64("seed", 0, "TestModel: seed to replay (0 = time-based)")

// TestModel drives every state kind with random operations and compares every read with a
// plain Go map model, while the tiers move the data underneath: between operations it seals
// the active segment (its transform into slices runs in the background and is installed at a
// later write), waits for and installs background work, and evicts slices to an in-memory
// lower tier, so reads cross the FreshTable, the SliceTable (with compactions: 4 buckets make
// chains long) and the lower tier. It logs its seed; replay a failure with
// go test -run TestModel -seed N.
func TestModel(t *testing.T) {
	seed := *modelSeed
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	t.Logf("seed %d (replay: go test -run TestModel -seed %d)", seed, seed)
	ops := 200000
	if testing.Short() {
		ops = 6000
	}
	bgEvery := 60 // mean ops between background events
	rng := rand.New(rand.NewPCG(uint64(seed), uint64(seed)>>1|1))
	low := enginetest.NewMemLower()
	s, err := open("", Options{MaxParallelism: 64, MemoryBudget: 1 << 30, SegmentSize: 16 << 20, BackgroundWorkers: 2},
		func(o *engine.Options) {
			// A row cache of 8 sets: values read from the lower tier replace each other often.
			o.Lower, o.LowWater, o.EvictionBatch, o.BucketBits, o.RowCacheSize = low, 1, 16<<10, 2, 4<<10
		})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	m := newModelRun(t, s, rng, seed)
	next := rng.IntN(bgEvery)
	var events [5]int
	for i := range ops {
		if i == next {
			next += 1 + rng.IntN(2*bgEvery)
			m.background(i, &events)
		}
		m.step(i)
		if i%10000 == 9999 {
			m.checkAll(i)
		}
	}
	m.checkAll(ops)
	if err := s.e.Drain(); err != nil {
		t.Fatalf("seed %d: drain: %v", seed, err)
	}
	m.checkAll(ops)
	st := s.Stats()
	t.Logf("seed %d: %d ops, background events (seal, seal+drain, drain, evict, evict+drain) %v, stats %+v",
		seed, ops, events, st)
	if st.Transforms == 0 || st.Compactions == 0 || st.Evictions == 0 || low.Entries == 0 {
		t.Errorf("seed %d: the run did not exercise every tier: %d transforms, %d compactions, %d evictions",
			seed, st.Transforms, st.Compactions, st.Evictions)
	}
	if st.RowCacheHits == 0 || st.RowCacheMisses == 0 {
		t.Errorf("seed %d: the run did not exercise the row cache: %d hits, %d misses", seed, st.RowCacheHits, st.RowCacheMisses)
	}
}

// background makes the tiers move: seals (transform queued), drains (wait and install
// everything), evictions to the lower tier.
func (m *modelRun) background(op int, events *[5]int) {
	t := m.s.e
	r := m.rng.IntN(100)
	switch {
	case r < 40:
		events[0]++
		if err := m.s.seal(); err != nil {
			m.fatalf(op, "seal: %v", err)
		}
	case r < 60:
		events[1]++
		if err := m.s.seal(); err != nil {
			m.fatalf(op, "seal: %v", err)
		}
		if err := t.Drain(); err != nil {
			m.fatalf(op, "drain: %v", err)
		}
	case r < 70:
		events[2]++
		if err := t.Drain(); err != nil {
			m.fatalf(op, "drain: %v", err)
		}
	case r < 85:
		events[3]++
		t.EvictNow()
	default:
		events[4]++
		t.EvictNow()
		if err := t.Drain(); err != nil {
			m.fatalf(op, "drain: %v", err)
		}
	}
}

type modelRun struct {
	t    *testing.T
	s    *Store
	rng  *rand.Rand
	seed int64

	keys []string
	nss  []string

	val *ValueState[[]byte]
	lst *ListState[string]
	mp  *MapState[string, int64]
	red *ReducingState[int64]
	agg *AggregatingState[int64, avgAcc, float64]

	modelState

	// tolerant: a failure panics with modelStop instead of failing the test (crash runs,
	// where operations fail once the file system has crashed).
	tolerant bool
}

// modelState is the model: what every read must return.
type modelState struct {
	mVal map[[2]string][]byte
	mLst map[[2]string][]string
	mMap map[[2]string]map[string]int64
	mRed map[[2]string]int64
	mAgg map[[2]string]avgAcc
}

// clone returns a deep copy (the model as of a persistence point).
func (ms modelState) clone() modelState {
	c := modelState{mVal: map[[2]string][]byte{}, mLst: map[[2]string][]string{},
		mMap: map[[2]string]map[string]int64{}, mRed: maps.Clone(ms.mRed), mAgg: maps.Clone(ms.mAgg)}
	for k, v := range ms.mVal {
		c.mVal[k] = slices.Clone(v)
	}
	for k, v := range ms.mLst {
		c.mLst[k] = slices.Clone(v)
	}
	for k, v := range ms.mMap {
		c.mMap[k] = maps.Clone(v)
	}
	return c
}

// modelStop is the panic of a tolerant modelRun's failure.
type modelStop struct{ msg string }

// attach registers the model's states on s (a reopened Store).
func (m *modelRun) attach(s *Store) {
	m.s = s
	m.val = must(NewValueState(s, ValueDescriptor[[]byte]{Name: "val", Codec: Bytes}))
	m.lst = must(NewListState(s, ListDescriptor[string]{Name: "lst", Codec: String}))
	m.mp = must(NewMapState(s, MapDescriptor[string, int64]{Name: "map", KeyCodec: String, ValueCodec: Int64}))
	m.red = must(NewReducingState(s, ReducingDescriptor[int64]{Name: "red", Codec: Int64, Reduce: func(a, b int64) int64 { return a*3 + b }}))
	m.agg = must(NewAggregatingState(s, avgDescriptor("agg")))
}

func newModelRun(t *testing.T, s *Store, rng *rand.Rand, seed int64) *modelRun {
	m := &modelRun{t: t, s: s, rng: rng, seed: seed, modelState: modelState{
		mVal: map[[2]string][]byte{}, mLst: map[[2]string][]string{}, mMap: map[[2]string]map[string]int64{},
		mRed: map[[2]string]int64{}, mAgg: map[[2]string]avgAcc{},
	}}
	for i := range 40 {
		m.keys = append(m.keys, fmt.Sprintf("key-%d", i*7919))
	}
	m.nss = []string{"", "w1", "w2", "window-3"}
	m.attach(s)
	return m
}

func (m *modelRun) fatalf(op int, format string, args ...any) {
	m.t.Helper()
	if m.tolerant {
		panic(modelStop{fmt.Sprintf("seed %d op %d: %s", m.seed, op, fmt.Sprintf(format, args...))})
	}
	m.t.Fatalf("seed %d op %d: %s", m.seed, op, fmt.Sprintf(format, args...))
}

func (m *modelRun) pick() ([2]string, Key) {
	kn := [2]string{m.keys[m.rng.IntN(len(m.keys))], m.nss[m.rng.IntN(len(m.nss))]}
	return kn, m.key(kn)
}

func (m *modelRun) key(kn [2]string) Key { return m.s.Key([]byte(kn[0])).In([]byte(kn[1])) }

func (m *modelRun) randBytes() []byte {
	b := make([]byte, m.rng.IntN(48))
	for i := range b {
		b[i] = byte(m.rng.IntN(256))
	}
	return b
}

func (m *modelRun) randStr() string { return fmt.Sprint(m.rng.IntN(1000)) }

// sources picks merge sources among the namespaces (may include the target and repeats).
func (m *modelRun) sources() [][]byte {
	var out [][]byte
	for range 1 + m.rng.IntN(3) {
		out = append(out, []byte(m.nss[m.rng.IntN(len(m.nss))]))
	}
	return out
}

func dedupSources(target []byte, srcs [][]byte) []string {
	var out []string
	for _, s := range srcs {
		if string(s) != string(target) && !slices.Contains(out, string(s)) {
			out = append(out, string(s))
		}
	}
	return out
}

func (m *modelRun) step(op int) {
	kn, k := m.pick()
	ok := func(err error) {
		m.t.Helper()
		if err != nil {
			m.fatalf(op, "%v", err)
		}
	}
	switch r := m.rng.IntN(100); {
	// value
	case r < 12:
		v := m.randBytes()
		ok(m.val.Put(k, v))
		m.mVal[kn] = v
	case r < 18:
		m.checkVal(op, kn)
	case r < 20:
		ok(m.val.Clear(k))
		delete(m.mVal, kn)
	// list
	case r < 28:
		x := m.randStr()
		ok(m.lst.Add(k, x))
		m.mLst[kn] = append(m.mLst[kn], x)
	case r < 31:
		xs := make([]string, m.rng.IntN(4))
		for i := range xs {
			xs[i] = m.randStr()
		}
		ok(m.lst.AddAll(k, xs))
		if len(xs) > 0 {
			m.mLst[kn] = append(m.mLst[kn], xs...)
		}
	case r < 34:
		xs := make([]string, m.rng.IntN(3))
		for i := range xs {
			xs[i] = m.randStr()
		}
		ok(m.lst.Update(k, xs))
		if len(xs) == 0 {
			delete(m.mLst, kn)
		} else {
			m.mLst[kn] = slices.Clone(xs)
		}
	case r < 38:
		m.checkList(op, kn)
	case r < 39:
		ok(m.lst.Clear(k))
		delete(m.mLst, kn)
	case r < 41:
		target, srcs := []byte(kn[1]), m.sources()
		ok(m.lst.MergeNamespaces(m.s.Key([]byte(kn[0])), target, srcs...))
		for _, src := range dedupSources(target, srcs) {
			skn := [2]string{kn[0], src}
			if l, found := m.mLst[skn]; found {
				m.mLst[kn] = append(m.mLst[kn], l...)
				delete(m.mLst, skn)
			}
		}
	// map
	case r < 50:
		uk, uv := m.randStr()[:1], m.rng.Int64N(1000)-500
		ok(m.mp.Put(k, uk, uv))
		if m.mMap[kn] == nil {
			m.mMap[kn] = map[string]int64{}
		}
		m.mMap[kn][uk] = uv
	case r < 55:
		uk := m.randStr()[:1]
		got, found, err := m.mp.Get(k, uk)
		want, wantFound := m.mMap[kn][uk]
		if err != nil || got != want || found != wantFound {
			m.fatalf(op, "map %v Get(%q) = %d %v %v, want %d %v", kn, uk, got, found, err, want, wantFound)
		}
		c, err := m.mp.Contains(k, uk)
		if err != nil || c != wantFound {
			m.fatalf(op, "map %v Contains(%q) = %v %v", kn, uk, c, err)
		}
	case r < 58:
		uk := m.randStr()[:1]
		ok(m.mp.Remove(k, uk))
		delete(m.mMap[kn], uk)
		if len(m.mMap[kn]) == 0 {
			delete(m.mMap, kn)
		}
	case r < 61:
		m.checkMap(op, kn)
	case r < 63:
		// Iterate, removing some entries and updating others in place.
		it := m.mp.Iterator(k)
		seen := map[string]bool{}
		for it.Next() {
			uk, uv := it.Key(), it.Value()
			if seen[uk] {
				m.fatalf(op, "map %v: %q iterated twice", kn, uk)
			}
			seen[uk] = true
			if want, found := m.mMap[kn][uk]; !found || want != uv {
				m.fatalf(op, "map %v iterator: %q=%d, model %d %v", kn, uk, uv, want, found)
			}
			switch m.rng.IntN(3) {
			case 0:
				ok(it.Remove())
				delete(m.mMap[kn], uk)
			case 1:
				ok(m.mp.Put(k, uk, uv+1))
				m.mMap[kn][uk] = uv + 1
			}
		}
		if err := it.Err(); errors.Is(err, ErrIteratorInvalidated) {
			// Documented: an iteration whose writes outlast the install hold-back (a writer
			// needed memory) ends early instead of yielding stale entries. What it did
			// write is in the model, and every later check still compares the whole map.
		} else {
			ok(err)
			if len(seen) != len(m.mMap[kn]) && len(seen) != len(m.mMap[kn])+countRemoved(seen, m.mMap[kn]) {
				m.fatalf(op, "map %v iterated %d entries", kn, len(seen))
			}
		}
		if len(m.mMap[kn]) == 0 {
			delete(m.mMap, kn)
		}
	case r < 64:
		ok(m.mp.Clear(k))
		delete(m.mMap, kn)
	case r < 66:
		add := map[string]int64{m.randStr()[:1]: 1, m.randStr()[:1]: 2}
		ok(m.mp.PutAll(k, maps.All(add)))
		if m.mMap[kn] == nil {
			m.mMap[kn] = map[string]int64{}
		}
		maps.Copy(m.mMap[kn], add)
	// reducing
	case r < 74:
		x := m.rng.Int64N(100)
		ok(m.red.Add(k, x))
		if old, found := m.mRed[kn]; found {
			m.mRed[kn] = old*3 + x
		} else {
			m.mRed[kn] = x
		}
	case r < 77:
		m.checkRed(op, kn)
	case r < 78:
		ok(m.red.Clear(k))
		delete(m.mRed, kn)
	case r < 80:
		target, srcs := []byte(kn[1]), m.sources()
		ok(m.red.MergeNamespaces(m.s.Key([]byte(kn[0])), target, srcs...))
		var merged int64
		have := false
		for _, src := range srcs {
			skn := [2]string{kn[0], string(src)}
			if string(src) == string(target) {
				continue
			}
			v, found := m.mRed[skn]
			if !found {
				continue
			}
			delete(m.mRed, skn)
			if have {
				merged = merged*3 + v
			} else {
				merged, have = v, true
			}
		}
		if have {
			if old, found := m.mRed[kn]; found {
				m.mRed[kn] = old*3 + merged
			} else {
				m.mRed[kn] = merged
			}
		}
	// aggregating
	case r < 88:
		x := m.rng.Int64N(100)
		ok(m.agg.Add(k, x))
		a := m.mAgg[kn]
		m.mAgg[kn] = avgAcc{a.sum + x, a.n + 1}
	case r < 92:
		m.checkAgg(op, kn)
	case r < 93:
		ok(m.agg.Clear(k))
		delete(m.mAgg, kn)
	case r < 96:
		target, srcs := []byte(kn[1]), m.sources()
		ok(m.agg.MergeNamespaces(m.s.Key([]byte(kn[0])), target, srcs...))
		var merged avgAcc
		have := false
		for _, src := range dedupSources(target, srcs) {
			skn := [2]string{kn[0], src}
			if a, found := m.mAgg[skn]; found {
				merged = avgAcc{merged.sum + a.sum, merged.n + a.n}
				have = true
				delete(m.mAgg, skn)
			}
		}
		if have {
			a := m.mAgg[kn]
			m.mAgg[kn] = avgAcc{a.sum + merged.sum, a.n + merged.n}
		}
	default:
		m.checkVal(op, kn)
		m.checkList(op, kn)
		m.checkMap(op, kn)
	}
}

func countRemoved(seen map[string]bool, now map[string]int64) int {
	n := 0
	for k := range seen {
		if _, ok := now[k]; !ok {
			n++
		}
	}
	return n
}

func (m *modelRun) checkVal(op int, kn [2]string) {
	got, found, err := m.val.Get(m.key(kn))
	want, wantFound := m.mVal[kn]
	if err != nil || found != wantFound || string(got) != string(want) {
		m.fatalf(op, "value %v = %x %v %v, want %x %v", kn, got, found, err, want, wantFound)
	}
}

func (m *modelRun) checkList(op int, kn [2]string) {
	it := m.lst.Get(m.key(kn))
	var got []string
	for it.Next() {
		got = append(got, it.Value())
	}
	if err := it.Err(); err != nil || !slices.Equal(got, m.mLst[kn]) {
		m.fatalf(op, "list %v = %q %v, want %q", kn, got, err, m.mLst[kn])
	}
}

func (m *modelRun) checkMap(op int, kn [2]string) {
	k := m.key(kn)
	seq, errf := m.mp.Entries(k)
	got := maps.Collect(seq)
	if err := errf(); err != nil {
		m.fatalf(op, "map %v: %v", kn, err)
	}
	want := m.mMap[kn]
	if len(got) != len(want) || !maps.Equal(got, want) && len(want) > 0 {
		m.fatalf(op, "map %v = %v, want %v", kn, got, want)
	}
	e, err := m.mp.IsEmpty(k)
	if err != nil || e != (len(want) == 0) {
		m.fatalf(op, "map %v IsEmpty = %v %v, want %v", kn, e, err, len(want) == 0)
	}
}

func (m *modelRun) checkRed(op int, kn [2]string) {
	got, found, err := m.red.Get(m.key(kn))
	want, wantFound := m.mRed[kn]
	if err != nil || found != wantFound || got != want {
		m.fatalf(op, "reducing %v = %d %v %v, want %d %v", kn, got, found, err, want, wantFound)
	}
}

func (m *modelRun) checkAgg(op int, kn [2]string) {
	got, found, err := m.agg.Get(m.key(kn))
	a, wantFound := m.mAgg[kn]
	var want float64
	if wantFound {
		want = float64(a.sum) / float64(a.n)
	}
	if err != nil || found != wantFound || got != want {
		m.fatalf(op, "aggregating %v = %v %v %v, want %v %v", kn, got, found, err, want, wantFound)
	}
}

func (m *modelRun) checkAll(op int) {
	for _, key := range m.keys {
		for _, ns := range m.nss {
			kn := [2]string{key, ns}
			m.checkVal(op, kn)
			m.checkList(op, kn)
			m.checkMap(op, kn)
			m.checkRed(op, kn)
			m.checkAgg(op, kn)
		}
	}
}
