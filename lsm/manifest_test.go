package lsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/internal/vfs"
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
	want := current{Manifest: 42, Synced: 900, PersistEnd: 700, PersistSeq: 77, PersistCRC: 0xdeadbeef}
	b := encodeCurrent(want)
	if c, err := decodeCurrent("CURRENT", b); err != nil || c != want {
		t.Fatalf("decodeCurrent = %+v, %v; want %+v", c, err, want)
	}
	if v := binary.LittleEndian.Uint16(b[8:]); v != 2 || len(b) != 56 {
		t.Fatalf("CURRENT version %d, %d bytes; the format is version 2, 56 bytes", v, len(b))
	}
	for i := range len(b) * 8 {
		c := bytes.Clone(b)
		c[i/8] ^= 1 << (i % 8)
		_, err := decodeCurrent("CURRENT", c)
		var ce *base.CorruptionError
		if !errors.As(err, &ce) || ce.File != "CURRENT" {
			t.Fatalf("bit %d flipped: %v", i, err)
		}
	}
	for _, n := range []int{0, 5, 16, 27, 28, 55, 57} {
		c := append(bytes.Clone(b), 0)[:n]
		if _, err := decodeCurrent("CURRENT", c); !errors.Is(err, base.ErrCorruption) {
			t.Fatalf("%d bytes: %v", n, err)
		}
	}
	// A version-1 CURRENT (28 bytes, before it named the persist point) is
	// refused as another format version.
	v1 := bytes.Clone(b[:28])
	binary.LittleEndian.PutUint16(v1[8:], 1)
	binary.LittleEndian.PutUint32(v1[12:], crc32.Checksum(v1[:12], base.CRC32C))
	if _, err := decodeCurrent("CURRENT", v1); !errors.Is(err, base.ErrFormatVersion) {
		t.Fatalf("version 1: %v", err)
	}
	for _, c := range []current{
		{Manifest: 0, Synced: 16},
		{Manifest: 1, Synced: 15},
		{Manifest: 1, Synced: 100, PersistEnd: 101, PersistSeq: 1},
		{Manifest: 1, Synced: 100, PersistEnd: 20, PersistSeq: 1},
		{Manifest: 1, Synced: 100, PersistSeq: 1},
		{Manifest: 1, Synced: 100, PersistCRC: 1},
		{Manifest: 1, Synced: -1},
	} {
		if _, err := decodeCurrent("CURRENT", encodeCurrent(c)); !errors.Is(err, base.ErrCorruption) {
			t.Fatalf("%+v accepted", c)
		}
	}
}

// FuzzCurrent decodes arbitrary CURRENT bytes: never a panic; accepted bytes
// re-encode to themselves; errors are CorruptionErrors naming the file.
func FuzzCurrent(f *testing.F) {
	f.Add(encodeCurrent(current{Manifest: 7, Synced: 16}))
	f.Add(encodeCurrent(current{Manifest: 42, Synced: 900, PersistEnd: 700, PersistSeq: 77, PersistCRC: 5}))
	f.Add(encodeCurrent(current{Manifest: 42, Synced: 900})[:30])
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := decodeCurrent("CURRENT", b)
		if err != nil {
			var ce *base.CorruptionError
			if !errors.As(err, &ce) || ce.File != "CURRENT" {
				t.Fatalf("error %v", err)
			}
			return
		}
		if again := encodeCurrent(c); !bytes.Equal(again, b) {
			t.Fatalf("re-encoded %x, read %x", again, b)
		}
	})
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
		{"magic", mod(func(b []byte) { b[0] = 'X' }), base.ErrBadMagic},
		{"version", mod(func(b []byte) { b[8] = 2 }), base.ErrFormatVersion},
		{"checksum type", mod(func(b []byte) { b[10] = 2 }), base.ErrChecksumType},
		{"header crc", mod(func(b []byte) { b[12] ^= 1 }), base.ErrCorruption},
		{"reserved", mod(func(b []byte) { b[11] = 1 }), base.ErrCorruption},
		{"short", h[:10], base.ErrCorruption},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := checkFileHeader("M", c.b, manifestMagic)
			if !errors.Is(err, c.want) || !errors.Is(err, base.ErrCorruption) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
		})
	}
}

// manifestDB builds a DB on a MemFS with n installs, each followed by a
// Persist (one manifest record each, no rotation), and returns the file
// system, the batches, the manifest path and the offsets of its records.
func manifestDB(t *testing.T, n int) (*vfs.MemFS, [][]base.Entry, []testKey, string, []int64) {
	t.Helper()
	fs := vfs.NewMem()
	opts := smallOptions(fs)
	opts.MaxManifestBytes = 1 << 20
	d, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	g := newGen(rand.New(rand.NewPCG(1, 2)), crashKeys)
	var batches [][]base.Entry
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
	b, err := vfs.ReadFile(fs, name)
	if err != nil {
		t.Fatal(err)
	}
	var offs []int64
	if _, torn, err := decodeManifest(name, b, func(r recordPos, e *edit) error {
		offs = append(offs, r.Off)
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

func batchMaxSeq(es []base.Entry) uint64 {
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
// fail with a *base.CorruptionError naming the manifest and the record's offset.
func TestManifestBitFlip(t *testing.T) {
	fs0, _, _, name, offs := manifestDB(t, 6)
	orig, _ := vfs.ReadFile(fs0, name)
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
				var ce *base.CorruptionError
				if !errors.As(err, &ce) || !errors.Is(err, base.ErrCorruption) {
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
	}{{0, base.ErrBadMagic}, {8, base.ErrFormatVersion}, {10, base.ErrChecksumType}, {13, base.ErrCorruption}} {
		fs := fs0.CrashClone()
		b := bytes.Clone(orig)
		b[c.pos] ^= 0x40
		writeFile(t, fs, name, b)
		_, err := Open(smallOptions(fs))
		var ce *base.CorruptionError
		if !errors.Is(err, c.want) || !errors.As(err, &ce) || ce.File != name {
			t.Fatalf("header byte %d: %v, want %v naming %s", c.pos, err, c.want, name)
		}
	}
}

// manifestRecords decodes a manifest's records: their positions and edits.
func manifestRecords(t *testing.T, name string, b []byte) ([]recordPos, []edit) {
	t.Helper()
	var recs []recordPos
	var edits []edit
	if _, torn, err := decodeManifest(name, b, func(r recordPos, e *edit) error {
		recs, edits = append(recs, r), append(edits, *e)
		return nil
	}); err != nil || torn {
		t.Fatalf("decodeManifest: torn %v, %v", torn, err)
	}
	return recs, edits
}

// TestManifestTornTail: a crash can tear only what follows the last record
// CURRENT vouches for. For CURRENT naming each persist point in turn (as
// after a crash between a later Persist's manifest sync and its CURRENT
// rename), the manifest is cut at every byte, padded with zeros, or given a
// partial record: a cut at or after the named persist point recovers the
// installs up to the last complete persist point, and nothing else; a cut
// before it is corruption naming the manifest and the missing record's end,
// and Open deletes nothing.
func TestManifestTornTail(t *testing.T) {
	fs0, batches, keys, name, offs := manifestDB(t, 5)
	orig, _ := vfs.ReadFile(fs0, name)
	recs, edits := manifestRecords(t, name, orig)
	var points []int // record index of each batch's persist point
	for i, e := range edits {
		if e.Persist != nil {
			points = append(points, i)
		}
	}
	if len(points) != len(batches) {
		t.Fatalf("%d persist points, want %d", len(points), len(batches))
	}
	curFor := func(k int) []byte { // CURRENT naming batch k's persist point
		r := recs[points[k]]
		return encodeCurrent(current{Manifest: parseNum(name), Synced: r.End, PersistEnd: r.End,
			PersistSeq: edits[points[k]].Persist.LastSeq, PersistCRC: r.CRC})
	}
	check := func(t *testing.T, named int, b []byte, complete int, what string) {
		t.Helper()
		fs := fs0.CrashClone()
		writeFile(t, fs, name, b)
		writeFile(t, fs, "/db/CURRENT", curFor(named))
		before := dirSnapshot(t, fs, "/db")
		d, err := Open(smallOptions(fs))
		if complete <= named {
			var ce *base.CorruptionError
			if !errors.As(err, &ce) || ce.File != name || ce.Offset != recs[points[named]].End {
				t.Fatalf("%s, CURRENT naming persist point %d: got %v, want corruption of %s at %d",
					what, named, err, name, recs[points[named]].End)
			}
			if after := dirSnapshot(t, fs, "/db"); !reflect.DeepEqual(before, after) {
				t.Fatalf("%s: a refused Open changed the directory: %v -> %v", what, keysOf(before), keysOf(after))
			}
			return
		}
		if err != nil {
			t.Fatalf("%s, CURRENT naming persist point %d: Open: %v", what, named, err)
		}
		defer d.Close()
		seq, meta, ok := d.PersistedMeta()
		if !ok || meta[0] != byte(complete-1) || seq != batchMaxSeq(batches[complete-1]) {
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
	for named := range points {
		for cut := offs[1]; cut < int64(len(orig)); cut++ {
			complete := 0 // batches whose persist point ends at or before cut
			for k, i := range points {
				if recs[i].End <= cut {
					complete = k + 1
				}
			}
			check(t, named, orig[:cut], complete, fmt.Sprintf("cut at %d", cut))
		}
		check(t, named, append(bytes.Clone(orig), make([]byte, 100)...), len(batches), "zero tail")
		check(t, named, append(bytes.Clone(orig), 1, 2, 3, 4, 5), len(batches), "partial header")
		// The last record's payload damaged: a torn write of the last record
		// when CURRENT names an earlier one, a lost persist point otherwise.
		b := bytes.Clone(orig)
		b[len(b)-1] ^= 0xff
		check(t, named, b, len(batches)-1, "last payload byte")
	}
	// Garbage after a complete manifest is not a torn record: corruption.
	g := append(bytes.Clone(orig), bytes.Repeat([]byte{0xa5}, 40)...)
	fs := fs0.CrashClone()
	writeFile(t, fs, name, g)
	if _, err := Open(smallOptions(fs)); !errors.Is(err, base.ErrCorruption) {
		t.Fatalf("garbage tail: %v", err)
	}
}

// parseNum returns the file number of a manifest or table path.
func parseNum(path string) uint64 {
	_, n := parseFileName(filepath.Base(path))
	return n
}

// dirSnapshot returns every file of dir with its contents.
func dirSnapshot(t *testing.T, fs vfs.FS, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, n := range must(fs.List(dir)) {
		b, err := vfs.ReadFile(fs, filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		out[n] = string(b)
	}
	return out
}

func keysOf(m map[string]string) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// TestOpenDeletesNothingUnlessClean (doc.go, invariant 11): a manifest that
// lost records CURRENT vouches for — cut to its header, to half, by one
// byte, its tail zeroed — is corruption naming the manifest and the offset
// of the missing persist point, never an empty or older DB; and with that
// or any other damage (CURRENT damaged or missing, the manifest missing, a
// table missing or cut) a failed Open leaves every file as it was.
func TestOpenDeletesNothingUnlessClean(t *testing.T) {
	fs0, _, _, name, _ := manifestDB(t, 4)
	orig, _ := vfs.ReadFile(fs0, name)
	recs, _ := manifestRecords(t, name, orig)
	last := recs[len(recs)-1].End // CURRENT names the last record, a persist point
	var table string
	for _, n := range must(fs0.List("/db")) {
		if k, _ := parseFileName(n); k == kindTable {
			table = "/db/" + n
		}
	}
	cases := []struct {
		name    string
		damage  func(fs *vfs.MemFS)
		file    string // the file the error names
		offset  int64  // its offset, -1: any
		missing bool   // the persist point is reported missing
	}{
		{"manifest header only", func(fs *vfs.MemFS) { writeFile(t, fs, name, orig[:fileHeaderSize]) }, name, last, true},
		{"manifest empty", func(fs *vfs.MemFS) { writeFile(t, fs, name, nil) }, name, 0, false},
		{"manifest half", func(fs *vfs.MemFS) { writeFile(t, fs, name, orig[:len(orig)/2]) }, name, last, true},
		{"manifest minus 1", func(fs *vfs.MemFS) { writeFile(t, fs, name, orig[:len(orig)-1]) }, name, last, true},
		{"manifest last record cut", func(fs *vfs.MemFS) { writeFile(t, fs, name, orig[:recs[len(recs)-1].Off]) }, name, last, true},
		{"manifest zero tail", func(fs *vfs.MemFS) {
			b := bytes.Clone(orig)
			clear(b[len(b)-20:])
			writeFile(t, fs, name, b)
		}, name, last, true},
		{"manifest last byte flipped", func(fs *vfs.MemFS) {
			b := bytes.Clone(orig)
			b[len(b)-1] ^= 1
			writeFile(t, fs, name, b)
		}, name, last, true},
		{"manifest missing", func(fs *vfs.MemFS) { fs.Remove(name) }, "/db/CURRENT", -1, false},
		{"CURRENT flipped", func(fs *vfs.MemFS) {
			b, _ := vfs.ReadFile(fs, "/db/CURRENT")
			b[30] ^= 1
			writeFile(t, fs, "/db/CURRENT", b)
		}, "/db/CURRENT", -1, false},
		{"CURRENT missing", func(fs *vfs.MemFS) { fs.Remove("/db/CURRENT") }, "/db/CURRENT", -1, false},
		{"table missing", func(fs *vfs.MemFS) { fs.Remove(table) }, table, -1, false},
		{"table cut", func(fs *vfs.MemFS) {
			b, _ := vfs.ReadFile(fs, table)
			writeFile(t, fs, table, b[:len(b)/2])
		}, table, -1, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fs := fs0.CrashClone()
			c.damage(fs)
			before := dirSnapshot(t, fs, "/db")
			d, err := Open(smallOptions(fs))
			if err == nil {
				d.Close()
				t.Fatal("Open succeeded")
			}
			var ce *base.CorruptionError
			if !errors.As(err, &ce) || ce.File != c.file || (c.offset >= 0 && ce.Offset != c.offset) {
				t.Fatalf("got %v, want corruption of %s at %d", err, c.file, c.offset)
			}
			if c.missing && !strings.Contains(err.Error(), "persist point") {
				t.Fatalf("error does not say the persist point is missing: %v", err)
			}
			if after := dirSnapshot(t, fs, "/db"); !reflect.DeepEqual(before, after) {
				t.Fatalf("a refused Open changed the directory: %v -> %v", keysOf(before), keysOf(after))
			}
		})
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
		var ce *base.CorruptionError
		if !errors.As(err, &ce) || ce.File != file || !errors.Is(err, base.ErrCorruption) {
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
		b, _ := vfs.ReadFile(fs, tb)
		writeFile(t, fs, tb, b[:len(b)-1])
		_, err := Open(smallOptions(fs))
		expect(t, err, tb, nil)
	})
	t.Run("table footer", func(t *testing.T) {
		fs := fs0.CrashClone()
		tb := tables(fs)[0]
		b, _ := vfs.ReadFile(fs, tb)
		b[len(b)-10] ^= 1
		writeFile(t, fs, tb, b)
		_, err := Open(smallOptions(fs))
		expect(t, err, tb, base.ErrCorruption)
	})
	t.Run("table block", func(t *testing.T) {
		fs := fs0.CrashClone()
		for _, tb := range tables(fs) {
			b, _ := vfs.ReadFile(fs, tb)
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
		if !errors.Is(found, base.ErrCorruption) || !errors.Is(found, base.ErrChecksum) {
			t.Fatalf("reads over damaged blocks: %v", found)
		}
		var ce *base.CorruptionError
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
		end, torn, err := decodeManifest("M", data, func(r recordPos, e *edit) error {
			if off := r.Off; off < fileHeaderSize || off >= int64(len(data)) || r.End <= off || r.End > int64(len(data)) {
				t.Fatalf("record [%d, %d) outside the file", off, r.End)
			}
			again, err := decodeEdit(e.encode(nil))
			if err != nil || !reflect.DeepEqual(again, *e) {
				t.Fatalf("re-encoded edit: %+v, %v; want %+v", again, err, *e)
			}
			return nil
		})
		if err != nil {
			var ce *base.CorruptionError
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
			writeFile(t, fs, "/db/CURRENT", encodeCurrent(current{Manifest: 1, Synced: int64(len(b))}))
			_, err := Open(smallOptions(fs))
			var ce *base.CorruptionError
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
