package lsm

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/internal/vfs"
)

var seedFlag = flag.Int64("seed", 0, "seed for the model-based and crash tests (0 = time-based)")

func testSeed(t testing.TB) uint64 {
	seed := *seedFlag
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	t.Logf("seed %d (replay with -seed=%d)", seed, seed)
	return uint64(seed)
}

// sliceIter is an base.Iterator over a sorted slice.
type sliceIter struct {
	es  []base.Entry
	i   int
	err error
}

func (s *sliceIter) Next() bool {
	if s.i >= len(s.es) {
		return false
	}
	s.i++
	return true
}
func (s *sliceIter) Entry() *base.Entry { return &s.es[s.i-1] }
func (s *sliceIter) Err() error         { return s.err }

// keySpace describes the keys a workload writes: value keys, list keys and
// maps with user keys. Orders come from a small space so distinct keys share
// an Order now and then.
type keySpace struct {
	values, lists, maps, userKeys int
	orderBits                     uint
}

type keyKind uint8

const (
	kValue keyKind = iota
	kList
	kMap
)

type testKey struct {
	kind  keyKind
	key   string
	order uint64
}

func (ks keySpace) all() []testKey {
	var out []testKey
	add := func(kind keyKind, prefix string, n int) {
		for i := range n {
			k := fmt.Sprintf("%s%04d", prefix, i)
			out = append(out, testKey{kind: kind, key: k, order: orderOf(k, ks.orderBits)})
		}
	}
	add(kValue, "v", ks.values)
	add(kList, "l", ks.lists)
	add(kMap, "m", ks.maps)
	return out
}

func orderOf(k string, bits uint) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(k); i++ {
		h ^= uint64(k[i])
		h *= 1099511628211
	}
	h ^= h >> 29
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 32
	if bits < 64 {
		// Spread a small space over the whole range so level ranges stay
		// meaningful while collisions happen.
		h = (h >> (64 - bits)) << (64 - bits)
	}
	return h
}

// gen produces random entries over a keySpace with increasing sequence numbers.
type gen struct {
	rng  *rand.Rand
	ks   keySpace
	keys []testKey
	seq  uint64
	vlen int
}

func newGen(rng *rand.Rand, ks keySpace) *gen {
	return &gen{rng: rng, ks: ks, keys: ks.all(), vlen: 24}
}

func (g *gen) value() []byte {
	n := g.rng.IntN(g.vlen + 1)
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + g.rng.IntN(26))
	}
	return b
}

// batch returns n entries in entry order with fresh sequence numbers.
func (g *gen) batch(n int) []base.Entry {
	es := make([]base.Entry, 0, n)
	for range n {
		k := g.keys[g.rng.IntN(len(g.keys))]
		g.seq++
		e := base.Entry{Order: k.order, Hash: k.order ^ 0x5555, Seq: g.seq, Key: []byte(k.key)}
		r := g.rng.IntN(10)
		switch k.kind {
		case kValue:
			if r < 8 {
				e.Kind, e.Value = base.KindValue, g.value()
			} else {
				e.Kind = base.KindTombstone
			}
		case kList:
			switch {
			case r < 6 || k.key[len(k.key)-1] == '7': // lists ending in 7 only ever grow
				e.Kind, e.Value = base.KindListAppend, g.value()
			case r < 8:
				e.Kind, e.Value = base.KindListBase, g.value()
			default:
				e.Kind = base.KindTombstone
			}
		case kMap:
			if r == 0 {
				e.Kind = base.KindTombstone // map clear
				break
			}
			uk := fmt.Sprintf("u%03d", g.rng.IntN(g.ks.userKeys))
			if g.ks.userKeys > 2 && g.rng.IntN(20) == 0 {
				uk = "" // the empty user key shares (Key, "") with the map clear
			}
			e.UserKey = []byte(uk)
			e.UserHash = uint64(len(uk)) + 1
			if r < 8 {
				e.Kind, e.Value = base.KindMapEntry, g.value()
			} else {
				e.Kind = base.KindMapEntryTombstone
			}
		}
		es = append(es, e)
	}
	slices.SortFunc(es, func(a, b base.Entry) int { return base.Compare(&a, &b) })
	return es
}

// model is the acknowledged history: every installed entry, by key.
type model struct {
	byKey map[string][]base.Entry // newest last
}

func newModel() *model { return &model{byKey: map[string][]base.Entry{}} }

func (m *model) clone() *model {
	c := newModel()
	for k, v := range m.byKey {
		c.byKey[k] = slices.Clone(v)
	}
	return c
}

func (m *model) add(es []base.Entry) {
	for _, e := range es {
		m.byKey[string(e.Key)] = append(m.byKey[string(e.Key)], e)
	}
	for k := range m.byKey {
		v := m.byKey[k]
		sort.SliceStable(v, func(i, j int) bool { return v[i].Seq < v[j].Seq })
	}
}

// resolved is a key's logical state as a string, "" meaning absent.
func resolveVersions(newestFirst []base.Entry) string {
	var ops [][]byte
	for _, e := range newestFirst {
		switch e.Kind {
		case base.KindListAppend:
			ops = append(ops, e.Value)
			continue
		case base.KindValue:
			return "V:" + string(e.Value)
		case base.KindListBase:
			s := "L:" + string(e.Value)
			for i := len(ops) - 1; i >= 0; i-- {
				s += string(ops[i])
			}
			return s
		case base.KindTombstone:
			if len(ops) == 0 {
				return ""
			}
		default:
			return fmt.Sprintf("bad kind %v", e.Kind)
		}
		break
	}
	if len(ops) == 0 {
		return ""
	}
	s := "L:"
	for i := len(ops) - 1; i >= 0; i-- {
		s += string(ops[i])
	}
	return s
}

// resolveMap resolves a map's entries (any order) to "uk=value;…" sorted.
func resolveMap(es []base.Entry) string {
	var tomb uint64
	for _, e := range es {
		if e.Kind == base.KindTombstone && len(e.UserKey) == 0 && e.Seq > tomb {
			tomb = e.Seq
		}
	}
	newest := map[string]base.Entry{}
	for _, e := range es {
		if e.Kind == base.KindTombstone || e.Seq < tomb {
			continue
		}
		if p, ok := newest[string(e.UserKey)]; !ok || e.Seq > p.Seq {
			newest[string(e.UserKey)] = e
		}
	}
	var parts []string
	for uk, e := range newest {
		if e.Kind == base.KindMapEntry {
			parts = append(parts, uk+"="+string(e.Value))
		}
	}
	sort.Strings(parts)
	var b bytes.Buffer
	for _, p := range parts {
		b.WriteString(p)
		b.WriteByte(';')
	}
	return b.String()
}

func (m *model) expect(k testKey) string {
	v := m.byKey[k.key]
	if k.kind == kMap {
		return resolveMap(v)
	}
	nf := slices.Clone(v)
	slices.Reverse(nf)
	return resolveVersions(nf)
}

func copyEntry(e *base.Entry) base.Entry {
	c := *e
	c.Key = bytes.Clone(e.Key)
	c.UserKey = bytes.Clone(e.UserKey)
	c.Value = bytes.Clone(e.Value)
	return c
}

// readKey resolves a key through the DB: Get for values and lists; for maps
// MapRange, cross-checked entry by entry with Get.
func readKey(d *DB, k testKey) (string, error) {
	if k.kind != kMap {
		var vs []base.Entry
		err := d.Get(k.order, []byte(k.key), nil, func(e *base.Entry) bool {
			vs = append(vs, copyEntry(e))
			return e.Kind == base.KindListAppend
		})
		if err != nil {
			return "", err
		}
		for i := 1; i < len(vs); i++ {
			if vs[i].Seq >= vs[i-1].Seq {
				return "", fmt.Errorf("key %s: Get not newest first: %d then %d", k.key, vs[i-1].Seq, vs[i].Seq)
			}
		}
		return resolveVersions(vs), nil
	}
	var es []base.Entry
	err := d.MapRange(k.order, []byte(k.key), nil, func(e *base.Entry) bool {
		if !bytes.Equal(e.Key, []byte(k.key)) || e.Order != k.order {
			es = append(es, base.Entry{Kind: 99})
		}
		es = append(es, copyEntry(e))
		return true
	})
	if err != nil {
		return "", err
	}
	for i := 1; i < len(es); i++ {
		if base.Compare(&es[i-1], &es[i]) >= 0 {
			return "", fmt.Errorf("map %s: MapRange out of order at %d: %q/%d then %q/%d", k.key, i,
				es[i-1].UserKey, es[i-1].Seq, es[i].UserKey, es[i].Seq)
		}
	}
	// Get of each user key must give that user key's versions, newest first.
	for i := 0; i < len(es); {
		j := i
		for j < len(es) && bytes.Equal(es[j].UserKey, es[i].UserKey) {
			j++
		}
		var got []uint64
		if err := d.Get(k.order, []byte(k.key), es[i].UserKey, func(e *base.Entry) bool {
			got = append(got, e.Seq)
			return true
		}); err != nil {
			return "", err
		}
		var want []uint64
		for _, e := range es[i:j] {
			want = append(want, e.Seq)
		}
		if !slices.Equal(got, want) {
			return "", fmt.Errorf("map %s user key %q: Get gives seqs %v, MapRange %v", k.key, es[i].UserKey, got, want)
		}
		i = j
	}
	return resolveMap(es), nil
}

// checkAll compares every key's resolved state with the model.
func checkAll(t testing.TB, d *DB, m *model, keys []testKey, when string) {
	t.Helper()
	for _, k := range keys {
		got, err := readKey(d, k)
		if err != nil {
			t.Fatalf("%s: read %s: %v", when, k.key, err)
		}
		if want := m.expect(k); got != want {
			t.Fatalf("%s: key %s: got %q, want %q", when, k.key, got, want)
		}
	}
}

// diffAll is checkAll returning the first difference.
func diffAll(d *DB, m *model, keys []testKey) error {
	for _, k := range keys {
		got, err := readKey(d, k)
		if err != nil {
			return fmt.Errorf("read %s: %w", k.key, err)
		}
		if want := m.expect(k); got != want {
			return fmt.Errorf("key %s: got %q, want %q", k.key, got, want)
		}
	}
	return nil
}

// compactAll runs every due compaction synchronously.
func compactAll(t testing.TB, d *DB) {
	t.Helper()
	for range 100 {
		j := d.PickCompaction()
		if j == nil {
			return
		}
		if err := j.Run(context.Background()); err != nil {
			t.Fatalf("compaction %v: %v", j, err)
		}
		if err := d.InstallCompaction(j); err != nil {
			t.Fatalf("install compaction %v: %v", j, err)
		}
	}
	t.Fatalf("compactions do not converge: %+v", d.Metrics().Levels)
}

func smallOptions(fs vfs.FS) Options {
	return Options{
		FS:                  fs,
		Dir:                 "/db",
		L0CompactionTrigger: 3,
		LevelSizeRatio:      4,
		BaseLevelBytes:      16 << 10,
		NumLevels:           5,
		BlockSize:           512,
		TargetFileSize:      4 << 10,
		MaxManifestBytes:    2 << 10,
		MaxListPiece:        40, // values are up to 24 bytes: long lists become chains of pieces
	}
}

// liveNums returns the numbers of the files of the current and the persisted
// version: the tables the DB must keep.
func liveNums(d *DB) map[uint64]bool {
	live := map[uint64]bool{}
	for _, v := range []*version{d.current, d.persisted} {
		if v == nil {
			continue
		}
		for _, files := range v.levels {
			for _, t := range files {
				live[t.meta.Num] = true
			}
		}
	}
	return live
}

// persistedOnDisk checks that every file of the persisted version exists
// with its recorded size (deferred deletion, doc.go invariant 10).
func persistedOnDisk(d *DB) error {
	if d.persisted == nil {
		return nil
	}
	for _, files := range d.persisted.levels {
		for _, t := range files {
			f, err := d.fs.Open(t.name)
			if err != nil {
				return fmt.Errorf("persisted file %d: %w", t.meta.Num, err)
			}
			st, err := f.Stat()
			f.Close()
			if err != nil || st.Size() != t.meta.Size {
				return fmt.Errorf("persisted file %d: stat %v, %v", t.meta.Num, st, err)
			}
		}
	}
	return nil
}

// persistClose makes the installed state a persist point and closes d.
func persistClose(t testing.TB, d *DB) {
	t.Helper()
	if err := d.Persist(d.LastSeq(), nil); err != nil {
		t.Fatalf("Persist: %v", err)
	}
	if err := d.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// strayFiles lists the directory and reports names the DB should not have.
func strayFiles(d *DB) ([]string, error) {
	names, err := d.fs.List(d.dir)
	if err != nil {
		return nil, err
	}
	live := liveNums(d)
	var stray []string
	for _, n := range names {
		kind, num := parseFileName(n)
		switch {
		case kind == kindTable && live[num], kind == kindCurrent, kind == kindLock,
			kind == kindManifest && num == d.manifestNum:
		default:
			stray = append(stray, n)
		}
	}
	return stray, nil
}

// compactToBottom compacts until every file is in the last level, then
// checks the bottom invariants: no tombstones remain, and a list operand
// only as a newer piece of a chain (rule 4), above an older piece of its
// key.
func compactToBottom(t testing.TB, d *DB) {
	t.Helper()
	last := len(d.current.levels) - 1
	for l := 0; l < last; l++ {
		for range 1000 {
			j := d.CompactLevel(l)
			if j == nil {
				break
			}
			if err := j.Run(context.Background()); err != nil {
				t.Fatalf("compaction %v: %v", j, err)
			}
			if err := d.InstallCompaction(j); err != nil {
				t.Fatalf("install %v: %v", j, err)
			}
		}
		if n := len(d.current.levels[l]); n != 0 {
			t.Fatalf("L%d still holds %d files", l, n)
		}
	}
	for _, tf := range d.current.levels[last] {
		if tf.meta.Tombstones != 0 {
			t.Fatalf("bottom file %d holds %d tombstones", tf.meta.Num, tf.meta.Tombstones)
		}
		it := tf.r.NewIter()
		var op *base.Entry // the last entry, when it was a list operand
		for it.Next() {
			e := it.Entry()
			if op != nil && (e.Order != op.Order || !bytes.Equal(e.Key, op.Key) || !bytes.Equal(e.UserKey, op.UserKey)) {
				t.Fatalf("bottom file %d: key %q ends with a list operand, not a base", tf.meta.Num, op.Key)
			}
			op = nil
			if k := e.Kind; k == base.KindTombstone || k == base.KindMapEntryTombstone {
				t.Fatalf("bottom file %d holds a %v entry", tf.meta.Num, k)
			} else if k == base.KindListAppend {
				c := copyEntry(e)
				op = &c
			}
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
		if op != nil {
			t.Fatalf("bottom file %d: key %q ends with a list operand, not a base", tf.meta.Num, op.Key)
		}
		it.Close()
	}
}
