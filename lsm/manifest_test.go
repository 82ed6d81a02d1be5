package lsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/strata-db/strata/internal/entry"
	"github.com/strata-db/strata/internal/vfs"
	"github.com/strata-db/strata/lsm/sstable"
)

func sampleMeta(num uint64) FileMeta {
	return FileMeta{Num: num, Size: 4096 + int64(num), Entries: 100, Blocks: 3, Tombstones: 7,
		MinOrder: num << 32, MaxOrder: num<<32 | 0xffff, MinSeq: 10 * num, MaxSeq: 10*num + 9}
}

func TestEditRoundTrip(t *testing.T) {
	edits := []edit{
		{HasNextFile: true, NextFile: 7},
		{HasLastSeq: true, LastSeq: 1 << 60},
		{HasNextFile: true, NextFile: 9, HasLastSeq: true, LastSeq: 3,
			Added: []newFile{{Level: 0, Meta: sampleMeta(5)}, {Level: MaxLevels - 1, Meta: sampleMeta(6)}}},
		{Deleted: []deletedFile{{Level: 1, Num: 3}, {Level: 2, Num: 1 << 40}},
			Added: []newFile{{Level: 2, Meta: FileMeta{Num: 8, MaxOrder: ^uint64(0), MaxSeq: ^uint64(0)}}}},
		{Persist: &persistPoint{LastSeq: 0, Meta: []byte{}}},
		{HasNextFile: true, NextFile: 12, HasLastSeq: true, LastSeq: 40,
			Persist: &persistPoint{LastSeq: 40, Meta: []byte("registry: state 1, state 2")}},
		{Added: []newFile{{Level: 0, Meta: sampleMeta(5)}}, Persist: &persistPoint{LastSeq: ^uint64(0), Meta: bytes.Repeat([]byte{7}, 300)}},
	}
	for i, e := range edits {
		got, err := decodeEdit(e.encode(nil))
		if err != nil {
			t.Fatalf("edit %d: %v", i, err)
		}
		if !reflect.DeepEqual(got, e) {
			t.Fatalf("edit %d: got %+v, want %+v", i, got, e)
		}
	}
}

func TestDecodeEditErrors(t *testing.T) {
	add := func(level int, m FileMeta) []byte {
		return (&edit{Added: []newFile{{Level: level, Meta: m}}}).encode(nil)
	}
	good := add(1, sampleMeta(4))
	inv := sampleMeta(4)
	inv.MinOrder, inv.MaxOrder = 5, 4
	invSeq := sampleMeta(4)
	invSeq.MinSeq = invSeq.MaxSeq + 1
	tomb := sampleMeta(4)
	tomb.Tombstones = tomb.Entries + 1
	cases := []struct {
		name string
		p    []byte
	}{
		{"empty", nil},
		{"unknown tag", []byte{9, 1}},
		{"truncated varint", []byte{tagNextFile, 0x80}},
		{"missing value", []byte{tagLastSeq}},
		{"truncated add", good[:len(good)-1]},
		{"truncated fixed64", good[:len(good)-12]},
		{"level too high", add(MaxLevels, sampleMeta(4))},
		{"file number 0", add(1, FileMeta{})},
		{"inverted order range", add(1, inv)},
		{"inverted seq range", add(1, invSeq)},
		{"tombstones > entries", add(1, tomb)},
		{"delete of file 0", []byte{tagDeleteFile, 1, 0}},
		{"duplicate next file", []byte{tagNextFile, 1, tagNextFile, 2}},
		{"duplicate last seq", []byte{tagLastSeq, 1, tagLastSeq, 2}},
		{"huge count", append([]byte{tagAddFile, 1, 4}, binary.AppendUvarint(nil, 1<<63)...)},
		{"persist without meta length", []byte{tagPersist, 5}},
		{"persist meta truncated", []byte{tagPersist, 5, 3, 'a', 'b'}},
		{"persist meta too large", append([]byte{tagPersist, 5}, binary.AppendUvarint(nil, MaxPersistMeta+1)...)},
		{"duplicate persist", []byte{tagPersist, 5, 1, 'a', tagPersist, 6, 0}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := decodeEdit(c.p); err == nil {
				t.Fatalf("decodeEdit(%x) accepted", c.p)
			}
		})
	}
}

func TestCurrentFile(t *testing.T) {
	b := encodeCurrent(42)
	if n, err := decodeCurrent("CURRENT", b); err != nil || n != 42 {
		t.Fatalf("decodeCurrent = %d, %v", n, err)
	}
	for i := range len(b) * 8 {
		c := bytes.Clone(b)
		c[i/8] ^= 1 << (i % 8)
		_, err := decodeCurrent("CURRENT", c)
		var ce *CorruptionError
		if !errors.As(err, &ce) || ce.File != "CURRENT" {
			t.Fatalf("bit %d flipped: %v", i, err)
		}
	}
	for _, n := range []int{0, 5, 16, 27, 29} {
		c := append(bytes.Clone(b), 0)[:n]
		if _, err := decodeCurrent("CURRENT", c); !errors.Is(err, ErrCorruption) {
			t.Fatalf("%d bytes: %v", n, err)
		}
	}
	if _, err := decodeCurrent("CURRENT", encodeCurrent(0)); !errors.Is(err, ErrCorruption) {
		t.Fatalf("manifest number 0 accepted")
	}
}

func TestFileHeaderErrors(t *testing.T) {
	h := appendFileHeader(nil, manifestMagic)
	mod := func(f func(b []byte)) []byte {
		b := bytes.Clone(h)
		f(b)
		return b
	}
	cases := []struct {
		name string
		b    []byte
		want error
	}{
		{"magic", mod(func(b []byte) { b[0] = 'X' }), ErrBadMagic},
		{"version", mod(func(b []byte) { b[8] = 2 }), ErrVersion},
		{"checksum type", mod(func(b []byte) { b[10] = 2 }), ErrChecksumType},
		{"header crc", mod(func(b []byte) { b[12] ^= 1 }), ErrCorruption},
		{"reserved", mod(func(b []byte) { b[11] = 1 }), ErrCorruption},
		{"short", h[:10], ErrCorruption},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := checkFileHeader("M", c.b, manifestMagic)
			if !errors.Is(err, c.want) || !errors.Is(err, ErrCorruption) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
		})
	}
}

// manifestDB builds a DB on a MemFS with n installs, each followed by a
// Persist (one manifest record each, no rotation), and returns the file
// system, the batches, the manifest path and the offsets of its records.
func manifestDB(t *testing.T, n int) (*vfs.MemFS, [][]entry.Entry, []testKey, string, []int64) {
	t.Helper()
	fs := vfs.NewMem()
	opts := smallOptions(fs)
	opts.MaxManifestBytes = 1 << 20
	d, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	g := newGen(rand.New(rand.NewPCG(1, 2)), crashKeys)
	var batches [][]entry.Entry
	for range n {
		es := g.batch(8)
		p, err := d.WriteL0(&sliceIter{es: es})
		if err != nil {
			t.Fatal(err)
		}
		if err := d.InstallL0(p, g.seq); err != nil {
			t.Fatal(err)
		}
		if err := d.Persist(g.seq, []byte{byte(len(batches))}); err != nil {
			t.Fatal(err)
		}
		batches = append(batches, es)
	}
	name := manifestName(d.dir, d.manifestNum)
	d.Close()
	b, err := readFile(fs, name)
	if err != nil {
		t.Fatal(err)
	}
	var offs []int64
	if _, torn, err := decodeManifest(name, b, func(off int64, e *edit) error {
		offs = append(offs, off)
		return nil
	}); err != nil || torn {
		t.Fatalf("decodeManifest: torn %v, %v", torn, err)
	}
	// The records are the snapshot written by Open, then an install and a
	// persist point per batch.
	if len(offs) != 1+2*n {
		t.Fatalf("%d records, want %d", len(offs), 1+2*n)
	}
	return fs, batches, g.keys, name, offs
}

func batchMaxSeq(es []entry.Entry) uint64 {
	var m uint64
	for _, e := range es {
		m = max(m, e.Seq)
	}
	return m
}

func writeFile(t *testing.T, fs vfs.FS, name string, b []byte) {
	t.Helper()
	if err := writeFileSynced(fs, name, b); err != nil {
		t.Fatal(err)
	}
}

// TestManifestBitFlip flips bits inside every record but the last: Open must
// fail with a *CorruptionError naming the manifest and the record's offset.
func TestManifestBitFlip(t *testing.T) {
	fs0, _, _, name, offs := manifestDB(t, 6)
	orig, _ := readFile(fs0, name)
	for i, off := range offs[:len(offs)-1] {
		end := offs[i+1]
		for _, pos := range []int64{off, off + 3, off + 5, off + 9, off + 12, (off + end) / 2, end - 1} {
			for bit := range 8 {
				fs := fs0.CrashClone()
				b := bytes.Clone(orig)
				b[pos] ^= 1 << bit
				writeFile(t, fs, name, b)
				d, err := Open(smallOptions(fs))
				if err == nil {
					d.Close()
					t.Fatalf("record %d: bit %d of byte %d flipped: Open succeeded", i, bit, pos)
				}
				var ce *CorruptionError
				if !errors.As(err, &ce) || !errors.Is(err, ErrCorruption) {
					t.Fatalf("record %d, byte %d: %v is not a CorruptionError", i, pos, err)
				}
				if ce.File != name || ce.Offset != off {
					t.Fatalf("record %d, byte %d: error names %s offset %d, want %s offset %d (%v)",
						i, pos, ce.File, ce.Offset, name, off, err)
				}
			}
		}
	}
	// The file header: magic, version, checksum type, each its own error.
	for _, c := range []struct {
		pos  int
		want error
	}{{0, ErrBadMagic}, {8, ErrVersion}, {10, ErrChecksumType}, {13, ErrCorruption}} {
		fs := fs0.CrashClone()
		b := bytes.Clone(orig)
		b[c.pos] ^= 0x40
		writeFile(t, fs, name, b)
		_, err := Open(smallOptions(fs))
		var ce *CorruptionError
		if !errors.Is(err, c.want) || !errors.As(err, &ce) || ce.File != name {
			t.Fatalf("header byte %d: %v, want %v naming %s", c.pos, err, c.want, name)
		}
	}
}

// TestManifestTornTail cuts the manifest at every byte inside its install
// and persist records, pads it with zeros, or appends a partial record: Open
// must recover the installs up to the last complete persist point, and
// nothing else.
func TestManifestTornTail(t *testing.T) {
	fs0, batches, keys, name, offs := manifestDB(t, 5)
	orig, _ := readFile(fs0, name)
	check := func(t *testing.T, b []byte, complete int, what string) {
		t.Helper()
		fs := fs0.CrashClone()
		writeFile(t, fs, name, b)
		d, err := Open(smallOptions(fs))
		if err != nil {
			t.Fatalf("%s: Open: %v", what, err)
		}
		defer d.Close()
		seq, meta, ok := d.PersistedMeta()
		if ok != (complete > 0) || (ok && (meta[0] != byte(complete-1) || seq != batchMaxSeq(batches[complete-1]))) {
			t.Fatalf("%s: PersistedMeta %d %v %v, want batch %d", what, seq, meta, ok, complete)
		}
		m := newModel()
		for _, es := range batches[:complete] {
			m.add(es)
		}
		if err := diffAll(d, m, keys); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if stray, err := strayFiles(d); err != nil || len(stray) > 0 {
			t.Fatalf("%s: stray files %v %v", what, stray, err)
		}
	}
	for cut := offs[1]; cut < int64(len(orig)); cut++ {
		complete := 0
		for i := 1; i < len(offs); i++ {
			end := int64(len(orig))
			if i+1 < len(offs) {
				end = offs[i+1]
			}
			if end <= cut {
				complete = i / 2 // records 2i-1 (install) and 2i (persist point) per batch
			}
		}
		check(t, orig[:cut], complete, fmt.Sprintf("cut at %d", cut))
	}
	check(t, append(bytes.Clone(orig), make([]byte, 100)...), len(batches), "zero tail")
	check(t, append(bytes.Clone(orig), 1, 2, 3, 4, 5), len(batches), "partial header")
	// The last record's payload damaged: a torn write of the last record.
	b := bytes.Clone(orig)
	b[len(b)-1] ^= 0xff
	check(t, b, len(batches)-1, "last payload byte")
	// Garbage after a complete manifest is not a torn record: corruption.
	g := append(bytes.Clone(orig), bytes.Repeat([]byte{0xa5}, 40)...)
	fs := fs0.CrashClone()
	writeFile(t, fs, name, g)
	if _, err := Open(smallOptions(fs)); !errors.Is(err, ErrCorruption) {
		t.Fatalf("garbage tail: %v", err)
	}
}

// TestMissingAndDamagedFiles: a CURRENT naming a missing manifest, a missing
// table, a table of the wrong size and a damaged table footer or block each
// give a CorruptionError naming the file.
func TestMissingAndDamagedFiles(t *testing.T) {
	fs0, _, keys, name, _ := manifestDB(t, 3)
	dir := filepath.Dir(name)
	tables := func(fs vfs.FS) []string {
		names, _ := fs.List(dir)
		var out []string
		for _, n := range names {
			if k, _ := parseFileName(n); k == kindTable {
				out = append(out, filepath.Join(dir, n))
			}
		}
		return out
	}
	expect := func(t *testing.T, err error, file string, cause error) {
		t.Helper()
		var ce *CorruptionError
		if !errors.As(err, &ce) || ce.File != file || !errors.Is(err, ErrCorruption) {
			t.Fatalf("got %v, want a CorruptionError naming %s", err, file)
		}
		if cause != nil && !errors.Is(err, cause) {
			t.Fatalf("got %v, want %v", err, cause)
		}
	}
	t.Run("manifest missing", func(t *testing.T) {
		fs := fs0.CrashClone()
		fs.Remove(name)
		_, err := Open(smallOptions(fs))
		expect(t, err, filepath.Join(dir, currentName), nil)
	})
	t.Run("table missing", func(t *testing.T) {
		fs := fs0.CrashClone()
		tb := tables(fs)[1]
		fs.Remove(tb)
		_, err := Open(smallOptions(fs))
		expect(t, err, tb, nil)
	})
	t.Run("table truncated", func(t *testing.T) {
		fs := fs0.CrashClone()
		tb := tables(fs)[0]
		b, _ := readFile(fs, tb)
		writeFile(t, fs, tb, b[:len(b)-1])
		_, err := Open(smallOptions(fs))
		expect(t, err, tb, nil)
	})
	t.Run("table footer", func(t *testing.T) {
		fs := fs0.CrashClone()
		tb := tables(fs)[0]
		b, _ := readFile(fs, tb)
		b[len(b)-10] ^= 1
		writeFile(t, fs, tb, b)
		_, err := Open(smallOptions(fs))
		expect(t, err, tb, sstable.ErrCorruption)
	})
	t.Run("table block", func(t *testing.T) {
		fs := fs0.CrashClone()
		for _, tb := range tables(fs) {
			b, _ := readFile(fs, tb)
			b[40] ^= 1 // inside the first data block
			writeFile(t, fs, tb, b)
		}
		d, err := Open(smallOptions(fs))
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		var found error
		for _, k := range keys {
			if _, err := readKey(d, k); err != nil {
				found = err
				break
			}
		}
		if !errors.Is(found, ErrCorruption) || !errors.Is(found, sstable.ErrChecksum) {
			t.Fatalf("reads over damaged blocks: %v", found)
		}
		var ce *CorruptionError
		if errors.As(found, &ce); ce == nil || filepath.Dir(ce.File) != dir {
			t.Fatalf("error does not name a table: %v", found)
		}
	})
}

// FuzzManifest decodes arbitrary manifest bytes: never a panic; an accepted
// record re-encodes to an edit that decodes equal; errors are
// CorruptionErrors naming the file at an offset inside it.
func FuzzManifest(f *testing.F) {
	b := appendFileHeader(nil, manifestMagic)
	for _, e := range []edit{
		{HasNextFile: true, NextFile: 5, HasLastSeq: true, LastSeq: 9},
		{Added: []newFile{{Level: 0, Meta: sampleMeta(3)}}},
		{Persist: &persistPoint{LastSeq: 9, Meta: []byte("meta")}},
		{Deleted: []deletedFile{{Level: 0, Num: 3}}, Added: []newFile{{Level: 1, Meta: sampleMeta(4)}}},
		{HasLastSeq: true, LastSeq: 12, Persist: &persistPoint{LastSeq: 12, Meta: []byte{}}},
	} {
		b = appendRecord(b, e.encode(nil))
		f.Add(bytes.Clone(b))
	}
	f.Add(b[:len(b)-3])
	f.Add(append(bytes.Clone(b), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))
	f.Add(b[:fileHeaderSize+5])
	f.Fuzz(func(t *testing.T, data []byte) {
		end, torn, err := decodeManifest("M", data, func(off int64, e *edit) error {
			if off < fileHeaderSize || off >= int64(len(data)) {
				t.Fatalf("record offset %d outside the file", off)
			}
			again, err := decodeEdit(e.encode(nil))
			if err != nil || !reflect.DeepEqual(again, *e) {
				t.Fatalf("re-encoded edit: %+v, %v; want %+v", again, err, *e)
			}
			return nil
		})
		if err != nil {
			var ce *CorruptionError
			if !errors.As(err, &ce) || ce.File != "M" || ce.Offset < 0 || ce.Offset > int64(len(data)) {
				t.Fatalf("error %v", err)
			}
			return
		}
		if end > int64(len(data)) || (!torn && end != int64(len(data))) {
			t.Fatalf("end %d torn %v of %d bytes", end, torn, len(data))
		}
	})
}

// FuzzEdit decodes arbitrary record payloads: never a panic, and an accepted
// payload round-trips.
func FuzzEdit(f *testing.F) {
	f.Add((&edit{HasNextFile: true, NextFile: 5}).encode(nil))
	f.Add((&edit{Added: []newFile{{Level: 2, Meta: sampleMeta(3)}}, Deleted: []deletedFile{{1, 2}}}).encode(nil))
	f.Add([]byte{tagAddFile, 1})
	f.Add((&edit{HasLastSeq: true, LastSeq: 3, Persist: &persistPoint{LastSeq: 3, Meta: []byte("registry")}}).encode(nil))
	f.Add([]byte{tagPersist, 1, 4, 'a'})
	f.Fuzz(func(t *testing.T, p []byte) {
		e, err := decodeEdit(p)
		if err != nil {
			return
		}
		again, err := decodeEdit(e.encode(nil))
		if err != nil || !reflect.DeepEqual(again, e) {
			t.Fatalf("round trip: %+v, %v; want %+v", again, err, e)
		}
	})
}

// TestRecoveryEditErrors: edits that do not fit the version replayed so far
// are corruption at their record's offset; overlapping L1+ files after
// replay are corruption of the manifest.
func TestRecoveryEditErrors(t *testing.T) {
	m1, m2 := sampleMeta(3), sampleMeta(4)
	m2.MinOrder = m1.MaxOrder // overlaps m1 at one Order
	cases := []struct {
		name   string
		edits  []edit
		badRec int // index of the record named by the error; -1: offset 0
	}{
		{"delete absent", []edit{{Added: []newFile{{1, m1}}}, {Deleted: []deletedFile{{1, 9}}}}, 1},
		{"delete wrong level", []edit{{Added: []newFile{{1, m1}}}, {Deleted: []deletedFile{{2, 3}}}}, 1},
		{"add twice", []edit{{Added: []newFile{{0, m1}}}, {Added: []newFile{{2, m1}}}}, 1},
		{"overlap", []edit{{Added: []newFile{{1, m1}}}, {Added: []newFile{{1, m2}}}}, -1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fs := vfs.NewMem()
			fs.MkdirAll("/db", 0o755)
			b := appendFileHeader(nil, manifestMagic)
			var offs []int64
			for _, e := range c.edits {
				offs = append(offs, int64(len(b)))
				b = appendRecord(b, e.encode(nil))
			}
			writeFile(t, fs, "/db/MANIFEST-000001", b)
			writeFile(t, fs, "/db/CURRENT", encodeCurrent(1))
			_, err := Open(smallOptions(fs))
			var ce *CorruptionError
			if !errors.As(err, &ce) || ce.File != "/db/MANIFEST-000001" {
				t.Fatalf("got %v", err)
			}
			want := int64(0)
			if c.badRec >= 0 {
				want = offs[c.badRec]
			}
			if ce.Offset != want {
				t.Fatalf("offset %d, want %d (%v)", ce.Offset, want, err)
			}
		})
	}
}
