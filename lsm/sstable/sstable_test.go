package sstable

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/internal/vfs"
	"github.com/strata-db/strata/memory"
)

// ent is an owned copy of an entry.
type ent struct {
	Order, Hash, UserHash, Seq uint64
	Kind                       base.Kind
	Key, UserKey, Value        []byte
}

func own(e *base.Entry) ent {
	return ent{e.Order, e.Hash, e.UserHash, e.Seq, e.Kind,
		bytes.Clone(e.Key), bytes.Clone(e.UserKey), bytes.Clone(e.Value)}
}

func (x *ent) entry() *base.Entry {
	return &base.Entry{Order: x.Order, Hash: x.Hash, UserHash: x.UserHash, Seq: x.Seq, Kind: x.Kind,
		Key: x.Key, UserKey: x.UserKey, Value: x.Value}
}

func (x ent) String() string {
	return fmt.Sprintf("{%#x %s key=%x uk=%x seq=%d v=%d}", x.Order, x.Kind, x.Key, x.UserKey, x.Seq, len(x.Value))
}

func equalEnt(a, b ent) bool {
	return a.Order == b.Order && a.Hash == b.Hash && a.UserHash == b.UserHash && a.Seq == b.Seq &&
		a.Kind == b.Kind && bytes.Equal(a.Key, b.Key) && bytes.Equal(a.UserKey, b.UserKey) &&
		bytes.Equal(a.Value, b.Value)
}

func cmpEnt(a, b ent) int {
	return base.Compare(a.entry(), b.entry())
}

// genOpts shapes a random entry set.
type genOpts struct {
	keys        int // distinct (Order, Key) groups
	maxVersions int // versions per key (1..maxVersions)
	mapShare    int // percent of keys that are maps
	mapSize     int // user keys per map (1..mapSize)
	collide     int // percent of keys that reuse the previous key's Order (order-hash collision)
	maxValue    int // value length 0..maxValue
	bigValue    int // percent of values of 2..4 × bigSize bytes
	bigSize     int
}

// genEntries returns a sorted, duplicate-free entry set exercising every
// kind, multi-version keys, map runs and Order collisions.
func genEntries(r *rand.Rand, o genOpts) []ent {
	var out []ent
	seq := uint64(1)
	val := func() []byte {
		n := r.IntN(o.maxValue + 1)
		if o.bigValue > 0 && r.IntN(100) < o.bigValue {
			n = o.bigSize * (2 + r.IntN(3))
		}
		v := make([]byte, n)
		for i := range v {
			v[i] = byte(r.Uint32())
		}
		return v
	}
	var order uint64
	for k := 0; k < o.keys; k++ {
		if k == 0 || r.IntN(100) >= o.collide {
			order = r.Uint64()
		}
		key := make([]byte, 2+r.IntN(20))
		for i := range key {
			key[i] = byte(r.Uint32())
		}
		hash := r.Uint64()
		if r.IntN(100) < o.mapShare {
			if r.IntN(3) == 0 { // map-level tombstone
				out = append(out, ent{Order: order, Hash: hash, Seq: seq, Kind: base.KindTombstone, Key: key})
				seq++
			}
			n := 1 + r.IntN(o.mapSize)
			for u := 0; u < n; u++ {
				uk := make([]byte, r.IntN(12)) // empty user keys too
				for i := range uk {
					uk[i] = byte(r.Uint32())
				}
				uh := r.Uint64()
				if r.IntN(10) == 0 {
					uh = 0
				}
				for v := 1 + r.IntN(o.maxVersions); v > 0; v-- {
					kind := base.KindMapEntry
					var value []byte
					if r.IntN(4) == 0 {
						kind = base.KindMapEntryTombstone
					} else {
						value = val()
					}
					out = append(out, ent{Order: order, Hash: hash, UserHash: uh, Seq: seq, Kind: kind,
						Key: key, UserKey: uk, Value: value})
					seq++
				}
			}
			continue
		}
		kinds := []base.Kind{base.KindValue, base.KindTombstone, base.KindListBase, base.KindListAppend}
		for v := 1 + r.IntN(o.maxVersions); v > 0; v-- {
			kind := kinds[r.IntN(len(kinds))]
			var value []byte
			if kind != base.KindTombstone {
				value = val()
			}
			out = append(out, ent{Order: order, Hash: hash, Seq: seq, Kind: kind, Key: key, Value: value})
			seq++
		}
	}
	slices.SortFunc(out, cmpEnt)
	// Drop duplicates of (Order, Key, UserKey, Seq) (random keys may repeat).
	return slices.CompactFunc(out, func(a, b ent) bool { return cmpEnt(a, b) == 0 })
}

// writeFile writes es to name on fs and returns the file's bytes and Meta.
func writeFile(t testing.TB, fs vfs.FS, name string, es []ent, opts WriterOptions) Meta {
	t.Helper()
	f, err := fs.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	w := NewWriter(f, opts)
	for i := range es {
		if err := w.Add(es[i].entry()); err != nil {
			t.Fatalf("Add(%v): %v", es[i], err)
		}
	}
	m, err := w.Finish()
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return m
}

func openFile(t testing.TB, fs vfs.FS, name string, c *Cache, id uint64) *Reader {
	t.Helper()
	f, err := fs.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	r, err := Open(f, name, st.Size(), c, id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func newCache(t testing.TB, capacity int64, blockSize int) *Cache {
	t.Helper()
	c, err := NewCache(memory.NewBudget(1<<30), capacity, blockSize)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func collect(t testing.TB, f func(visit func(*base.Entry) bool) error) []ent {
	t.Helper()
	var got []ent
	if err := f(func(e *base.Entry) bool { got = append(got, own(e)); return true }); err != nil {
		t.Fatal(err)
	}
	return got
}

func sameEnts(t testing.TB, what string, got, want []ent) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d entries, want %d\n got %v\nwant %v", what, len(got), len(want), trunc(got), trunc(want))
	}
	for i := range got {
		if !equalEnt(got[i], want[i]) {
			t.Fatalf("%s: entry %d = %v, want %v", what, i, got[i], want[i])
		}
	}
}

func trunc(es []ent) []ent {
	if len(es) > 8 {
		return es[:8]
	}
	return es
}

// checkAll compares every read path of r with the sorted entry set es.
func checkAll(t *testing.T, r *Reader, es []ent) {
	t.Helper()
	// Full iteration.
	it := r.NewIter()
	var got []ent
	for it.Next() {
		got = append(got, own(it.Entry()))
	}
	if it.Err() != nil {
		t.Fatal(it.Err())
	}
	sameEnts(t, "iteration", got, es)
	m := r.Meta()
	if m.Entries != int64(len(es)) {
		t.Fatalf("Meta.Entries = %d, want %d", m.Entries, len(es))
	}
	// Get of every (Order, Key, UserKey), and MapRange of every (Order, Key).
	for i := 0; i < len(es); {
		j := i
		for j < len(es) && es[j].Order == es[i].Order && bytes.Equal(es[j].Key, es[i].Key) &&
			bytes.Equal(es[j].UserKey, es[i].UserKey) {
			j++
		}
		x := es[i]
		if !r.MayContain(x.Order) {
			t.Fatalf("MayContain(%#x) = false for a present order", x.Order)
		}
		sameEnts(t, fmt.Sprintf("Get(%v)", x), collect(t, func(v func(*base.Entry) bool) error {
			return r.Get(x.Order, x.Key, x.UserKey, v)
		}), es[i:j])
		if j-i > 1 { // visit stops when asked
			n := 0
			if err := r.Get(x.Order, x.Key, x.UserKey, func(*base.Entry) bool { n++; return false }); err != nil || n != 1 {
				t.Fatalf("Get with a visit returning false: %d visits, %v", n, err)
			}
		}
		i = j
	}
	for i := 0; i < len(es); {
		j := i
		for j < len(es) && es[j].Order == es[i].Order && bytes.Equal(es[j].Key, es[i].Key) {
			j++
		}
		x := es[i]
		sameEnts(t, fmt.Sprintf("MapRange(%v)", x), collect(t, func(v func(*base.Entry) bool) error {
			return r.MapRange(x.Order, x.Key, v)
		}), es[i:j])
		i = j
	}
	// Absent keys: a key just below and above, a missing user key, a missing order.
	for i := 0; i < len(es); i += 1 + len(es)/50 {
		x := es[i]
		for _, probe := range []ent{
			{Order: x.Order, Key: append(bytes.Clone(x.Key), 0), UserKey: x.UserKey},
			{Order: x.Order, Key: x.Key, UserKey: append(bytes.Clone(x.UserKey), 0xff, 0xff, 0xff)},
			{Order: x.Order + 1, Key: x.Key},
			{Order: x.Order - 1, Key: x.Key},
		} {
			var want []ent
			for _, y := range es {
				if y.Order == probe.Order && bytes.Equal(y.Key, probe.Key) && bytes.Equal(y.UserKey, probe.UserKey) {
					want = append(want, y)
				}
			}
			sameEnts(t, fmt.Sprintf("absent Get(%v)", probe), collect(t, func(v func(*base.Entry) bool) error {
				return r.Get(probe.Order, probe.Key, probe.UserKey, v)
			}), want)
		}
	}
	// SeekGE to present orders, to orders between, below and above all.
	for i := 0; i < len(es); i += 1 + len(es)/40 {
		for _, o := range []uint64{es[i].Order, es[i].Order + 1, es[i].Order - 1, 0, ^uint64(0)} {
			k, _ := slices.BinarySearchFunc(es, o, func(e ent, o uint64) int { return cmp.Compare(e.Order, o) })
			it := r.NewIter()
			it.SeekGE(o)
			var got []ent
			for len(got) < 3 && it.Next() {
				got = append(got, own(it.Entry()))
			}
			if it.Err() != nil {
				t.Fatal(it.Err())
			}
			want := es[k:min(k+3, len(es))]
			sameEnts(t, fmt.Sprintf("SeekGE(%#x)", o), got, want)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		g    genOpts
		w    WriterOptions
	}{
		{"kinds", genOpts{keys: 2000, maxVersions: 3, mapShare: 20, mapSize: 5, collide: 5, maxValue: 40}, WriterOptions{}},
		{"small-blocks", genOpts{keys: 500, maxVersions: 4, mapShare: 30, mapSize: 8, collide: 20, maxValue: 30}, WriterOptions{BlockSize: 256}},
		{"map-runs", genOpts{keys: 20, maxVersions: 3, mapShare: 100, mapSize: 400, collide: 30, maxValue: 20}, WriterOptions{BlockSize: 512}},
		{"collisions", genOpts{keys: 600, maxVersions: 2, mapShare: 10, mapSize: 3, collide: 90, maxValue: 60}, WriterOptions{BlockSize: 300}},
		{"big-values", genOpts{keys: 200, maxVersions: 2, mapShare: 20, mapSize: 3, collide: 10, maxValue: 50, bigValue: 10, bigSize: 1024}, WriterOptions{BlockSize: 1024}},
		{"large-blocks", genOpts{keys: 1200, maxVersions: 2, mapShare: 10, mapSize: 3, collide: 1, maxValue: 300}, WriterOptions{BlockSize: 256 << 10}},
		{"no-filter", genOpts{keys: 300, maxVersions: 2, mapShare: 20, mapSize: 4, collide: 5, maxValue: 20}, WriterOptions{BlockSize: 512, BloomBitsPerKey: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(len(tc.name)), 7))
			es := genEntries(r, tc.g)
			fs := vfs.NewMem()
			m := writeFile(t, fs, "f.sst", es, tc.w)
			if m.Entries != int64(len(es)) || m.Blocks < 1 {
				t.Fatalf("Meta = %+v for %d entries", m, len(es))
			}
			t.Logf("%d entries, %d blocks, %d bytes", m.Entries, m.Blocks, m.Size)
			if tc.w.BlockSize > 64<<10 { // blocks of 64 KiB and more use 4-byte hash slots
				rd := openFile(t, fs, "f.sst", nil, 1)
				it := rd.NewIter()
				if !it.load(0) || it.blk.width != 4 || m.Blocks < 2 {
					t.Fatalf("first large block: %d-byte slots, %d blocks, %v", it.blk.width, m.Blocks, it.Err())
				}
				rd.Close()
			}
			for _, cache := range []*Cache{nil, newCache(t, int64(4*max(tc.w.BlockSize, DefaultBlockSize)), max(tc.w.BlockSize, DefaultBlockSize)), newCache(t, 1<<20, 256<<10)} {
				rd := openFile(t, fs, "f.sst", cache, 1)
				if rd.Meta() != m {
					t.Fatalf("Reader.Meta = %+v, Writer's %+v", rd.Meta(), m)
				}
				checkAll(t, rd, es)
				if err := rd.Close(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

func TestEmptyFile(t *testing.T) {
	fs := vfs.NewMem()
	m := writeFile(t, fs, "e.sst", nil, WriterOptions{})
	if m.Entries != 0 || m.Blocks != 0 || m.Size != minFileSize+trailerSize*2+filterFooterSize {
		t.Fatalf("Meta = %+v", m)
	}
	r := openFile(t, fs, "e.sst", newCache(t, 64<<10, 0), 1)
	defer r.Close()
	checkAll(t, r, nil)
	if r.MayContain(0) || r.MayContain(5) {
		t.Fatal("an empty file may contain something")
	}
	if err := r.Get(5, []byte("k"), nil, func(*base.Entry) bool { t.Fatal("visited"); return true }); err != nil {
		t.Fatal(err)
	}
}

func TestWriterRejectsOutOfOrder(t *testing.T) {
	fs := vfs.NewMem()
	f, _ := fs.Create("o.sst")
	w := NewWriter(f, WriterOptions{})
	add := func(o uint64, k, u string, seq uint64, kind base.Kind) error {
		return w.Add(&base.Entry{Order: o, Key: []byte(k), UserKey: []byte(u), Seq: seq, Kind: kind})
	}
	if err := add(10, "b", "", 5, base.KindValue); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct {
		o    uint64
		k, u string
		seq  uint64
		kind base.Kind
	}{
		{9, "z", "", 9, base.KindValue},  // lower order
		{10, "a", "", 9, base.KindValue}, // lower key
		{10, "b", "", 5, base.KindValue}, // same version
		{10, "b", "", 6, base.KindValue}, // higher seq after lower
		{11, "a", "", 1, base.Kind(0)},   // invalid kind
		{11, "a", "", 1, base.Kind(7)},   // invalid kind
	} {
		if err := add(bad.o, bad.k, bad.u, bad.seq, bad.kind); !errors.Is(err, ErrOutOfOrder) {
			t.Fatalf("Add(%+v) = %v, want ErrOutOfOrder", bad, err)
		}
	}
	if err := add(10, "b", "", 4, base.KindValue); err != nil { // older version: fine
		t.Fatal(err)
	}
	if err := add(10, "b", "x", 9, base.KindMapEntry); err != nil { // user key after none
		t.Fatal(err)
	}
	if _, err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	if err := add(12, "a", "", 1, base.KindValue); !errors.Is(err, ErrFinished) {
		t.Fatalf("Add after Finish = %v", err)
	}
	if _, err := w.Finish(); !errors.Is(err, ErrFinished) {
		t.Fatalf("second Finish = %v", err)
	}
}
