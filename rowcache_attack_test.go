package strata

// Attacks on the row cache (rowcache.go), the lower reader's arena (lower.go) and
// Store.WaitBackground: a random model over value, reducing and aggregating state whose every
// read is compared with a Go model while the data is pushed down into the LsmStore (MemFS) so
// that reads go through a tiny row cache (one set: every key collides), with keys and values
// straddling the 120-byte slot limit, empty values, namespaces and merges, failed writes,
// reopens and crashes; after every few operations the cache's contents are checked directly
// against the model (a stale or resurrected entry fails even before it is read). Plus: values
// and list iterators handed out stay intact over many later reads until the next write, the
// write-through refresh and its limits in targeted scenarios, and the memory accounting of the
// row cache (shared budgets, Open failures, page rounding).

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/internal/engine"
	"github.com/strata-db/strata/internal/vfs"
	"github.com/strata-db/strata/memory"
)

type rcaKN = [2]string

// rcaModel is what every read must return.
type rcaModel struct {
	val map[rcaKN][]byte
	str map[rcaKN]string
	red map[rcaKN]int64
	agg map[rcaKN]avgAcc
	lst map[rcaKN][]string
}

func newRCAModel() rcaModel {
	return rcaModel{val: map[rcaKN][]byte{}, str: map[rcaKN]string{}, red: map[rcaKN]int64{},
		agg: map[rcaKN]avgAcc{}, lst: map[rcaKN][]string{}}
}

func (m rcaModel) clone() rcaModel {
	c := rcaModel{val: map[rcaKN][]byte{}, str: maps.Clone(m.str), red: maps.Clone(m.red),
		agg: maps.Clone(m.agg), lst: map[rcaKN][]string{}}
	for k, v := range m.val {
		c.val[k] = slices.Clone(v)
	}
	for k, v := range m.lst {
		c.lst[k] = slices.Clone(v)
	}
	return c
}

// rcaHeld is a value handed out by a read (aliasing the Store's memory) and what it must still
// hold until the next write.
type rcaHeld struct {
	what string
	got  []byte
	want []byte
}

type rcaConfig struct {
	name     string
	maxP     int
	kg       *KeyGroupRange
	rows     int64 // RowCacheSize
	budget   int64
	pressure bool // large values too: segment rolls, backpressure, flushes; no merges
}

type rcaRig struct {
	t      *testing.T
	cfg    rcaConfig
	seed   uint64
	rng    *rand.Rand
	mem    *vfs.MemFS
	fault  *vfs.FaultFS
	opts   Options
	adjust func(*engine.Options)
	s      *Store

	val *ValueState[[]byte]
	str *ValueState[string]
	red *ReducingState[int64]
	agg *AggregatingState[int64, avgAcc, float64]
	lst *ListState[string]

	keys      []string
	nss       []string
	m         rcaModel
	persisted rcaModel
	held      []rcaHeld
	op        int
	big       []byte

	hits, misses, cacheChecks, cachedSeen, budgetFails int64
	bpWaits, flushes, evictions, lsmCompactions        int64
	reopens, crashes, noSpace                          int
}

func rcaReduce(a, b int64) int64 { return a*3 + b }

func (r *rcaRig) fatalf(format string, args ...any) {
	r.t.Helper()
	r.t.Fatalf("%s seed %d op %d: %s", r.cfg.name, r.seed, r.op, fmt.Sprintf(format, args...))
}

func (r *rcaRig) openStore() {
	r.t.Helper()
	s, err := open("/db", r.opts, r.adjust)
	if err != nil {
		r.fatalf("open: %v", err)
	}
	r.s = s
	r.val = must(NewValueState(s, ValueDescriptor[[]byte]{Name: "rca-val", Codec: Bytes}))
	r.str = must(NewValueState(s, ValueDescriptor[string]{Name: "rca-str", Codec: String}))
	r.red = must(NewReducingState(s, ReducingDescriptor[int64]{Name: "rca-red", Codec: Int64, Reduce: rcaReduce}))
	r.agg = must(NewAggregatingState(s, avgDescriptor("rca-agg")))
	r.lst = must(NewListState(s, ListDescriptor[string]{Name: "rca-lst", Codec: String}))
}

func newRCARig(t *testing.T, cfg rcaConfig, seed uint64) *rcaRig {
	r := &rcaRig{t: t, cfg: cfg, seed: seed, rng: rand.New(rand.NewPCG(seed, 0x5eed)), m: newRCAModel()}
	r.persisted = r.m.clone()
	r.mem = vfs.NewMem()
	r.fault = vfs.NewFaultFS(r.mem)
	r.opts = Options{MaxParallelism: cfg.maxP, KeyGroups: cfg.kg, MemoryBudget: cfg.budget, SegmentSize: 16 << 20,
		BackgroundWorkers: 2, BlockCacheSize: 1 << 20, RowCacheSize: cfg.rows, BackpressureTimeout: 2 * time.Second,
		fs: r.fault}
	r.adjust = func(o *engine.Options) { o.EvictionBatch, o.BucketBits, o.EvictionWatermark = 16<<10, 2, 0 }
	r.openStore()
	// Keys of many lengths: the composite key is 5 bytes + key + namespace, so keys of 110..116
	// bytes put key+value right at the slot limit (120) for short values.
	lens := []int{1, 2, 3, 7, 12, 30, 47, 64, 90, 103, 107, 110, 111, 112, 113, 114, 115, 116, 117, 130}
	for i := 0; len(r.keys) < 28; i++ {
		n := lens[i%len(lens)]
		k := fmt.Sprintf("%d-", i)
		k += strings.Repeat(string(rune('a'+i%26)), max(n-len(k), 0))
		k = k[:max(n, 1)]
		if r.cfg.kg != nil {
			kg := r.s.Key([]byte(k)).KeyGroup()
			if kg < r.cfg.kg.Start || kg > r.cfg.kg.End {
				continue
			}
		}
		r.keys = append(r.keys, k)
	}
	r.nss = []string{"", "w", "win-07"}
	r.big = make([]byte, (16<<20)/4+1)
	return r
}

func (r *rcaRig) key(kn rcaKN) Key { return r.s.Key([]byte(kn[0])).In([]byte(kn[1])) }

// pick returns a key and namespace, half the time one of a few hot ones (repeated reads hit
// the cache, repeated writes refresh it).
func (r *rcaRig) pick() rcaKN {
	if r.rng.IntN(2) == 0 {
		i := r.rng.IntN(4)
		return rcaKN{r.keys[i*5%len(r.keys)], r.nss[i%len(r.nss)]}
	}
	return rcaKN{r.keys[r.rng.IntN(len(r.keys))], r.nss[r.rng.IntN(len(r.nss))]}
}

// compLen is the length of the composite key of kn (5 bytes of header while the key is
// shorter than 128 bytes).
func compLen(kn rcaKN) int {
	n := 4 + 1 + len(kn[0]) + len(kn[1])
	if len(kn[0]) >= 128 {
		n++
	}
	return n
}

// valueFor returns a value for kn whose length tends to put key+value around the slot limit.
func (r *rcaRig) valueFor(kn rcaKN) []byte {
	room := engine.RowCacheMaxData - compLen(kn)
	var n int
	switch r.rng.IntN(8) {
	case 0:
		n = 0
	case 1, 2:
		n = room
	case 3:
		n = room + 1
	case 4:
		n = room - 1
	case 5:
		n = r.rng.IntN(300)
	default:
		n = r.rng.IntN(engine.RowCacheMaxData + 10)
	}
	if r.cfg.pressure && r.rng.IntN(2) == 0 {
		n = 256<<10 + r.rng.IntN(768<<10)
	}
	n = max(n, 0)
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.rng.Uint32())
	}
	return b
}

// write runs a write: every value handed out before it must still be intact now; after it
// they are dead. A budget failure is allowed under pressure (nothing changed then).
func (r *rcaRig) write(what string, f func() error) bool {
	r.t.Helper()
	r.checkHeld()
	err := f()
	r.held = r.held[:0]
	if err == nil {
		return true
	}
	if r.cfg.pressure && errors.Is(err, ErrMemoryBudget) {
		r.budgetFails++
		return false
	}
	r.fatalf("%s: %v", what, err)
	return false
}

func (r *rcaRig) checkHeld() {
	r.t.Helper()
	for _, h := range r.held {
		if !bytes.Equal(h.got, h.want) {
			r.fatalf("%s: a value handed out before the next write changed: %s, want %s", h.what, rcaShort(h.got), rcaShort(h.want))
		}
	}
}

func (r *rcaRig) checkVal(kn rcaKN) {
	r.t.Helper()
	got, found, err := r.val.Get(r.key(kn))
	want, wantFound := r.m.val[kn]
	if err != nil || found != wantFound || !bytes.Equal(got, want) {
		r.fatalf("value %q = %s %v %v, want %s %v", kn, rcaShort(got), found, err, rcaShort(want), wantFound)
	}
	if found {
		r.held = append(r.held, rcaHeld{what: fmt.Sprintf("value %q", kn), got: got, want: slices.Clone(want)})
	}
}

func (r *rcaRig) checkStr(kn rcaKN) {
	r.t.Helper()
	got, found, err := r.str.Get(r.key(kn))
	want, wantFound := r.m.str[kn]
	if err != nil || found != wantFound || got != want {
		r.fatalf("string %q = %q %v %v, want %q %v", kn, got, found, err, want, wantFound)
	}
}

func (r *rcaRig) checkRed(kn rcaKN) {
	r.t.Helper()
	got, found, err := r.red.Get(r.key(kn))
	want, wantFound := r.m.red[kn]
	if err != nil || found != wantFound || got != want {
		r.fatalf("reducing %q = %d %v %v, want %d %v", kn, got, found, err, want, wantFound)
	}
}

func (r *rcaRig) checkAgg(kn rcaKN) {
	r.t.Helper()
	got, found, err := r.agg.Get(r.key(kn))
	a, wantFound := r.m.agg[kn]
	var want float64
	if wantFound {
		want = float64(a.sum) / float64(a.n)
	}
	if err != nil || found != wantFound || got != want {
		r.fatalf("aggregating %q = %v %v %v, want %v %v", kn, got, found, err, want, wantFound)
	}
}

// listIter reads the list of kn and returns the iterator unconsumed (it stays valid until the
// next write or the next Get of the list state).
func (r *rcaRig) listIter(kn rcaKN) ListIterator[string] { return r.lst.Get(r.key(kn)) }

func (r *rcaRig) drainList(kn rcaKN, it ListIterator[string], after string) {
	r.t.Helper()
	var got []string
	for it.Next() {
		got = append(got, it.Value())
	}
	if err := it.Err(); err != nil || !slices.Equal(got, r.m.lst[kn]) {
		r.fatalf("list %q (%s) = %q %v, want %q", kn, after, got, err, r.m.lst[kn])
	}
}

func (r *rcaRig) checkAll() {
	r.t.Helper()
	for _, k := range r.keys {
		for _, ns := range r.nss {
			kn := rcaKN{k, ns}
			r.checkVal(kn)
			r.checkStr(kn)
			r.checkRed(kn)
			r.checkAgg(kn)
			r.drainList(kn, r.listIter(kn), "checkAll")
		}
	}
	r.checkCache()
}

// checkCache walks the row cache's slots and checks each against the model: every cached key is
// a value key of the universe that the model holds now, with exactly the model's encoding
// (engine.CheckRowCache checks tags, sets and the count of used slots).
func (r *rcaRig) checkCache() {
	r.t.Helper()
	if r.s.e.RowCacheSets() < 0 {
		if r.cfg.rows > 0 {
			r.fatalf("no row cache")
		}
		return
	}
	r.cacheChecks++
	type want struct {
		present bool
		enc     []byte
		what    string
	}
	exp := map[string]want{}
	for _, k := range r.keys {
		for _, ns := range r.nss {
			kn := rcaKN{k, ns}
			key := r.key(kn)
			add := func(id uint16, what string, present bool, enc []byte) {
				ck := base.AppendCompositeKey(nil, uint16(key.kg), id, key.b, key.ns)
				exp[string(ck)] = want{present, enc, what + fmt.Sprintf(" %q", kn)}
			}
			v, ok := r.m.val[kn]
			add(r.val.id, "value", ok, v)
			sv, ok := r.m.str[kn]
			add(r.str.id, "string", ok, []byte(sv))
			rv, ok := r.m.red[kn]
			add(r.red.id, "reducing", ok, Int64.Append(nil, rv))
			av, ok := r.m.agg[kn]
			add(r.agg.id, "aggregating", ok, avgCodec{}.Append(nil, av))
		}
	}
	err := r.s.e.CheckRowCache(func(ck, cv []byte) error {
		e, ok := exp[string(ck)]
		if !ok {
			return fmt.Errorf("row cache holds a key of no value state: %x", ck)
		}
		if !e.present {
			return fmt.Errorf("row cache holds %s = %x, which the model says is absent (a stale entry)", e.what, cv)
		}
		if !bytes.Equal(cv, e.enc) {
			return fmt.Errorf("row cache holds %s = %x, model %x (a stale entry)", e.what, cv, e.enc)
		}
		r.cachedSeen++
		return nil
	})
	if err != nil {
		r.fatalf("%v", err)
	}
}

// pushDown moves everything into the LsmStore (seal, wait, evict every slice), so the next
// reads go through the row cache. Under pressure a seal may find no memory: then it stops.
func (r *rcaRig) pushDown() {
	r.t.Helper()
	r.checkHeld()
	r.held = r.held[:0]
	if err := r.s.seal(); err != nil {
		r.fatalf("seal: %v", err)
	}
	if err := r.s.WaitBackground(); err != nil {
		if r.cfg.pressure && errors.Is(err, ErrMemoryBudget) {
			r.budgetFails++
			return
		}
		r.fatalf("WaitBackground: %v", err)
	}
	for i := 0; i < 200 && r.s.Stats().Slices > 0; i++ {
		if !r.s.e.EvictNow() {
			break
		}
		if err := r.s.WaitBackground(); err != nil {
			r.fatalf("WaitBackground after evict: %v", err)
		}
	}
	if st := r.s.Stats(); st.SealedSegments != 0 {
		r.fatalf("WaitBackground left %d sealed segments", st.SealedSegments)
	}
}

func (r *rcaRig) addStats() {
	st := r.s.Stats()
	r.hits += st.RowCacheHits
	r.misses += st.RowCacheMisses
	r.bpWaits += st.BackpressureWaits
	r.flushes += st.Flushes
	r.evictions += st.Evictions
	r.lsmCompactions += st.LSMCompactions
}

func (r *rcaRig) reopen() {
	r.t.Helper()
	r.checkHeld()
	r.held = r.held[:0]
	r.reopens++
	r.addStats()
	if err := r.s.Close(); err != nil {
		r.fatalf("close: %v", err)
	}
	r.persisted = r.m.clone()
	r.openStore()
	r.checkAll()
}

func (r *rcaRig) crash() {
	r.t.Helper()
	r.held = r.held[:0]
	r.crashes++
	r.addStats()
	r.fault.Crash()
	r.s.Close() // fails (the file system is gone); frees the memory
	r.mem = r.mem.CrashClone()
	r.fault = vfs.NewFaultFS(r.mem)
	r.opts.fs = r.fault
	r.m = r.persisted.clone()
	r.openStore()
	r.checkAll()
}

// noSpaceClose fails a Close with ErrNoSpace part-way through moving the tiers into the
// LsmStore (the Store stays open, part of its state moved down), checks every read and the
// cache in that state, then closes once space is back and reopens.
func (r *rcaRig) noSpaceClose() {
	r.t.Helper()
	r.checkHeld()
	r.held = r.held[:0]
	r.addStats()
	r.fault.Inject(vfs.Fault{Ops: vfs.Ops(vfs.OpWrite, vfs.OpSync, vfs.OpCreate), Nth: 1 + r.rng.Int64N(6), Sticky: true,
		Err: errNoSpaceErrno})
	err := r.s.Close()
	if err != nil {
		if !errors.Is(err, ErrNoSpace) {
			r.fatalf("close on a full disk: %v, want ErrNoSpace", err)
		}
		r.noSpace++
		r.hits -= r.s.Stats().RowCacheHits // counted again at the next addStats
		r.misses -= r.s.Stats().RowCacheMisses
		r.checkAll()
		r.checkAll()
		r.checkHeld()
		r.held = r.held[:0] // Close unmaps what they alias
		r.fault.ClearFaults()
		r.addStats()
		if err := r.s.Close(); err != nil {
			r.fatalf("close once space is back: %v", err)
		}
	}
	r.fault.ClearFaults()
	r.persisted = r.m.clone()
	r.openStore()
	r.checkAll()
}

// sources picks merge sources (may repeat and include the target).
func (r *rcaRig) sources() [][]byte {
	var out [][]byte
	for range 1 + r.rng.IntN(3) {
		out = append(out, []byte(r.nss[r.rng.IntN(len(r.nss))]))
	}
	return out
}

func (r *rcaRig) step() {
	r.t.Helper()
	kn := r.pick()
	k := r.key(kn)
	switch x := r.rng.IntN(1000); {
	case x < 160:
		r.checkVal(kn)
	case x < 260:
		v := r.valueFor(kn)
		if r.write("value put", func() error { return r.val.Put(k, v) }) {
			r.m.val[kn] = v
		}
	case x < 290:
		if r.write("value clear", func() error { return r.val.Clear(k) }) {
			delete(r.m.val, kn)
		}
	case x < 300:
		// A refused write changes nothing, the cached copy included.
		r.checkHeld()
		err := r.val.Put(k, r.big)
		r.held = r.held[:0]
		if !errors.Is(err, ErrValueTooLarge) {
			r.fatalf("put of %d bytes: %v, want ErrValueTooLarge", len(r.big), err)
		}
		r.checkVal(kn)
	case x < 360:
		r.checkRed(kn)
	case x < 430:
		a := r.rng.Int64N(100) - 30
		if r.write("reducing add", func() error { return r.red.Add(k, a) }) {
			if old, ok := r.m.red[kn]; ok {
				r.m.red[kn] = rcaReduce(old, a)
			} else {
				r.m.red[kn] = a
			}
		}
	case x < 445:
		if r.write("reducing clear", func() error { return r.red.Clear(k) }) {
			delete(r.m.red, kn)
		}
	case x < 480:
		if r.cfg.pressure {
			r.checkRed(kn)
			break
		}
		target, srcs := []byte(kn[1]), r.sources()
		r.write("reducing merge", func() error { return r.red.MergeNamespaces(r.s.Key([]byte(kn[0])), target, srcs...) })
		var merged int64
		have := false
		for _, src := range dedupSources(target, srcs) {
			skn := rcaKN{kn[0], src}
			if v, ok := r.m.red[skn]; ok {
				if have {
					merged = rcaReduce(merged, v)
				} else {
					merged, have = v, true
				}
				delete(r.m.red, skn)
			}
		}
		if have {
			if old, ok := r.m.red[kn]; ok {
				r.m.red[kn] = rcaReduce(old, merged)
			} else {
				r.m.red[kn] = merged
			}
		}
	case x < 530:
		r.checkAgg(kn)
	case x < 590:
		in := r.rng.Int64N(1000)
		if r.write("aggregating add", func() error { return r.agg.Add(k, in) }) {
			a := r.m.agg[kn]
			r.m.agg[kn] = avgAcc{a.sum + in, a.n + 1}
		}
	case x < 600:
		if r.write("aggregating clear", func() error { return r.agg.Clear(k) }) {
			delete(r.m.agg, kn)
		}
	case x < 625:
		if r.cfg.pressure {
			r.checkAgg(kn)
			break
		}
		target, srcs := []byte(kn[1]), r.sources()
		r.write("aggregating merge", func() error { return r.agg.MergeNamespaces(r.s.Key([]byte(kn[0])), target, srcs...) })
		var merged avgAcc
		have := false
		for _, src := range dedupSources(target, srcs) {
			skn := rcaKN{kn[0], src}
			if a, ok := r.m.agg[skn]; ok {
				merged = avgAcc{merged.sum + a.sum, merged.n + a.n}
				have = true
				delete(r.m.agg, skn)
			}
		}
		if have {
			a := r.m.agg[kn]
			r.m.agg[kn] = avgAcc{a.sum + merged.sum, a.n + merged.n}
		}
	case x < 660:
		r.checkStr(kn)
	case x < 690:
		v := strings.Repeat("s", r.rng.IntN(max(engine.RowCacheMaxData-compLen(kn), 0)+3))
		if r.write("string put", func() error { return r.str.Put(k, v) }) {
			r.m.str[kn] = v
		}
	case x < 740:
		e := fmt.Sprint(r.rng.IntN(10000))
		if r.write("list add", func() error { return r.lst.Add(k, e) }) {
			r.m.lst[kn] = append(r.m.lst[kn], e)
		}
	case x < 790:
		// A list iterator held across many reads of other states (values, hits and
		// misses of the row cache) still yields the list.
		it := r.listIter(kn)
		for range 1 + r.rng.IntN(20) {
			o := r.pick()
			switch r.rng.IntN(3) {
			case 0:
				r.checkVal(o)
			case 1:
				r.checkRed(o)
			default:
				r.checkAgg(o)
			}
		}
		r.drainList(kn, it, "held across reads")
	case x < 800:
		r.checkHeld()
	case x < 830:
		r.pushDown()
	case x < 836:
		r.checkHeld()
		r.held = r.held[:0]
		if err := r.s.WaitBackground(); err != nil && !(r.cfg.pressure && errors.Is(err, ErrMemoryBudget)) {
			r.fatalf("WaitBackground: %v", err)
		}
	case x < 840:
		r.checkHeld()
		r.held = r.held[:0]
		if err := r.s.seal(); err != nil {
			r.fatalf("seal: %v", err)
		}
	case x < 846:
		r.s.e.EvictNow() // a read-only step: nothing installs until the next write
	default:
		// A burst of reads of keys likely in the LsmStore, to fill and churn the cache.
		for range 8 {
			o := r.pick()
			switch r.rng.IntN(4) {
			case 0:
				r.checkVal(o)
			case 1:
				r.checkRed(o)
			case 2:
				r.checkAgg(o)
			default:
				r.checkStr(o)
			}
		}
	}
}

func (r *rcaRig) run(ops int) {
	r.t.Helper()
	nextReopen, nextNoSpace, nextCrash := ops/3, ops/2, 2*ops/3
	for r.op = 0; r.op < ops; r.op++ {
		switch {
		case r.op == nextReopen:
			r.reopen()
		case r.op == nextNoSpace:
			r.noSpaceClose()
		case r.op == nextCrash:
			r.crash()
		case r.rng.IntN(1500) == 0:
			r.reopen()
		case r.rng.IntN(3000) == 0:
			r.crash()
		case r.rng.IntN(3000) == 0:
			r.noSpaceClose()
		}
		r.step()
		if r.op%25 == 0 {
			r.checkCache()
		}
	}
	r.pushDown()
	r.checkAll()
	r.checkAll() // second pass: the first one filled the cache, this one reads hits
	r.addStats()
	if err := r.s.Close(); err != nil {
		r.fatalf("final close: %v", err)
	}
}

// TestRowCacheAttackModel: random operations on value (Bytes and String), reducing and
// aggregating state (and a list state beside them) compared with a model, with pushes into the
// LsmStore, WaitBackground, seals, evictions, reopens and crashes, over row caches of one set
// (every key collides) up to a few sets, several MaxParallelism and key-group ranges, and a
// small budget with large values (backpressure, flushes, ErrMemoryBudget). The cache's contents
// are checked against the model every 25 operations.
func TestRowCacheAttackModel(t *testing.T) {
	ops := 6000
	if testing.Short() {
		ops = 1500
	}
	if raceEnabled {
		ops /= 3
	}
	seed := uint64(time.Now().UnixNano())
	if *modelSeed != 0 {
		seed = uint64(*modelSeed)
	}
	configs := []rcaConfig{
		{name: "one-set", maxP: 64, rows: 512, budget: 128 << 20},
		{name: "maxp1-four-sets", maxP: 1, rows: 2048, budget: 128 << 20},
		{name: "maxp32768-kg-range", maxP: 32768, kg: &KeyGroupRange{Start: 100, End: 20000}, rows: 4096, budget: 128 << 20},
		{name: "default-size", maxP: 128, rows: 0, budget: 128 << 20},
		{name: "pressure", maxP: 128, rows: 1024, budget: 32 << 20, pressure: true},
	}
	for i, cfg := range configs {
		t.Run(cfg.name, func(t *testing.T) {
			s := seed + uint64(i)
			t.Logf("seed %d (replay: go test -run 'TestRowCacheAttackModel/%s' -seed %d)", s, cfg.name, s)
			r := newRCARig(t, cfg, s)
			n := ops
			if cfg.pressure {
				n = ops / 2
			}
			r.run(n)
			t.Logf("%s: %d ops, row cache %d hits %d misses, %d cache checks saw %d cached entries, %d reopens %d crashes %d full-disk closes, %d budget failures; %d backpressure waits, %d flushes, %d evictions, %d LSM compactions",
				cfg.name, n, r.hits, r.misses, r.cacheChecks, r.cachedSeen, r.reopens, r.crashes, r.noSpace, r.budgetFails,
				r.bpWaits, r.flushes, r.evictions, r.lsmCompactions)
			if r.hits == 0 || r.misses == 0 || r.cachedSeen == 0 {
				t.Errorf("the run did not exercise the row cache: %d hits, %d misses, %d cached entries seen", r.hits, r.misses, r.cachedSeen)
			}
		})
	}
}

// rcaOpenMem opens a Store over a MemFS with evictions on demand only.
func rcaOpenMem(t *testing.T, mem *vfs.MemFS, rows int64) *Store {
	t.Helper()
	opts := Options{MaxParallelism: 128, MemoryBudget: 128 << 20, SegmentSize: 16 << 20, BackgroundWorkers: 2,
		BlockCacheSize: 1 << 20, RowCacheSize: rows, fs: mem}
	s, err := open("/db", opts, func(o *engine.Options) { o.EvictionBatch, o.EvictionWatermark = 64<<10, 0 })
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestRowCacheAttackHeldValues: values read from the LsmStore (misses copied by the lower
// reader, hits copied out of the row cache) stay intact while thousands of later reads churn a
// one-set row cache and fill the arena past a chunk (lowArenaMax), and a list iterator held
// across those reads still yields its list; reading a cacheable key twice in a row hits the
// second time and an uncacheable one never does; after a write, reads are still right.
func TestRowCacheAttackHeldValues(t *testing.T) {
	n := 12000 // two reads each: several MiB through the arena, past lowArenaMax
	mem := vfs.NewMem()
	s := rcaOpenMem(t, mem, 512)
	val := must(NewValueState(s, ValueDescriptor[[]byte]{Name: "v", Codec: Bytes}))
	lstA := must(NewListState(s, ListDescriptor[[]byte]{Name: "a", Codec: Bytes}))
	lstB := must(NewListState(s, ListDescriptor[[]byte]{Name: "b", Codec: Bytes}))
	keyOf := func(i int) []byte { return []byte(fmt.Sprintf("key-%06d", i)) }
	valOf := func(i int) []byte {
		// 0..130 bytes: key+value straddles the slot limit (composite key: 5 + 10 bytes);
		// every fourth longer, to fill the arena.
		n := i % 131
		if i%4 == 3 {
			n = 300 + i%500
		}
		return bytes.Repeat([]byte{byte(i), byte(i >> 8)}, n)[:n]
	}
	cacheable := func(i int) bool { return 5+len(keyOf(i))+len(valOf(i)) <= engine.RowCacheMaxData }
	for i := range n {
		must(0, val.Put(s.Key(keyOf(i)), valOf(i)))
		if i%50 == 0 {
			for j := range 3 {
				must(0, lstA.Add(s.Key(keyOf(i)), []byte(fmt.Sprintf("a%d-%d", i, j))))
				must(0, lstB.Add(s.Key(keyOf(i)), []byte(fmt.Sprintf("b%d-%d", i, j))))
			}
		}
	}
	if err := s.Close(); err != nil { // everything into the LsmStore
		t.Fatal(err)
	}
	s = rcaOpenMem(t, mem, 512)
	defer s.Close()
	val = must(NewValueState(s, ValueDescriptor[[]byte]{Name: "v", Codec: Bytes}))
	lstA = must(NewListState(s, ListDescriptor[[]byte]{Name: "a", Codec: Bytes}))
	lstB = must(NewListState(s, ListDescriptor[[]byte]{Name: "b", Codec: Bytes}))

	type held struct {
		i   int
		got []byte
	}
	var hs []held
	read := func(i int) []byte {
		t.Helper()
		got, ok, err := val.Get(s.Key(keyOf(i)))
		if err != nil || !ok || !bytes.Equal(got, valOf(i)) {
			t.Fatalf("get %d = %s %v %v, want %s", i, rcaShort(got), ok, err, rcaShort(valOf(i)))
		}
		hs = append(hs, held{i, got})
		return got
	}
	itA := lstA.Get(s.Key(keyOf(0)))
	before := s.Stats()
	wantHits := int64(0)
	for i := range n {
		read(i)
		read(i) // a hit when cacheable: it was just inserted, the most recent slot of its set
		if cacheable(i) {
			wantHits++
		}
		if i%50 == 0 {
			it := lstB.Get(s.Key(keyOf(i)))
			var got []string
			for it.Next() {
				got = append(got, string(it.Value()))
			}
			if want := []string{fmt.Sprintf("b%d-0", i), fmt.Sprintf("b%d-1", i), fmt.Sprintf("b%d-2", i)}; it.Err() != nil || !slices.Equal(got, want) {
				t.Fatalf("list b %d = %q %v, want %q", i, got, it.Err(), want)
			}
		}
	}
	// Key 0 again, long after its slot was replaced many times over (one set).
	read(0)
	after := s.Stats()
	if hits := after.RowCacheHits - before.RowCacheHits; hits != wantHits {
		t.Errorf("row cache hits %d, want %d (one per cacheable key read twice in a row)", hits, wantHits)
	}
	if s.e.RowCacheLen() > engine.MinRowCacheSize/128 {
		t.Errorf("one set holds %d entries", s.e.RowCacheLen())
	}
	for _, h := range hs {
		if !bytes.Equal(h.got, valOf(h.i)) {
			t.Fatalf("value of key %d read before %d later reads changed: %s, want %s", h.i, len(hs), rcaShort(h.got), rcaShort(valOf(h.i)))
		}
	}
	var gotA []string
	for itA.Next() {
		gotA = append(gotA, string(itA.Value()))
	}
	if want := []string{"a0-0", "a0-1", "a0-2"}; itA.Err() != nil || !slices.Equal(gotA, want) {
		t.Fatalf("list a held across %d reads = %q %v, want %q", len(hs), gotA, itA.Err(), want)
	}
	// A write, then every value again (and its cache copy) is right.
	must(0, val.Put(s.Key(keyOf(1)), []byte("new")))
	for i := 0; i < n; i += 97 {
		want := valOf(i)
		if i == 1 {
			want = []byte("new")
		}
		got, ok, err := val.Get(s.Key(keyOf(i)))
		if err != nil || !ok || !bytes.Equal(got, want) {
			t.Fatalf("after a write: get %d = %x %v %v, want %x", i, got, ok, err, want)
		}
	}
}

// TestRowCacheAttackWriteThrough: targeted sequences around the write-through refresh, each
// checked by value and by the cache's hit counter: a refresh serves the new value once it moved
// down; a refresh that no longer fits drops the entry; the exact slot limit is cached and one
// byte more is not; empty values; Clear then Get (before and after the tombstone moves down,
// and after a reopen); a refused Put keeps the old value; a reducing Add chain and
// MergeNamespaces over cached keys never resurrect a cleared source.
func TestRowCacheAttackWriteThrough(t *testing.T) {
	mem := vfs.NewMem()
	s := rcaOpenMem(t, mem, 4096)
	defer func() { s.Close() }()
	var val *ValueState[[]byte]
	var red *ReducingState[int64]
	attach := func() {
		val = must(NewValueState(s, ValueDescriptor[[]byte]{Name: "v", Codec: Bytes}))
		red = must(NewReducingState(s, ReducingDescriptor[int64]{Name: "r", Codec: Int64, Reduce: rcaReduce}))
	}
	attach()
	down := func() {
		t.Helper()
		must(0, s.seal())
		must(0, s.WaitBackground())
		for i := 0; i < 100 && s.Stats().Slices > 0; i++ {
			s.e.EvictNow()
			must(0, s.WaitBackground())
		}
		if st := s.Stats(); st.Slices != 0 || st.SealedSegments != 0 || st.Records != 0 {
			t.Fatalf("not all in the LsmStore: %+v", st)
		}
	}
	hits := func() int64 { return s.Stats().RowCacheHits }
	get := func(k Key, want []byte, wantOK bool, wantHit bool) {
		t.Helper()
		h := hits()
		got, ok, err := val.Get(k)
		if err != nil || ok != wantOK || !bytes.Equal(got, want) {
			t.Fatalf("get %q = %q %v %v, want %q %v", k.Bytes(), got, ok, err, want, wantOK)
		}
		if hit := hits() > h; hit != wantHit {
			t.Fatalf("get %q: hit %v, want %v", k.Bytes(), hit, wantHit)
		}
	}
	k := s.Key([]byte("k1"))           // composite key: 5 + 2 bytes
	room := engine.RowCacheMaxData - 7 // the longest value that is cached
	kLong := s.Key([]byte("k2"))       // refreshed beyond the limit
	kEmpty := s.Key([]byte("k3"))
	kClr := s.Key([]byte("k4"))
	must(0, val.Put(k, []byte("one")))
	must(0, val.Put(kLong, []byte("short")))
	must(0, val.Put(kEmpty, []byte{}))
	must(0, val.Put(kClr, []byte("doomed")))
	down()
	get(k, []byte("one"), true, false)
	get(k, []byte("one"), true, true)
	get(kLong, []byte("short"), true, false)
	get(kEmpty, nil, true, false)
	get(kEmpty, nil, true, true)
	get(kClr, []byte("doomed"), true, false)

	// Write-through: the FreshTable serves the new value, then the cache once it moved down.
	must(0, val.Put(k, []byte("two")))
	get(k, []byte("two"), true, false)
	down()
	get(k, []byte("two"), true, true)
	// Exactly the limit: refreshed and served from the cache.
	full := bytes.Repeat([]byte("f"), room)
	must(0, val.Put(k, full))
	down()
	get(k, full, true, true)
	// One byte over: dropped, read from the LsmStore, never cached.
	over := bytes.Repeat([]byte("o"), room+1)
	must(0, val.Put(kLong, over))
	down()
	get(kLong, over, true, false)
	get(kLong, over, true, false)
	// Back to short: a miss, then cached again.
	must(0, val.Put(kLong, []byte("s")))
	down()
	get(kLong, []byte("s"), true, false)
	get(kLong, []byte("s"), true, true)
	// An empty value refreshed to non-empty and back.
	must(0, val.Put(kEmpty, []byte("x")))
	down()
	get(kEmpty, []byte("x"), true, true)
	must(0, val.Put(kEmpty, nil))
	down()
	get(kEmpty, nil, true, true)
	// Clear then Get: absent from the FreshTable, from the LsmStore, after a reopen.
	must(0, val.Clear(kClr))
	get(kClr, nil, false, false)
	down()
	get(kClr, nil, false, false)
	get(kClr, nil, false, false)
	// Clear then Put again: not cached until read from the LsmStore again.
	must(0, val.Put(kClr, []byte("back")))
	down()
	get(kClr, []byte("back"), true, false)
	get(kClr, []byte("back"), true, true)
	// A refused Put (ErrValueTooLarge) keeps the old value, cached.
	if err := val.Put(kClr, make([]byte, (16<<20)/4+1)); !errors.Is(err, ErrValueTooLarge) {
		t.Fatalf("huge put: %v", err)
	}
	get(kClr, []byte("back"), true, true)
	down()
	get(kClr, []byte("back"), true, true)

	// Reducing: Add over a cached value, pushed down between every step.
	rk := s.Key([]byte("r"))
	want := int64(0)
	for i := range 12 {
		must(0, red.Add(rk, int64(i)))
		if i == 0 {
			want = 0
		} else {
			want = rcaReduce(want, int64(i))
		}
		if i%3 == 0 {
			down()
		}
		got, ok, err := red.Get(rk)
		if err != nil || !ok || got != want {
			t.Fatalf("reducing after add %d = %d %v %v, want %d", i, got, ok, err, want)
		}
	}
	// MergeNamespaces over cached sources and target.
	ns := func(s string) []byte { return []byte(s) }
	must(0, red.Add(rk.In(ns("a")), 5))
	must(0, red.Add(rk.In(ns("b")), 7))
	must(0, red.Add(rk.In(ns("t")), 11))
	down()
	for _, n := range []string{"a", "b", "t", "a", "b", "t"} { // misses, then hits: all cached
		if _, ok, err := red.Get(rk.In(ns(n))); !ok || err != nil {
			t.Fatalf("reducing %q before merge: %v %v", n, ok, err)
		}
	}
	must(0, red.MergeNamespaces(rk, ns("t"), ns("a"), ns("b"), ns("a"), ns("t")))
	wantT := rcaReduce(11, rcaReduce(5, 7))
	check := func(when string) {
		t.Helper()
		for _, n := range []string{"a", "b"} {
			if v, ok, err := red.Get(rk.In(ns(n))); ok || err != nil {
				t.Fatalf("%s: merged source %q = %d %v %v, want absent", when, n, v, ok, err)
			}
		}
		if v, ok, err := red.Get(rk.In(ns("t"))); !ok || err != nil || v != wantT {
			t.Fatalf("%s: merge target = %d %v %v, want %d", when, v, ok, err, wantT)
		}
	}
	check("after merge")
	down()
	check("after the merge moved down")
	check("again (cache)")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = rcaOpenMem(t, mem, 4096)
	attach()
	check("after reopen")
	get(kClr, []byte("back"), true, false)
	get(kClr, []byte("back"), true, true)
	get(k, full, true, false)
	get(kLong, []byte("s"), true, false)
}

// TestRowCacheAttackBudget: the row cache's memory is what the budget accounts for it (page
// rounding included) and is given back at Close; stores sharing a budget account each their
// own; a row cache larger than the budget fails Open with ErrMemoryBudget and leaves nothing
// behind (budget, reserve, directory lock); a Store in memory only has none.
func TestRowCacheAttackBudget(t *testing.T) {
	shared := NewBudget(256 << 20)
	var stores []*Store
	for i, rows := range []int64{0, 1000, 512, -1} {
		s, err := open(fmt.Sprintf("/db%d", i), Options{SharedBudget: shared, SegmentSize: 16 << 20, RowCacheSize: rows,
			fs: vfs.NewMem()}, nil)
		if err != nil {
			t.Fatalf("open %d (rows %d): %v", i, rows, err)
		}
		stores = append(stores, s)
		st := s.Stats()
		want := int64(0)
		switch {
		case rows == 0:
			want = 256 << 20 / DefaultBlockCacheDivisor * DefaultRowCacheShare
		case rows > 0:
			want = int64(memoryPage()) // one set, a page mapped
		}
		if st.RowCacheBytes != want {
			t.Errorf("store %d (rows %d): RowCacheBytes %d, want %d", i, rows, st.RowCacheBytes, want)
		}
		if rows > 0 && s.e.RowCacheSets() != 1 {
			t.Errorf("store %d (rows %d): %d sets, want 1", i, rows, s.e.RowCacheSets())
		}
	}
	var sum int64
	for _, s := range stores {
		st := s.Stats()
		sum += st.BlockCacheBytes + st.RowCacheBytes
	}
	if got := shared.UsedBy(memory.PurposeBlockCache); got != sum {
		t.Errorf("budget accounts %d bytes of caches, stores report %d", got, sum)
	}
	for _, s := range stores {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if u, r := shared.Used(), shared.Reserve(); u != 0 || r != 0 {
		t.Errorf("after Close of every store: budget used %d, reserve %d; want 0, 0", u, r)
	}

	// A row cache larger than the budget: refused before anything is mapped.
	mem := vfs.NewMem()
	_, err := open("/big", Options{SharedBudget: shared, SegmentSize: 16 << 20, RowCacheSize: 1 << 40, fs: mem}, nil)
	if !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("open with a 1 TiB row cache: %v, want ErrInvalidOptions", err)
	}
	if u, r := shared.Used(), shared.Reserve(); u != 0 || r != 0 {
		t.Errorf("after a refused Open: budget used %d, reserve %d; want 0, 0", u, r)
	}
	// A shared budget others filled: Open fails for memory (it maps its first segment) and
	// leaves nothing.
	held, err := shared.Map(int(shared.Limit()-8<<20), memory.PurposeFreshData)
	if err != nil {
		t.Fatal(err)
	}
	_, err = open("/big", Options{SharedBudget: shared, SegmentSize: 16 << 20, fs: mem}, nil)
	if !errors.Is(err, ErrMemoryBudget) {
		t.Fatalf("open on a full shared budget: %v, want ErrMemoryBudget", err)
	}
	if u, r := shared.Used(), shared.Reserve(); u != shared.Limit()-8<<20 || r != 0 {
		t.Errorf("after a failed Open: budget used %d, reserve %d; want %d, 0", u, r, shared.Limit()-8<<20)
	}
	if err := held.Release(); err != nil {
		t.Fatal(err)
	}
	s, err := open("/big", Options{SharedBudget: shared, SegmentSize: 16 << 20, fs: mem}, nil)
	if err != nil {
		t.Fatalf("open after a failed Open of the same directory: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if u := shared.Used(); u != 0 {
		t.Errorf("budget used %d after Close", u)
	}
	// In memory only: no row cache whatever the option says.
	ms := openTest(t, Options{RowCacheSize: 1 << 20})
	if st := ms.Stats(); st.RowCacheBytes != 0 || ms.e.RowCacheSets() >= 0 {
		t.Errorf("in-memory store has a row cache of %d bytes", st.RowCacheBytes)
	}
}

// rcaShort formats b for a message: its length and at most its first 40 bytes.
func rcaShort(b []byte) string {
	if len(b) > 40 {
		return fmt.Sprintf("[%d bytes] %x...", len(b), b[:40])
	}
	return fmt.Sprintf("[%d bytes] %x", len(b), b)
}

func memoryPage() int {
	b := memory.NewBudget(1 << 30)
	r, err := b.Map(1, memory.PurposeOther)
	if err != nil {
		panic(err)
	}
	n := len(r.Bytes())
	r.Release()
	return n
}

// TestRowCacheAttackWaitBackground: after a bulk load over several segments, WaitBackground
// leaves no sealed segment and no job in flight, reads are right, an open map iteration whose
// tiers moved ends with ErrIteratorInvalidated, and on a closed Store it fails with ErrClosed.
func TestRowCacheAttackWaitBackground(t *testing.T) {
	n := 120
	if testing.Short() || raceEnabled {
		n = 60
	}
	mem := vfs.NewMem()
	s := rcaOpenMem(t, mem, 8192)
	val := must(NewValueState(s, ValueDescriptor[[]byte]{Name: "v", Codec: Bytes}))
	mp := must(NewMapState(s, MapDescriptor[string, int64]{Name: "m", KeyCodec: String, ValueCodec: Int64}))
	for _, uk := range []string{"x", "y", "z"} {
		must(0, mp.Put(s.Key([]byte("map")), uk, 1))
	}
	big := bytes.Repeat([]byte("b"), 512<<10)
	for i := range n { // n × 512 KiB: several 16 MiB segments sealed
		must(0, val.Put(s.Key([]byte(fmt.Sprint(i))), append(big[:len(big):len(big)], byte(i))))
	}
	it := mp.Iterator(s.Key([]byte("map")))
	if !it.Next() {
		t.Fatalf("map iteration: %v", it.Err())
	}
	must(0, s.seal()) // queues a transform that only WaitBackground installs (no write follows)
	if err := s.WaitBackground(); err != nil {
		t.Fatal(err)
	}
	st := s.Stats()
	if st.SealedSegments != 0 || st.Transforms == 0 || s.e.Busy() {
		t.Fatalf("after WaitBackground: %d sealed segments, %d transforms, busy %v",
			st.SealedSegments, st.Transforms, s.e.Busy())
	}
	for it.Next() {
	}
	if !errors.Is(it.Err(), ErrIteratorInvalidated) {
		t.Errorf("map iteration across WaitBackground's installs: %v, want ErrIteratorInvalidated", it.Err())
	}
	for i := range n {
		got, ok, err := val.Get(s.Key([]byte(fmt.Sprint(i))))
		if err != nil || !ok || len(got) != len(big)+1 || got[len(big)] != byte(i) {
			t.Fatalf("get %d: %d bytes %v %v", i, len(got), ok, err)
		}
	}
	if err := s.WaitBackground(); err != nil { // idle: returns at once
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitBackground(); !errors.Is(err, ErrClosed) {
		t.Fatalf("WaitBackground on a closed Store: %v, want ErrClosed", err)
	}
}
