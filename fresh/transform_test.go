package fresh

import (
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/memory"
)

// ent is an base.Entry with copied bytes, for comparisons.
type ent struct {
	Kind       base.Kind
	Key, UK, V string
	Seq        uint64
}

func (e ent) String() string {
	return fmt.Sprintf("%v %s/%s=%q@%d", e.Kind, e.Key, e.UK, e.V, e.Seq)
}

func collect(t testing.TB, it base.Iterator) []ent {
	t.Helper()
	var out []ent
	for it.Next() {
		e := it.Entry()
		if e.Hash != 0 || e.Order != 0 || e.UserHash != 0 {
			t.Fatalf("hashes set: %+v", e)
		}
		out = append(out, ent{e.Kind, string(e.Key), string(e.UserKey), string(e.Value), e.Seq})
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func sortEnts(es []ent) {
	sort.Slice(es, func(i, j int) bool { return es[i].Seq < es[j].Seq })
}

// TestSealedEntries writes every kind of record into one segment,
// including in-place rewrites, dead records, base and append chunks,
// cleared maps, entry tombstones and a map over a key tombstone, and
// checks Entries yields exactly the live records.
func TestSealedEntries(t *testing.T) {
	tb, _ := newTestTable(t, 1<<30, memory.SegmentSize16M, 0)
	b := func(s string) []byte { return []byte(s) }
	put := func(k, v string) { must(t, tb.Put(hashOf(b(k)), b(k), b(v))) }
	del := func(k string) { must(t, tb.Delete(hashOf(b(k)), b(k))) }
	app := func(k, v string) { must(t, tb.ListAppend(hashOf(b(k)), b(k), b(v))) }
	rep := func(k, v string) { must(t, tb.ListReplace(hashOf(b(k)), b(k), b(v))) }
	mp := func(m, k, v string) { must(t, mput(tb, m, k, v)) }
	mr := func(m, k string) { must(t, mrem(tb, m, k)) }
	mc := func(m string) { must(t, tb.MapClear(hashOf(b(m)), b(m))) }

	put("a", "1")        // 1, dead
	put("a", "22")       // 2: appended (larger)
	put("b", "xyz")      // 3
	put("b", "q")        // 4: in place
	del("c")             // 5: tombstone of an absent key
	put("d", "1")        // 6
	del("d")             // 7: in place
	app("L1", "x")       // 8: a first chunk, no slack
	app("L1", "y")       // 9: new chunk, capacity 2
	app("L1", "z")       // 10: in place
	rep("L2", "abc")     // 11: base, no slack
	app("L2", "d")       // 12: new chunk over the base
	app("L3", "1")       // 13
	app("L3", "2")       // 14: second chunk, capacity 2
	app("L3", "3")       // 15: in place
	rep("L3", "zz")      // 16: in place into it, the first dies
	rep("L4", "")        // 17: tombstone (dies)
	app("L4", "n")       // 18: base after the tombstone
	mp("M1", "u1", "v1") // 19 header, 20 entry
	mp("M1", "u2", "v2") // 21
	mr("M1", "u2")       // 22: in place
	mp("M1", "u1", "w")  // 23: in place
	mp("M2", "a", "1")   // 24 header (dies), 25 (dies)
	mc("M2")             // 26 base header
	mp("M2", "b", "2")   // 27
	mr("M2", "x")        // no-op: the map was cleared, x is not in it
	mp("M2", "c", "3")   // 28
	mr("M2", "c")        // 29: entry tombstone in place
	del("M3")            // 30 key tombstone (dies)
	mp("M3", "k", "v")   // 31 base header, 32 entry
	put("e", "big value")
	put("e", "v") // 34: in place
	if tb.Seq() != 34 {
		t.Fatalf("seq %d", tb.Seq())
	}
	must(t, tb.Seal())
	put("after", "seal") // in a new segment, not in the sealed one

	want := []ent{
		{base.KindValue, "a", "", "22", 2},
		{base.KindValue, "b", "", "q", 4},
		{base.KindTombstone, "c", "", "", 5},
		{base.KindTombstone, "d", "", "", 7},
		{base.KindListAppend, "L1", "", "x", 8},
		{base.KindListAppend, "L1", "", "yz", 10},
		{base.KindListBase, "L2", "", "abc", 11},
		{base.KindListAppend, "L2", "", "d", 12},
		{base.KindListBase, "L3", "", "zz", 16},
		{base.KindListBase, "L4", "", "n", 18},
		{base.KindMapEntryTombstone, "M1", "u2", "", 22},
		{base.KindMapEntry, "M1", "u1", "w", 23},
		{base.KindTombstone, "M2", "", "", 26},
		{base.KindMapEntry, "M2", "b", "2", 27},
		{base.KindMapEntryTombstone, "M2", "c", "", 29},
		{base.KindTombstone, "M3", "", "", 31},
		{base.KindMapEntry, "M3", "k", "v", 32},
		{base.KindValue, "e", "", "v", 34},
	}
	ss := tb.Sealed()
	if len(ss) != 1 {
		t.Fatalf("%d sealed segments", len(ss))
	}
	got := collect(t, ss[0].Entries())
	sortEnts(got)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("entries:\n%v\nwant\n%v", got, want)
	}
	st := tb.Stats()
	if ss[0].DataBytes() != st.SealedDataBytes || st.SealedDataBytes == 0 || st.SealedDataBytes >= st.DataBytes {
		t.Fatalf("sealed bytes %d, stats %+v", ss[0].DataBytes(), st)
	}
	if st.SealedBytes != int64(memory.SegmentSize16M+minIndexBytes) {
		t.Fatalf("SealedBytes %d", st.SealedBytes)
	}
	if st.GarbageRecords != 6 {
		t.Fatalf("%d dead records, want 6 (a, L3's first chunk, L4's tombstone, M2's header and entry, M3's tombstone)", st.GarbageRecords)
	}
	if tb.Sealed()[0] != ss[0] {
		t.Fatal("a segment's handle changed")
	}
	must(t, tb.Verify())
}

// TestDropSealed: only the oldest sealed segment may be dropped; dropping
// returns its memory, reads continue in the segments left, Seq continues,
// and a dropped handle's Entries reports ErrSegmentDropped.
func TestDropSealed(t *testing.T) {
	tb, p := newTestTable(t, 1<<30, memory.SegmentSize16M, 0)
	bud := p.Budget()
	k := func(i int) []byte { return []byte(fmt.Sprint("k", i)) }
	for i := 0; i < 3; i++ {
		must(t, tb.Put(hashOf(k(i)), k(i), []byte("old")))
		must(t, tb.Put(hashOf(k(9)), k(9), fmt.Append(nil, "v", i)))
		must(t, tb.Seal())
	}
	must(t, tb.Put(hashOf(k(3)), k(3), []byte("active")))
	ss := tb.Sealed()
	if len(ss) != 3 || tb.Stats().Sealed != 3 {
		t.Fatalf("%d sealed", len(ss))
	}
	for _, s := range []*SealedSegment{ss[1], ss[2], nil, {}} {
		if err := tb.DropSealed(s); !errors.Is(err, ErrNotOldestSealed) {
			t.Fatalf("drop of a newer segment: %v", err)
		}
	}
	other, _ := newTestTable(t, 1<<30, memory.SegmentSize16M, 0)
	must(t, other.Put(1, []byte("x"), nil))
	must(t, other.Seal())
	if err := tb.DropSealed(other.Sealed()[0]); !errors.Is(err, ErrNotOldestSealed) {
		t.Fatalf("drop of another table's segment: %v", err)
	}
	if st := tb.Stats(); st.Segments != 4 || st.DroppedSegments != 0 {
		t.Fatalf("a refused drop changed the table: %+v", st)
	}

	it := tb.MapIter(1, []byte("no map")) // needs every segment: no base
	seq := tb.Seq()
	index := bud.UsedBy(memory.PurposeFreshIndex)
	data := bud.UsedBy(memory.PurposeFreshData)
	must(t, tb.DropSealed(ss[0]))
	if got := bud.UsedBy(memory.PurposeFreshIndex); got != index-minIndexBytes {
		t.Fatalf("index bytes %d -> %d", index, got)
	}
	if got := bud.UsedBy(memory.PurposeFreshData); got != data-memory.SegmentSize16M || p.Free() != 1 {
		t.Fatalf("data bytes %d -> %d, pool free %d", data, got, p.Free())
	}
	if err := tb.DropSealed(ss[0]); !errors.Is(err, ErrNotOldestSealed) {
		t.Fatalf("second drop: %v", err)
	}
	e := ss[0].Entries()
	if e.Next() || !errors.Is(e.Err(), ErrSegmentDropped) {
		t.Fatalf("entries of a dropped segment: %v", e.Err())
	}
	if it.Next() || !errors.Is(it.Err(), ErrSegmentDropped) || it.Complete() {
		t.Fatalf("MapIter across a drop: %v", it.Err())
	}
	if _, st := tb.Get(hashOf(k(0)), k(0)); st != Absent {
		t.Fatalf("dropped key reads %v", st)
	}
	if v, st := tb.Get(hashOf(k(9)), k(9)); st != Found || string(v) != "v2" {
		t.Fatalf("k9 = %q %v", v, st)
	}
	must(t, tb.DropSealed(ss[1]))
	must(t, tb.DropSealed(ss[2]))
	if err := tb.DropSealed(ss[2]); !errors.Is(err, ErrNotOldestSealed) {
		t.Fatalf("drop with only the active segment left: %v", err)
	}
	st := tb.Stats()
	if st.Segments != 1 || st.Sealed != 0 || st.SealedBytes != 0 || st.DroppedSegments != 3 {
		t.Fatalf("after drops: %+v", st)
	}
	if bud.UsedBy(memory.PurposeFreshData) != memory.SegmentSize16M || p.Free() != memory.MaxFree {
		t.Fatalf("data %d, free %d", bud.UsedBy(memory.PurposeFreshData), p.Free())
	}
	if tb.Seq() != seq {
		t.Fatal("drops changed Seq")
	}
	// Drop the last segment too: the table is empty, Seq goes on.
	must(t, tb.Seal())
	must(t, tb.DropSealed(tb.Sealed()[0]))
	if st := tb.Stats(); st.Segments != 0 || st.DataBytes != 0 {
		t.Fatalf("empty table: %+v", st)
	}
	if _, st := tb.Get(hashOf(k(3)), k(3)); st != Absent {
		t.Fatal("read after dropping every segment")
	}
	must(t, tb.Put(hashOf(k(5)), k(5), []byte("new")))
	if tb.Seq() != seq+1 {
		t.Fatalf("Seq %d after %d", tb.Seq(), seq)
	}
	must(t, tb.Seal())
	if es := collect(t, tb.Sealed()[0].Entries()); len(es) != 1 || es[0].Seq != seq+1 {
		t.Fatalf("entries %v", es)
	}
	must(t, tb.Verify())
	must(t, tb.Close())
	if err := tb.DropSealed(nil); !errors.Is(err, base.ErrClosed) {
		t.Fatalf("drop after Close: %v", err)
	}
}

// TestMapIterAcrossDrop: a MapIter bounded by a base header in a newer
// segment survives drops of older segments (its indices shift); one that
// needs a dropped segment ends with ErrSegmentDropped.
func TestMapIterAcrossDrop(t *testing.T) {
	tb, _ := newTestTable(t, 1<<30, memory.SegmentSize16M, 0)
	must(t, mput(tb, "m", "old", "1"))
	must(t, tb.Seal())
	must(t, tb.MapClear(hashOf([]byte("m")), []byte("m")))
	must(t, mput(tb, "m", "a", "1"))
	must(t, mput(tb, "m", "b", "2"))
	must(t, tb.Seal())
	must(t, mput(tb, "m", "c", "3"))
	it := tb.MapIter(hashOf([]byte("m")), []byte("m"))
	var got []string
	if !it.Next() {
		t.Fatal("empty")
	}
	got = append(got, string(it.UserKey()))
	must(t, tb.DropSealed(tb.Sealed()[0])) // below the base header
	for it.Next() {
		got = append(got, string(it.UserKey()))
	}
	sort.Strings(got)
	if it.Err() != nil || !it.Complete() || strings.Join(got, ",") != "a,b,c" {
		t.Fatalf("iterated %v, err %v, complete %v", got, it.Err(), it.Complete())
	}
}

// segSum is a checksum of a segment's used bytes and its index.
func segSum(s *segment) [2]uint32 {
	return [2]uint32{crc32.ChecksumIEEE(s.data[:s.used]), crc32.ChecksumIEEE(s.idx)}
}

// deltaModel is what one segment holds of each key: the writes made while
// it was active, as the lower tiers must see them.
type deltaModel struct {
	kv    map[string]ent // last value or tombstone
	lists map[string]*listDelta
	maps  map[string]*mapDelta
}

type listDelta struct {
	base, tomb bool
	content    string
	seq        uint64 // last write
}

type mapDelta struct {
	cleared   bool   // a map tombstone (clear or key tombstone) in the segment
	tombSeq   uint64 // its sequence number
	hasHeader bool   // a live map header in the segment
	records   bool   // the header has entry records
	entries   map[string]ent
}

func newDelta() *deltaModel {
	return &deltaModel{map[string]ent{}, map[string]*listDelta{}, map[string]*mapDelta{}}
}

// expect returns the entries the model says the segment holds; list keys
// map to their concatenated content, checked separately.
func (d *deltaModel) check(t *testing.T, got []ent) {
	t.Helper()
	var want, wantLists []ent
	for _, e := range d.kv {
		want = append(want, e)
	}
	for k, m := range d.maps {
		if m.cleared {
			want = append(want, ent{base.KindTombstone, k, "", "", m.tombSeq})
		}
		for _, e := range m.entries {
			want = append(want, e)
		}
	}
	lists := map[string][]ent{}
	var rest []ent
	for _, e := range got {
		if e.Kind == base.KindListAppend || e.Kind == base.KindListBase || d.lists[e.Key] != nil && e.Kind == base.KindTombstone {
			lists[e.Key] = append(lists[e.Key], e)
		} else {
			rest = append(rest, e)
		}
	}
	sortEnts(want)
	sortEnts(rest)
	if fmt.Sprint(rest) != fmt.Sprint(want) {
		t.Fatalf("segment entries:\n%v\nmodel:\n%v", rest, want)
	}
	for k, l := range d.lists {
		es := lists[k]
		delete(lists, k)
		sortEnts(es)
		wantLists = append(wantLists, ent{Key: k, V: l.content, Seq: l.seq})
		if len(es) == 0 {
			t.Fatalf("list %s: no entry, model %+v", k, l)
		}
		if last := es[len(es)-1].Seq; last != l.seq {
			t.Fatalf("list %s: newest entry at %d, last write %d", k, last, l.seq)
		}
		var content string
		for i, e := range es {
			if e.Kind == base.KindListBase && i != 0 || e.Kind == base.KindTombstone && len(es) != 1 {
				t.Fatalf("list %s: %v", k, es)
			}
			content += e.V
		}
		if l.tomb != (es[0].Kind == base.KindTombstone) || l.base != (es[0].Kind == base.KindListBase) || content != l.content {
			t.Fatalf("list %s: %v, model %+v", k, es, l)
		}
	}
	if len(lists) != 0 {
		t.Fatalf("lists not in the model: %v", lists)
	}
}

// TestSealedEntriesModel drives a Table with random writes of every kind
// and random seals over small segments, models what each segment must
// yield, and checks Entries of every sealed segment against the model, and
// that no sealed segment's bytes or index ever change afterwards.
func TestSealedEntriesModel(t *testing.T) {
	seed := *seedFlag
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	t.Logf("seed %d (replay with -seed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 11))
	tb, _ := newTestTable(t, 8<<30, memory.SegmentSize16M, 8<<10)
	val := func() string {
		n := rng.IntN(12)
		if rng.IntN(30) == 0 {
			n = rng.IntN(1500)
		}
		return strings.Repeat(string(rune('a'+rng.IntN(26))), n) + fmt.Sprint(rng.IntN(100))
	}
	b := func(s string) []byte { return []byte(s) }
	type sealed struct {
		s   *segment
		sum [2]uint32
		d   *deltaModel
	}
	var done []sealed
	d := newDelta()
	var active *segment
	ops := 30000
	if testing.Short() {
		ops = 4000
	}
	checkSealed := func() {
		for i, s := range done {
			if segSum(s.s) != s.sum {
				t.Fatalf("sealed segment %d changed", i)
			}
		}
	}
	for i := 0; i < ops; i++ {
		if rng.IntN(300) == 0 {
			must(t, tb.Seal())
		}
		prev := tb.active
		seq0 := tb.Seq()
		var apply func(seq uint64)
		switch p := rng.IntN(100); {
		case p < 15:
			k, v := fmt.Sprint("kv", rng.IntN(40)), val()
			must(t, tb.Put(hashOf(b(k)), b(k), b(v)))
			apply = func(seq uint64) { d.kv[k] = ent{base.KindValue, k, "", v, seq} }
		case p < 20:
			k := fmt.Sprint("kv", rng.IntN(40))
			must(t, tb.Delete(hashOf(b(k)), b(k)))
			apply = func(seq uint64) { d.kv[k] = ent{base.KindTombstone, k, "", "", seq} }
		case p < 45:
			k, v := fmt.Sprint("list", rng.IntN(15)), val()
			must(t, tb.ListAppend(hashOf(b(k)), b(k), b(v)))
			apply = func(seq uint64) {
				l := d.lists[k]
				if l == nil {
					l = &listDelta{}
					d.lists[k] = l
				}
				if l.tomb {
					*l = listDelta{base: true}
				}
				l.content += v
				l.seq = seq
			}
		case p < 55:
			k, v := fmt.Sprint("list", rng.IntN(15)), val()
			if rng.IntN(5) == 0 {
				v = ""
			}
			must(t, tb.ListReplace(hashOf(b(k)), b(k), b(v)))
			apply = func(seq uint64) { d.lists[k] = &listDelta{base: v != "", tomb: v == "", content: v, seq: seq} }
		default:
			mk, uk, v := fmt.Sprint("map", rng.IntN(8)), fmt.Sprint("u", rng.IntN(20)), val()
			mm := func() *mapDelta {
				m := d.maps[mk]
				if m == nil {
					m = &mapDelta{entries: map[string]ent{}}
					d.maps[mk] = m
				}
				return m
			}
			switch q := rng.IntN(100); {
			case q < 60:
				must(t, mput(tb, mk, uk, v))
				apply = func(seq uint64) {
					m := mm()
					if m.cleared && !m.hasHeader {
						m.tombSeq = seq - 1 // the base header's
					}
					m.hasHeader, m.records = true, true
					m.entries[uk] = ent{base.KindMapEntry, mk, uk, v, seq}
				}
			case q < 85:
				must(t, mrem(tb, mk, uk))
				apply = func(seq uint64) {
					m := mm()
					if _, ok := m.entries[uk]; !ok && m.cleared && m.hasHeader {
						return // no-op
					}
					if m.cleared && !m.hasHeader {
						m.tombSeq = seq - 1
					}
					m.hasHeader, m.records = true, true
					m.entries[uk] = ent{base.KindMapEntryTombstone, mk, uk, "", seq}
				}
			case q < 95:
				must(t, tb.MapClear(hashOf(b(mk)), b(mk)))
				apply = func(seq uint64) {
					m := mm()
					if m.cleared && m.hasHeader && !m.records {
						return // no-op
					}
					*m = mapDelta{cleared: true, tombSeq: seq, hasHeader: true, entries: map[string]ent{}}
				}
			default:
				must(t, tb.Delete(hashOf(b(mk)), b(mk)))
				apply = func(seq uint64) {
					*mm() = mapDelta{cleared: true, tombSeq: seq, entries: map[string]ent{}}
				}
			}
		}
		if tb.Seq() == seq0 {
			if tb.active != prev {
				t.Fatal("a no-op write rolled the segment")
			}
			continue
		}
		if tb.active != active {
			// The write went to a new segment: the model's segment is done.
			if active != nil {
				if !active.sealed {
					t.Fatal("old active segment not sealed")
				}
				done = append(done, sealed{active, segSum(active), d})
				ss := tb.Sealed()
				d.check(t, collect(t, ss[len(ss)-1].Entries()))
				d = newDelta()
			}
			active = tb.active
		}
		apply(tb.Seq())
		if i%1000 == 0 {
			checkSealed()
			must(t, tb.Verify())
		}
	}
	checkSealed()
	if len(done) < 10 {
		t.Fatalf("only %d segments sealed", len(done))
	}
	ss := tb.Sealed()
	for i, s := range done {
		s.d.check(t, collect(t, ss[i].Entries()))
	}
	must(t, tb.Verify())
}

// TestSealedEntriesConcurrent runs the transform's flow under -race: the
// owner writes (and seals) while a background goroutine reads each sealed
// segment's Entries into a "lower tier" it hands back; the owner installs
// it and drops the oldest segment, and every read of the owner, through
// fresh then the lower tier, agrees with a Go map.
func TestSealedEntriesConcurrent(t *testing.T) {
	tb, _ := newTestTable(t, 8<<30, memory.SegmentSize16M, 16<<10)
	type result struct {
		s       *SealedSegment
		entries map[string]ent
		sum     uint32
		err     error
	}
	jobs := make(chan *SealedSegment, 64)
	results := make(chan result, 64)
	go func() {
		defer close(results)
		for s := range jobs {
			r := result{s: s, entries: map[string]ent{}}
			it := s.Entries()
			for it.Next() {
				e := it.Entry()
				r.sum = crc32.Update(r.sum, crc32.IEEETable, e.Key)
				r.sum = crc32.Update(r.sum, crc32.IEEETable, e.Value)
				r.entries[string(e.Key)] = ent{e.Kind, string(e.Key), "", string(e.Value), e.Seq}
			}
			r.err = it.Err()
			results <- r
		}
	}()
	lower := map[string]ent{}
	model := map[string]string{}
	busy := map[*SealedSegment]bool{}
	var pending []result
	rng := rand.New(rand.NewPCG(5, 5))
	b := func(s string) []byte { return []byte(s) }
	read := func(k string) {
		v, st := tb.Get(hashOf(b(k)), b(k))
		if st == Absent {
			if e, ok := lower[k]; ok {
				v, st = []byte(e.V), Found
				if e.Kind == base.KindTombstone {
					v, st = nil, Deleted
				}
			}
		}
		w, ok := model[k]
		if ok != (st == Found) || string(v) != w {
			t.Fatalf("%s = %q %v, model %q %v", k, v, st, w, ok)
		}
	}
	drops := 0
	for i := 0; i < 40000; i++ {
		k := fmt.Sprint("k", rng.IntN(2000))
		if rng.IntN(10) == 0 {
			must(t, tb.Delete(hashOf(b(k)), b(k)))
			delete(model, k)
		} else {
			v := fmt.Sprint(i, strings.Repeat("x", rng.IntN(40)))
			must(t, tb.Put(hashOf(b(k)), b(k), b(v)))
			model[k] = v
		}
		read(fmt.Sprint("k", rng.IntN(2000)))
		for _, s := range tb.Sealed() {
			if !busy[s] {
				busy[s] = true
				jobs <- s
			}
		}
		// Install finished jobs oldest first, as the root does.
		select {
		case r := <-results:
			pending = append(pending, r)
		default:
		}
		for {
			ss := tb.Sealed()
			j := -1
			for n, r := range pending {
				if len(ss) > 0 && r.s == ss[0] {
					j = n
				}
			}
			if j < 0 {
				break
			}
			r := pending[j]
			pending = append(pending[:j], pending[j+1:]...)
			must(t, r.err)
			// The owner's own read of the segment agrees with the
			// background's, read while it was writing.
			var sum uint32
			it := r.s.Entries()
			for it.Next() {
				sum = crc32.Update(sum, crc32.IEEETable, it.Entry().Key)
				sum = crc32.Update(sum, crc32.IEEETable, it.Entry().Value)
			}
			if sum != r.sum {
				t.Fatal("background and owner read different entries")
			}
			for k, e := range r.entries {
				if old, ok := lower[k]; !ok || old.Seq < e.Seq {
					lower[k] = e
				}
			}
			must(t, tb.DropSealed(r.s))
			delete(busy, r.s)
			drops++
		}
	}
	close(jobs)
	for range results {
	}
	for k := range model {
		read(k)
	}
	if drops < 5 {
		t.Fatalf("only %d drops", drops)
	}
	must(t, tb.Verify())
}
