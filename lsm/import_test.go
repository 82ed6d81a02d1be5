package lsm

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/internal/vfs"
)

var importKeys = keySpace{values: 40, lists: 12, maps: 8, userKeys: 8, orderBits: 8}

// importSource builds a DB in dir on fsys with tables in L0 and deeper
// levels, installed but not persisted, and returns it with its batches.
func importSource(t testing.TB, fsys vfs.FS, dir string, seed uint64) (*DB, *gen, [][]base.Entry) {
	t.Helper()
	opts := smallOptions(fsys)
	opts.Dir = dir
	d, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	g := newGen(rand.New(rand.NewPCG(seed, 7)), importKeys)
	g.vlen = 12
	var batches [][]base.Entry
	for i := range 16 {
		es := g.batch(24)
		p, err := d.WriteL0(&sliceIter{es: es})
		if err != nil {
			t.Fatal(err)
		}
		if err := d.InstallL0(p, g.seq); err != nil {
			t.Fatal(err)
		}
		batches = append(batches, es)
		if i%5 == 4 && i < 13 { // the last six stay in L0
			compactAll(t, d)
		}
	}
	if len(d.current.levels[0]) == 0 || len(d.current.levels[1])+len(d.current.levels[2]) == 0 {
		t.Fatalf("source has no L0 or no deeper files: %+v", d.Metrics().Levels)
	}
	return d, g, batches
}

// clipModel is the model of batches restricted to Orders in [lo, hi].
func clipModel(m *model, batches [][]base.Entry, lo, hi uint64) {
	for _, es := range batches {
		var in []base.Entry
		for _, e := range es {
			if e.Order >= lo && e.Order <= hi {
				in = append(in, e)
			}
		}
		m.add(in)
	}
}

// copyTable writes a copy of the file src of from as dst on to, synced or not.
func copyTable(t testing.TB, from vfs.FS, src string, to vfs.FS, dst string, sync bool) {
	t.Helper()
	b, err := vfs.ReadFile(from, src)
	if err != nil {
		t.Fatal(err)
	}
	if err := to.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := to.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestSnapshot(t *testing.T) {
	mem := vfs.NewMem()
	d, _, _ := importSource(t, mem, "/db", 1)
	s := d.Snapshot()
	tabs := s.Tables()

	// Oldest first: deepest level first, L1+ by MinOrder, L0 oldest first.
	var want []SnapshotTable
	v := d.current
	for l := len(v.levels) - 1; l >= 0; l-- {
		files := slices.Clone(v.levels[l])
		if l == 0 {
			slices.Reverse(files)
		}
		for _, f := range files {
			want = append(want, SnapshotTable{Level: l, Meta: f.meta, Path: TablePath("/db", f.meta.Num)})
		}
	}
	if !slices.Equal(tabs, want) {
		t.Fatalf("Tables:\n got %+v\nwant %+v", tabs, want)
	}
	for i := 1; i < len(tabs); i++ {
		p, c := tabs[i-1], tabs[i]
		if p.Level < c.Level || (p.Level == c.Level && c.Level > 0 && p.Meta.MinOrder >= c.Meta.MinOrder) ||
			(p.Level == 0 && c.Level == 0 && p.Meta.Num >= c.Meta.Num) {
			t.Fatalf("Tables not oldest first at %d: %+v then %+v", i, p, c)
		}
	}

	// Another goroutine copies the files while the owner compacts every
	// one of them away and persists.
	done := make(chan error, 1)
	go func() {
		for _, st := range tabs {
			b, err := vfs.ReadFile(mem, st.Path)
			if err != nil {
				done <- err
				return
			}
			if int64(len(b)) != st.Meta.Size {
				done <- fmt.Errorf("%s: %d bytes, meta says %d", st.Path, len(b), st.Meta.Size)
				return
			}
		}
		done <- nil
	}()
	compactToBottom(t, d)
	if err := d.Persist(d.LastSeq(), nil); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	live := liveNums(d)
	obsolete := 0
	for _, st := range tabs {
		if _, err := mem.Stat(st.Path); err != nil {
			t.Fatalf("snapshot file %s removed before release: %v", st.Path, err)
		}
		if !live[st.Meta.Num] {
			obsolete++
		}
	}
	if obsolete == 0 {
		t.Fatal("no snapshot file became obsolete: the test proves nothing")
	}
	d.ReleaseSnapshot(s)
	d.ReleaseSnapshot(s) // idempotent
	for _, st := range tabs {
		_, err := mem.Stat(st.Path)
		if live[st.Meta.Num] != (err == nil) {
			t.Fatalf("after release: %s live %v, stat %v", st.Path, live[st.Meta.Num], err)
		}
	}
	if stray, err := strayFiles(d); err != nil || len(stray) > 0 {
		t.Fatalf("stray files after release: %v %v", stray, err)
	}

	// Close ends an open snapshot; a release after Close does nothing.
	s2 := d.Snapshot()
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d.ReleaseSnapshot(s2)
	if d.Snapshot() != nil {
		t.Fatal("Snapshot after Close is not nil")
	}
}

// importCase builds source DBs, imports their snapshots clipped into /imp and
// returns the Import arguments, the expected model and the clip ranges by
// imported file number.
type importCase struct {
	tables  []ImportTable
	lastSeq uint64
	want    *model
	keys    []testKey
	ranges  [][2]uint64 // the clip ranges, to check that no entry outside all of them survives
	dropped []uint64    // file numbers whose intersection is empty
}

const (
	clipLo = 0x40 << 56
	clipHi = 0xC0<<56 - 1
	clipMd = 0x80 << 56
)

// oneSource: one DB clipped to [clipLo, clipHi], plus a newest L0 table whose
// entries all lie below clipLo (dropped).
func oneSource(t testing.TB, mem *vfs.MemFS, sync bool) importCase {
	src, g, batches := importSource(t, mem, "/src", 1)
	defer src.Close()
	c := importCase{want: newModel(), keys: g.keys, ranges: [][2]uint64{{clipLo, clipHi}}, lastSeq: 3}
	clipModel(c.want, batches, clipLo, clipHi)
	s := src.Snapshot()
	defer src.ReleaseSnapshot(s)
	for _, st := range s.Tables() {
		copyTable(t, mem, st.Path, mem, TablePath("/imp", st.Meta.Num), sync)
		c.tables = append(c.tables, ImportTable{Num: st.Meta.Num, Level: st.Level, MinOrder: clipLo, MaxOrder: clipHi})
	}
	out := []base.Entry{{Order: 1 << 56, Seq: 1 << 40, Kind: base.KindValue, Key: []byte("outside"), Value: []byte("x")}}
	p, err := src.WriteL0(&sliceIter{es: out})
	if err != nil {
		t.Fatal(err)
	}
	copyTable(t, mem, TablePath("/src", p.Meta().Num), mem, TablePath("/imp", p.Meta().Num), sync)
	src.Discard(p)
	c.tables = append(c.tables, ImportTable{Num: p.Meta().Num, Level: 0, MinOrder: clipLo, MaxOrder: clipHi})
	c.dropped = []uint64{p.Meta().Num}
	c.lastSeq = 1 << 40 // the dropped table's MaxSeq counts too
	return c
}

// twoSources: key-group rescaling — DB A gives Orders below clipMd, DB B
// the rest; B's tables are renumbered.
func twoSources(t testing.TB, mem *vfs.MemFS, sync bool) importCase {
	a, g, ba := importSource(t, mem, "/a", 1)
	defer a.Close()
	b, _, bb := importSource(t, mem, "/b", 2)
	defer b.Close()
	c := importCase{want: newModel(), keys: g.keys, ranges: [][2]uint64{{0, clipMd - 1}, {clipMd, ^uint64(0)}}}
	clipModel(c.want, ba, 0, clipMd-1)
	clipModel(c.want, bb, clipMd, ^uint64(0))
	for i, src := range []*DB{a, b} {
		s := src.Snapshot()
		for _, st := range s.Tables() {
			num := st.Meta.Num + uint64(i)*1000
			copyTable(t, mem, st.Path, mem, TablePath("/imp", num), sync)
			c.tables = append(c.tables, ImportTable{Num: num, Level: st.Level,
				MinOrder: c.ranges[i][0], MaxOrder: c.ranges[i][1]})
		}
		src.ReleaseSnapshot(s)
		c.lastSeq = max(c.lastSeq, src.LastSeq())
	}
	return c
}

func importOptions(fsys vfs.FS) Options {
	o := smallOptions(fsys)
	o.Dir = "/imp"
	return o
}

func inRanges(order uint64, ranges [][2]uint64) bool {
	for _, r := range ranges {
		if order >= r[0] && order <= r[1] {
			return true
		}
	}
	return false
}

func TestImport(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build func(testing.TB, *vfs.MemFS, bool) importCase
	}{
		{"one source", oneSource},
		{"two sources rescaled", twoSources},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := vfs.NewMem()
			c := tc.build(t, mem, false) // unsynced: Import must sync them
			meta := []byte("registry")
			if err := Import(importOptions(mem), c.tables, 3, meta); err != nil {
				t.Fatal(err)
			}
			for _, n := range c.dropped {
				if _, err := mem.Stat(TablePath("/imp", n)); !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("table %d with an empty clip still there: %v", n, err)
				}
			}
			// Durable: a crash right after Import keeps the whole DB.
			for _, fsys := range []vfs.FS{mem.CrashClone(), mem} {
				d, err := Open(importOptions(fsys))
				if err != nil {
					t.Fatal(err)
				}
				seq, m, ok := d.PersistedMeta()
				if !ok || seq != c.lastSeq || string(m) != string(meta) || d.LastSeq() != c.lastSeq {
					t.Fatalf("PersistedMeta = %d %q %v, LastSeq %d; want %d %q", seq, m, ok, d.LastSeq(), c.lastSeq, meta)
				}
				checkImported(t, d, c)
				if fsys == mem {
					compactImported(t, d, c)
				}
				d.Close()
			}
			// The compacted state persists.
			d, err := Open(importOptions(mem))
			if err != nil {
				t.Fatal(err)
			}
			checkAll(t, d, c.want, c.keys, "after compaction and reopen")
			if stray, err := strayFiles(d); err != nil || len(stray) > 0 {
				t.Fatalf("stray files: %v %v", stray, err)
			}
			d.Close()
		})
	}
}

// checkImported checks an imported DB before any compaction: every table's
// range is the clip of its file's, reads see exactly the clipped model, and
// no read reaches an entry outside its table's range.
func checkImported(t *testing.T, d *DB, c importCase) {
	t.Helper()
	if err := checkIter(d, rand.New(rand.NewPCG(1, 2))); err != nil {
		t.Fatal(err)
	}
	byNum := map[uint64]ImportTable{}
	for _, it := range c.tables {
		byNum[it.Num] = it
	}
	n, outside := 0, 0
	for l, files := range d.current.levels {
		for _, tf := range files {
			n++
			it := byNum[tf.meta.Num]
			fm := tf.r.Meta()
			if it.Level != l || tf.meta.MinOrder != max(it.MinOrder, fm.MinOrder) || tf.meta.MaxOrder != min(it.MaxOrder, fm.MaxOrder) {
				t.Fatalf("table %d at L%d range [%#x, %#x]; import said L%d clip [%#x, %#x] of file [%#x, %#x]",
					tf.meta.Num, l, tf.meta.MinOrder, tf.meta.MaxOrder, it.Level, it.MinOrder, it.MaxOrder, fm.MinOrder, fm.MaxOrder)
			}
			// A place in the file outside the clip is not the DB's.
			iter := tf.r.NewIter()
			for iter.Next() {
				e := iter.Entry()
				if e.Order >= tf.meta.MinOrder && e.Order <= tf.meta.MaxOrder {
					continue
				}
				outside++
				var loc base.Loc
				found := false
				if err := tf.r.GetLoc(e.Order, e.Key, e.UserKey, func(_ *base.Entry, b, o uint32) bool {
					loc, found = base.Loc{File: tf.meta.Num, Block: b, Off: o}, true
					return false
				}); err != nil || !found {
					t.Fatalf("table %d: GetLoc of its own entry: %v %v", tf.meta.Num, found, err)
				}
				if err := d.ReadAt(e.Order, e.Key, loc, func(*base.Entry) {}); !errors.Is(err, ErrLocGone) {
					t.Fatalf("ReadAt of a clipped-out entry of table %d (L%d): %v, want ErrLocGone", tf.meta.Num, l, err)
				}
				if err := d.GetLoc(e.Order, e.Key, e.UserKey, func(_ *base.Entry, got base.Loc) bool {
					if got.File == tf.meta.Num {
						t.Fatalf("GetLoc reached clipped-out entry of table %d", tf.meta.Num)
					}
					return true
				}); err != nil {
					t.Fatal(err)
				}
				break
			}
			if err := iter.Err(); err != nil {
				t.Fatal(err)
			}
			iter.Close()
		}
	}
	if n != len(c.tables)-len(c.dropped) {
		t.Fatalf("imported DB holds %d tables, want %d", n, len(c.tables)-len(c.dropped))
	}
	if outside == 0 {
		t.Fatal("no table holds an entry outside its clip: the test proves nothing")
	}
	checkAll(t, d, c.want, c.keys, "after import")
	if err := d.Get(1<<56, []byte("outside"), nil, func(e *base.Entry) bool {
		t.Fatalf("Get found %v in a dropped table", e)
		return false
	}); err != nil {
		t.Fatal(err)
	}
}

// compactImported compacts everything to the last level: the compactions
// drop exactly the entries outside their tables' clips, and the state stays.
func compactImported(t *testing.T, d *DB, c importCase) {
	t.Helper()
	var wantClipped int64
	last := len(d.current.levels) - 1
	for l, files := range d.current.levels {
		for _, tf := range files {
			if l == last {
				t.Fatalf("an imported table is at the last level: the clipped count is not exact")
			}
			it := tf.r.NewIter()
			for it.Next() {
				if o := it.Entry().Order; o < tf.meta.MinOrder || o > tf.meta.MaxOrder {
					wantClipped++
				}
			}
			it.Close()
		}
	}
	compactToBottom(t, d)
	if got := d.Metrics().ClippedEntries; got != wantClipped || got == 0 {
		t.Fatalf("ClippedEntries = %d, want %d (> 0)", got, wantClipped)
	}
	for _, tf := range d.current.levels[last] {
		it := tf.r.NewIter()
		for it.Next() {
			if o := it.Entry().Order; !inRanges(o, c.ranges) {
				t.Fatalf("bottom table %d holds Order %#x outside the clips", tf.meta.Num, o)
			}
		}
		it.Close()
	}
	checkAll(t, d, c.want, c.keys, "after compaction")
	if err := d.Persist(d.LastSeq(), []byte("registry")); err != nil {
		t.Fatal(err)
	}
}

func TestImportErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		// edit changes the tables (of oneSource) or the directory before Import.
		edit func(t *testing.T, mem *vfs.MemFS, tables []ImportTable) ([]ImportTable, []byte)
		want error
	}{
		{"exists", func(t *testing.T, mem *vfs.MemFS, tables []ImportTable) ([]ImportTable, []byte) {
			o := importOptions(mem)
			if err := writeFileSynced(mem, filepath.Join(o.Dir, currentName), []byte("x")); err != nil {
				t.Fatal(err)
			}
			return tables, nil
		}, ErrExists},
		{"overlap after clip", func(t *testing.T, mem *vfs.MemFS, tables []ImportTable) ([]ImportTable, []byte) {
			n := len(tables)
			// The two newest source L0 tables span most Orders; the source
			// has no L4 table.
			tables[n-2].Level, tables[n-3].Level = 4, 4
			return tables, nil
		}, ErrImportOverlap},
		{"duplicate number", func(t *testing.T, mem *vfs.MemFS, tables []ImportTable) ([]ImportTable, []byte) {
			return append(tables, tables[0]), nil
		}, ErrInvalidImport},
		{"level out of range", func(t *testing.T, mem *vfs.MemFS, tables []ImportTable) ([]ImportTable, []byte) {
			tables[0].Level = 5
			return tables, nil
		}, ErrInvalidImport},
		{"inverted range", func(t *testing.T, mem *vfs.MemFS, tables []ImportTable) ([]ImportTable, []byte) {
			tables[0].MinOrder, tables[0].MaxOrder = 2, 1
			return tables, nil
		}, ErrInvalidImport},
		{"number zero", func(t *testing.T, mem *vfs.MemFS, tables []ImportTable) ([]ImportTable, []byte) {
			tables[0].Num = 0
			return tables, nil
		}, ErrInvalidImport},
		{"missing file", func(t *testing.T, mem *vfs.MemFS, tables []ImportTable) ([]ImportTable, []byte) {
			return append(tables, ImportTable{Num: 99999, MaxOrder: ^uint64(0)}), nil
		}, fs.ErrNotExist},
		{"damaged file", func(t *testing.T, mem *vfs.MemFS, tables []ImportTable) ([]ImportTable, []byte) {
			if err := writeFileSynced(mem, TablePath("/imp", 99999), make([]byte, 4096)); err != nil {
				t.Fatal(err)
			}
			return append(tables, ImportTable{Num: 99999, MaxOrder: ^uint64(0)}), nil
		}, base.ErrCorruption},
		{"meta too large", func(t *testing.T, mem *vfs.MemFS, tables []ImportTable) ([]ImportTable, []byte) {
			return tables, make([]byte, MaxPersistMeta+1)
		}, ErrMetaTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := vfs.NewMem()
			c := oneSource(t, mem, true)
			tables, meta := tc.edit(t, mem, slices.Clone(c.tables))
			before, err := mem.List("/imp")
			if err != nil {
				t.Fatal(err)
			}
			err = Import(importOptions(mem), tables, 0, meta)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Import: %v, want %v", err, tc.want)
			}
			// Nothing was written or removed (the LOCK file aside).
			after, err := mem.List("/imp")
			if err != nil {
				t.Fatal(err)
			}
			after = slices.DeleteFunc(after, func(n string) bool { return n == lockName })
			if !slices.Equal(before, after) {
				t.Fatalf("directory changed: %v → %v", before, after)
			}
		})
	}

	// Overlapping files at one level are fine when their clips are disjoint.
	mem := vfs.NewMem()
	c := oneSource(t, mem, true)
	n := len(c.tables)
	if c.tables[n-2].Level != 0 || c.tables[n-3].Level != 0 || slices.ContainsFunc(c.tables, func(it ImportTable) bool { return it.Level == 4 }) {
		t.Fatalf("source shape: %+v", c.tables)
	}
	c.tables[n-2].Level, c.tables[n-3].Level = 4, 4
	c.tables[n-2].MinOrder, c.tables[n-2].MaxOrder = clipLo, clipMd-1
	c.tables[n-3].MinOrder, c.tables[n-3].MaxOrder = clipMd, clipHi
	if err := Import(importOptions(mem), c.tables, 0, nil); err != nil {
		t.Fatalf("Import of L1 tables disjoint after clipping: %v", err)
	}
	d, err := Open(importOptions(mem))
	if err != nil {
		t.Fatal(err)
	}
	if got := len(d.current.levels[4]); got != 2 {
		t.Fatalf("L4 holds %d tables, want 2", got)
	}
	d.Close()
}

// TestImportCrash crashes Import at each of its write operations, over tables
// written without a sync: the crash clone holds no CURRENT (Open refuses the
// tables without one; deleting the directory and importing again works) or,
// exactly when Import returned nil, the complete DB.
func TestImportCrash(t *testing.T) {
	srcFS := vfs.NewMem()
	c := oneSource(t, srcFS, true)
	setup := func() *vfs.MemFS {
		mem := vfs.NewMem()
		for _, it := range c.tables {
			copyTable(t, srcFS, TablePath("/imp", it.Num), mem, TablePath("/imp", it.Num), false)
		}
		return mem
	}
	meta := []byte("m")
	count := vfs.NewFaultFS(setup())
	if err := Import(importOptions(count), c.tables, 0, meta); err != nil {
		t.Fatal(err)
	}
	total := count.Count(vfs.WriteOps)
	t.Logf("Import: %d write operations", total)
	torn := 0
	for n := int64(1); n <= total+1; n++ {
		mem := setup()
		ffs := vfs.NewFaultFS(mem)
		ffs.CrashAt(n)
		err := Import(importOptions(ffs), c.tables, 0, meta)
		if n <= total && !errors.Is(err, vfs.ErrCrashed) {
			t.Fatalf("crash at %d: Import returned %v", n, err)
		}
		clone := mem.CrashClone()
		_, statErr := clone.Stat(filepath.Join("/imp", currentName))
		if (statErr == nil) != (err == nil) {
			t.Fatalf("crash at %d: Import returned %v, CURRENT in the crash clone: %v", n, err, statErr)
		}
		if err != nil {
			torn++
			names, _ := clone.List("/imp")
			hasTable := slices.ContainsFunc(names, func(n string) bool { k, _ := parseFileName(n); return k == kindTable })
			if hasTable {
				if d, err := Open(importOptions(clone)); !errors.Is(err, base.ErrCorruption) {
					if d != nil {
						d.Close()
					}
					t.Fatalf("crash at %d: Open of a torn import: %v, want corruption", n, err)
				}
			}
			// The caller deletes the directory and imports again.
			for _, name := range names {
				if err := clone.Remove(filepath.Join("/imp", name)); err != nil {
					t.Fatal(err)
				}
			}
			for _, it := range c.tables {
				copyTable(t, srcFS, TablePath("/imp", it.Num), clone, TablePath("/imp", it.Num), false)
			}
			if err := Import(importOptions(clone), c.tables, 0, meta); err != nil {
				t.Fatalf("crash at %d: Import again: %v", n, err)
			}
		}
		d, err := Open(importOptions(clone))
		if err != nil {
			t.Fatalf("crash at %d: Open: %v", n, err)
		}
		if seq, m, ok := d.PersistedMeta(); !ok || seq != c.lastSeq || string(m) != string(meta) {
			t.Fatalf("crash at %d: PersistedMeta %d %q %v", n, seq, m, ok)
		}
		checkAll(t, d, c.want, c.keys, fmt.Sprintf("crash at %d", n))
		d.Close()
	}
	if torn != int(total) {
		t.Fatalf("%d torn imports of %d crash points", torn, total)
	}
}
