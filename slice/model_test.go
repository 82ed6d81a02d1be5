package slice

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strata-db/strata/internal/base"
)

var (
	seedFlag  = flag.Uint64("seed", 0, "replay the model test with this seed (0: random)")
	stepsFlag = flag.Int("steps", 400, "model test steps per seed")
	checkFlag = flag.Int("check-every", 25, "model test: check every read every this many steps")
)

// lowerTier is the test Sink: it keeps every evicted entry, as the LSM
// store would, and answers reads below the SliceTable from them.
type lowerTier struct {
	es    []base.Entry
	fail  bool
	calls int
}

func (l *lowerTier) Evict(it base.Iterator) error {
	l.calls++
	var got []base.Entry
	for it.Next() {
		e := *it.Entry()
		e.Key, e.UserKey, e.Value = clone(e.Key), clone(e.UserKey), clone(e.Value)
		if n := len(got); n > 0 {
			p := &got[n-1]
			if base.Compare(p, &e) >= 0 {
				return fmt.Errorf("sink: run out of order at seq %d", e.Seq)
			}
		}
		got = append(got, e)
	}
	if err := it.Err(); err != nil {
		return err
	}
	if l.fail {
		return errors.New("sink: injected failure")
	}
	l.es = append(l.es, got...)
	return nil
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

// versions returns the lower tier's entries for (order, key), newest first.
func (l *lowerTier) versions(order uint64, key string) []base.Entry {
	var out []base.Entry
	for _, e := range l.es {
		if e.Order == order && string(e.Key) == key {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b base.Entry) int { return int(b.Seq) - int(a.Seq) })
	return out
}

func (l *lowerTier) get(order uint64, key string) (string, bool) {
	for _, e := range l.versions(order, key) {
		switch e.Kind {
		case base.KindValue:
			return string(e.Value), true
		case base.KindTombstone:
			return "", false
		}
	}
	return "", false
}

func (l *lowerTier) list(order uint64, key string) string {
	var parts []string
	for _, e := range l.versions(order, key) {
		if isMapKind(e.Kind) {
			continue
		}
		if e.Kind == base.KindTombstone {
			break
		}
		parts = append(parts, string(e.Value))
		if e.Kind != base.KindListAppend {
			break
		}
	}
	slices.Reverse(parts)
	return strings.Join(parts, "")
}

func (l *lowerTier) mapGet(order uint64, key, uk string) (string, bool) {
	for _, e := range l.versions(order, key) {
		if e.Kind == base.KindTombstone {
			return "", false
		}
		if isMapKind(e.Kind) && string(e.UserKey) == uk {
			return string(e.Value), e.Kind == base.KindMapEntry
		}
	}
	return "", false
}

// model is the Go-map truth.
type model struct {
	vals  map[string]string
	lists map[string]string // concatenated single-letter elements
	maps  map[string]map[string]string
}

type modelRun struct {
	t     *testing.T
	r     *rand.Rand
	e     *env
	m     model
	low   *lowerTier
	seq   uint64
	nKeys int
	uks   []string
	reloc *Relocation // pending across steps
}

func (mr *modelRun) order(kind byte, k int) uint64 {
	// Pairs of keys share an order hash (collisions); keys spread over buckets.
	x := uint64(k/2)*0x9e3779b97f4a7c15 + uint64(kind)
	x ^= x >> 29
	x *= 0xbf58476d1ce4e5b9
	return x ^ x>>32
}

// key returns key k of a kind: the empty key for k = 0, and keys that are
// prefixes of each other ("v3" and "v3\x00") where order hashes collide.
func (mr *modelRun) key(kind byte, k int) string {
	if k == 0 {
		return ""
	}
	return fmt.Sprintf("%c%d", kind, k/2) + strings.Repeat("\x00", k%2)
}

func (mr *modelRun) batch() {
	r := mr.r
	n := 1 + r.IntN(60)
	es := make([]base.Entry, 0, n)
	for i := 0; i < n; i++ {
		mr.seq++
		k := r.IntN(mr.nKeys)
		switch op := r.IntN(10); {
		case op < 2:
			key, v := mr.key('v', k), fmt.Sprintf("v%d", mr.seq)
			if r.IntN(50) == 0 {
				v = strings.Repeat("x", 5000) + v // oversized for 4 KiB slices
			}
			es = append(es, kv(mr.order('v', k), key, mr.seq, v))
			mr.m.vals[key] = v
		case op < 3:
			key := mr.key('v', k)
			es = append(es, tomb(mr.order('v', k), key, mr.seq))
			delete(mr.m.vals, key)
		case op < 5:
			key, el := mr.key('l', k), string(rune('a'+r.IntN(26)))
			if r.IntN(100) == 0 {
				el = strings.Repeat(el, 3000) // operands resolved into an oversized base
			}
			es = append(es, lapp(mr.order('l', k), key, mr.seq, el))
			mr.m.lists[key] += el
		case op < 6:
			key := mr.key('l', k)
			if r.IntN(2) == 0 {
				es = append(es, tomb(mr.order('l', k), key, mr.seq))
				delete(mr.m.lists, key)
			} else {
				el := string(rune('A' + r.IntN(26)))
				es = append(es, lbase(mr.order('l', k), key, mr.seq, el))
				mr.m.lists[key] = el
			}
		case op < 8:
			key, uk, v := mr.key('m', k), mr.uks[r.IntN(len(mr.uks))], fmt.Sprintf("m%d", mr.seq)
			if r.IntN(30) == 0 {
				v = strings.Repeat("y", 1500) + v // maps spanning slices
			}
			es = append(es, ment(mr.order('m', k), key, uk, mr.seq, v))
			if mr.m.maps[key] == nil {
				mr.m.maps[key] = map[string]string{}
			}
			mr.m.maps[key][uk] = v
		case op < 9:
			key, uk := mr.key('m', k), mr.uks[r.IntN(len(mr.uks))]
			es = append(es, mtomb(mr.order('m', k), key, uk, mr.seq))
			delete(mr.m.maps[key], uk)
		default:
			key := mr.key('m', k)
			es = append(es, tomb(mr.order('m', k), key, mr.seq))
			delete(mr.m.maps, key)
		}
	}
	mr.e.install(mr.t, es...)
}

func (mr *modelRun) compact() {
	job, ok := mr.e.t.PickCompaction()
	if !ok {
		return
	}
	if err := job.Run(context.Background()); err != nil {
		mr.t.Fatal(err)
	}
	if mr.r.IntN(10) == 0 {
		if err := mr.e.t.CancelCompaction(job); err != nil {
			mr.t.Fatal(err)
		}
		return
	}
	if err := mr.e.t.InstallCompaction(job); err != nil {
		mr.t.Fatal(err)
	}
}

func (mr *modelRun) evict() {
	job, ok := mr.e.t.PickEviction()
	if !ok {
		return
	}
	mr.low.fail = mr.r.IntN(8) == 0
	if err := job.Run(context.Background(), mr.low); err != nil {
		if !mr.low.fail {
			mr.t.Fatal(err)
		}
		if err := mr.e.t.CancelEviction(job); err != nil {
			mr.t.Fatal(err)
		}
		return
	}
	if err := mr.e.t.InstallEviction(job); err != nil {
		mr.t.Fatal(err)
	}
}

// relocate advances a relocation: picks one, or runs the pending one, or
// installs (sometimes cancels) it — so it stays pending across other
// steps, reads and checks.
func (mr *modelRun) relocate() {
	tb := mr.e.t
	switch j := mr.reloc; {
	case j == nil:
		mr.reloc, _ = tb.PickRelocation()
	case !j.ran:
		if err := j.Run(context.Background()); err != nil {
			mr.t.Fatal(err)
		}
	case mr.r.IntN(8) == 0:
		if err := tb.CancelRelocation(j); err != nil {
			mr.t.Fatal(err)
		}
		mr.reloc = nil
	default:
		if err := tb.InstallRelocation(j); err != nil {
			mr.t.Fatal(err)
		}
		mr.reloc = nil
	}
}

func (mr *modelRun) check(step int) {
	t, tb, low := mr.t, mr.e.t, mr.low
	checkFilters(t, tb, fmt.Sprintf("step %d", step))
	for k := 0; k < mr.nKeys; k++ {
		key, o := mr.key('v', k), mr.order('v', k)
		v, st := tb.Get(o, []byte(key))
		got, ok := string(v), st == Found
		if st == Absent {
			got, ok = low.get(o, key)
		}
		want, wok := mr.m.vals[key]
		if got != want || ok != wok {
			t.Fatalf("step %d: Get(%s) = %q,%v; model %q,%v", step, key, got, ok, want, wok)
		}

		key, o = mr.key('l', k), mr.order('l', k)
		bs, complete := tb.ListGet(o, []byte(key), nil)
		gotL := string(bytesJoin(bs))
		if !complete {
			gotL = low.list(o, key) + gotL
		}
		if gotL != mr.m.lists[key] {
			t.Fatalf("step %d: ListGet(%s) = %q (complete %v); model %q", step, key, gotL, complete, mr.m.lists[key])
		}

		key, o = mr.key('m', k), mr.order('m', k)
		wantM := mr.m.maps[key]
		for _, uk := range mr.uks {
			v, st := tb.MapGet(o, []byte(key), []byte(uk))
			got, ok := string(v), st == Found
			if st == Absent {
				got, ok = low.mapGet(o, key, uk)
			}
			want, wok := wantM[uk]
			if got != want || ok != wok {
				t.Fatalf("step %d: MapGet(%s, %q) = %q,%v (%v); model %q,%v", step, key, uk, got, ok, st, want, wok)
			}
		}
		it := tb.MapIter(o, []byte(key))
		gotM := map[string]string{}
		prev := ""
		for n := 0; it.Next(); n++ {
			if n > 0 && string(it.UserKey()) <= prev {
				t.Fatalf("step %d: MapIter(%s) not in user key order: %q after %q", step, key, it.UserKey(), prev)
			}
			prev = string(it.UserKey())
			gotM[prev] = string(it.Value())
		}
		if it.Err() != nil {
			t.Fatal(it.Err())
		}
		if !it.Complete() {
			for _, uk := range mr.uks {
				if _, st := tb.MapGet(o, []byte(key), []byte(uk)); st != Absent {
					continue
				}
				if v, ok := low.mapGet(o, key, uk); ok {
					gotM[uk] = v
				}
			}
		}
		if len(gotM) != len(wantM) {
			t.Fatalf("step %d: MapIter(%s) = %v; model %v", step, key, gotM, wantM)
		}
		for uk, v := range wantM {
			if gotM[uk] != v {
				t.Fatalf("step %d: MapIter(%s) = %v; model %v", step, key, gotM, wantM)
			}
		}
	}
	st := tb.Stats()
	as := mr.e.a.Stats()
	// Held segments past ceil(blocks / per segment) + 1 mean more than a
	// segment's worth of free blocks: a relocation must be proposed.
	if as := mr.e.a.Stats(); mr.reloc == nil && as.Segments > heldBound(as) {
		var ok bool
		if mr.reloc, ok = tb.PickRelocation(); !ok {
			t.Fatalf("step %d: no relocation proposed with %+v", step, as)
		}
	}
	copies := 0 // blocks of a pending relocation: its copies, and the slices that left the table
	if mr.reloc != nil {
		copies = len(mr.reloc.moved)
		for _, s := range mr.reloc.slices {
			if s.dropped {
				copies++
			}
		}
	}
	if int64((as.Blocks-copies)*as.BlockSize)+as.OversizedSize != st.MemBytes {
		t.Fatalf("step %d: table holds %d bytes, allocator %d blocks (%d copies) + %d oversized", step, st.MemBytes, as.Blocks, copies, as.OversizedSize)
	}
}

// TestModel drives a Table with random transforms (Build+Install),
// compactions (sometimes cancelled), evictions into a test sink (sometimes
// failing), relocations (pending across other steps, sometimes cancelled;
// the allocator uses a few blocks per segment so that segments fragment),
// and clock jumps, and checks every read — through the SliceTable and then
// the sink's data, as the store will — against Go maps.
func TestModel(t *testing.T) {
	seeds := []uint64{1, 2, 3, uint64(time.Now().UnixNano())}
	if *seedFlag != 0 {
		seeds = []uint64{*seedFlag}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Logf("replay with -seed=%d", seed)
			r := rand.New(rand.NewPCG(seed, seed^0x5eed))
			bits := []int{-1, 1, 3}[r.IntN(3)]
			perSeg := 2 + r.IntN(10)
			e := newEnvSeg(t, MinSliceSize, perSeg, Options{BucketBits: bits, CompactionThreshold: 1 + r.IntN(4),
				HighWatermark: int64(2+r.IntN(6)) * MinSliceSize, EvictionBatch: int64(1+r.IntN(4)) * MinSliceSize,
				HeatHalfLife: time.Second, LowerTier: r.IntN(4) == 0, MaxListMerge: []int{0, 2, 40, 5000}[r.IntN(4)]})
			mr := &modelRun{t: t, r: r, e: e, low: &lowerTier{}, nKeys: 20 + r.IntN(60),
				m:   model{vals: map[string]string{}, lists: map[string]string{}, maps: map[string]map[string]string{}},
				uks: []string{"", "a", "b", "c", "d", "dd", "e"}}
			for step := 0; step < *stepsFlag; step++ {
				op := r.IntN(22)
				if debugFrom > 0 && step >= debugFrom {
					t.Logf("step %d op %d", step, op)
				}
				switch {
				case op < 10:
					mr.batch()
				case op < 14:
					mr.compact()
				case op < 17:
					mr.evict()
				case op < 18:
					e.clk.now += time.Duration(r.IntN(3000)) * time.Millisecond
				case op >= 20:
					mr.relocate()
				default:
					// Reads heat some slices up.
					for i := 0; i < 20; i++ {
						k := r.IntN(mr.nKeys)
						e.t.Get(mr.order('v', k), []byte(mr.key('v', k)))
					}
				}
				if debugFrom > 0 && step >= debugFrom {
					dumpKey(t, e.t, mr.order('m', 9), "m9")
				}
				if step%*checkFlag == 0 {
					mr.check(step)
				}
			}
			mr.check(*stepsFlag)
			for mr.reloc != nil {
				mr.relocate()
			}
			relocateAll(t, e.t)
			if as := e.a.Stats(); as.Segments > heldBound(as) {
				t.Errorf("after relocating: %+v", as)
			}
			mr.check(*stepsFlag)
			st := e.t.Stats()
			t.Logf("stats %+v; sink calls %d, entries %d; allocator %+v", st, mr.low.calls, len(mr.low.es), e.a.Stats())
			if st.Compactions == 0 || st.Evictions == 0 || seed <= 3 && st.Relocations == 0 {
				t.Errorf("the run did not exercise compaction (%d), eviction (%d) and relocation (%d)", st.Compactions, st.Evictions, st.Relocations)
			}
		})
	}
}

var debugFrom = 0

func dumpKey(t *testing.T, tb *Table, o uint64, key string) {
	c := &tb.buckets[tb.BucketOf(o)]
	for ri, r := range c.runs {
		for si, s := range r.slices {
			for i := 0; i < s.count; i++ {
				var e base.Entry
				s.Entry(i, &e)
				if e.Order == o && string(e.Key) == key {
					t.Logf("  run %d (id %d) slice %d busy=%v: %v uk=%q seq=%d %q", ri, r.id, si, s.busy, e.Kind, e.UserKey, e.Seq, e.Value)
				}
			}
		}
	}
}
