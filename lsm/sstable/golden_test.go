package sstable

import (
	"bytes"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/internal/vfs"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// goldenEntries is the fixed content of testdata/v1.sst: every kind, several
// versions of one key, a map run with a map tombstone, two keys sharing one
// Order (an order-hash collision), an empty user key (which shares its
// sort position with the map tombstone: Kind tells them apart), a zero UserHash on a map
// entry, and a value larger than the block size (an oversized block).
func goldenEntries() []ent {
	big := bytes.Repeat([]byte("0123456789abcdef"), 40) // 640 bytes > BlockSize 256
	kb := func(s string) []byte { return []byte("\x00\x07" + s) }
	return []ent{
		{Order: 0x0100, Hash: 0x11, Seq: 30, Kind: base.KindValue, Key: kb("alpha"), Value: []byte("v30")},
		{Order: 0x0100, Hash: 0x11, Seq: 20, Kind: base.KindTombstone, Key: kb("alpha")},
		{Order: 0x0100, Hash: 0x11, Seq: 10, Kind: base.KindValue, Key: kb("alpha"), Value: []byte("v10")},
		{Order: 0x0100, Hash: 0x12, Seq: 5, Kind: base.KindValue, Key: kb("beta"), Value: []byte("collides with alpha")},
		{Order: 0x2000, Hash: 0x21, Seq: 44, Kind: base.KindListAppend, Key: kb("list"), Value: []byte("e3")},
		{Order: 0x2000, Hash: 0x21, Seq: 43, Kind: base.KindListAppend, Key: kb("list"), Value: []byte("e2")},
		{Order: 0x2000, Hash: 0x21, Seq: 42, Kind: base.KindListBase, Key: kb("list"), Value: []byte("e0e1")},
		{Order: 0x3000, Hash: 0x31, UserHash: 0x3a, Seq: 61, Kind: base.KindMapEntry, Key: kb("map"), UserKey: []byte(""), Value: []byte("empty user key")},
		{Order: 0x3000, Hash: 0x31, Seq: 60, Kind: base.KindTombstone, Key: kb("map")},
		{Order: 0x3000, Hash: 0x31, UserHash: 0x3b, Seq: 65, Kind: base.KindMapEntryTombstone, Key: kb("map"), UserKey: []byte("k1")},
		{Order: 0x3000, Hash: 0x31, UserHash: 0x3b, Seq: 62, Kind: base.KindMapEntry, Key: kb("map"), UserKey: []byte("k1"), Value: []byte("one")},
		{Order: 0x3000, Hash: 0x31, Seq: 63, Kind: base.KindMapEntry, Key: kb("map"), UserKey: []byte("k2"), Value: []byte("zero user hash")},
		{Order: 0x3000, Hash: 0x31, UserHash: 0x3d, Seq: 64, Kind: base.KindMapEntry, Key: kb("map"), UserKey: []byte("k3"), Value: []byte("three")},
		{Order: 0x4000, Hash: 0x41, Seq: 70, Kind: base.KindValue, Key: kb("big"), Value: big},
		{Order: 0xffffffffffffff00, Hash: 0x51, Seq: 1, Kind: base.KindValue, Key: kb("last"), Value: []byte("end")},
	}
}

var goldenOpts = WriterOptions{BlockSize: 256, BloomBitsPerKey: 10}

// TestGoldenV1 reads testdata/v1.sst, written by format version 1, and checks
// that (1) it reads back as goldenEntries, (2) today's Writer produces the
// same bytes from the same entries, and (3) Dump prints testdata/v1.dump.
// If (2) fails, the format changed: bump FormatVersion and add a new golden
// file rather than regenerating this one. Run with -update to (re)create the
// files.
func TestGoldenV1(t *testing.T) {
	es := goldenEntries()
	fs := vfs.NewMem()
	writeFile(t, fs, "g.sst", es, goldenOpts)
	fresh := fileBytes(t, fs, "g.sst")
	var dump bytes.Buffer
	f, _ := fs.Open("g.sst")
	if err := Dump(&dump, f, int64(len(fresh))); err != nil {
		t.Fatal(err)
	}
	f.Close()
	sstPath, dumpPath := filepath.Join("testdata", "v1.sst"), filepath.Join("testdata", "v1.dump")
	if *update {
		if err := os.WriteFile(sstPath, fresh, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dumpPath, dump.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	golden, err := os.ReadFile(sstPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := readEverything(t, golden, es, nil, 0); err != nil {
		t.Fatalf("reading %s: %v", sstPath, err)
	}
	r, err := Open(readOnly(golden), sstPath, int64(len(golden)), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if m := r.Meta(); m.Blocks < 4 || m.Entries != int64(len(es)) || m.Tombstones != 3 {
		t.Fatalf("golden Meta = %+v", m)
	}
	if !bytes.Equal(golden, fresh) {
		t.Fatalf("the Writer no longer produces %s byte for byte (first difference at %d): the format changed",
			sstPath, firstDiff(golden, fresh))
	}
	want, err := os.ReadFile(dumpPath)
	if err != nil {
		t.Fatal(err)
	}
	if dump.String() != string(want) {
		t.Fatalf("Dump output differs from %s:\n%s", dumpPath, dump.String())
	}
	if !strings.Contains(string(want), "map-entry-tombstone") {
		t.Fatal("dump lacks the kinds")
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// readOnly is a vfs.File over a byte slice (ReadAt only), for tests and
// fuzzing.
type readOnly []byte

func (b readOnly) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off > int64(len(b)) {
		return 0, os.ErrInvalid
	}
	n := copy(p, b[off:])
	if n < len(p) {
		return n, errEOF
	}
	return n, nil
}
func (b readOnly) Read([]byte) (int, error)   { return 0, os.ErrInvalid }
func (b readOnly) Write([]byte) (int, error)  { return 0, os.ErrInvalid }
func (b readOnly) Close() error               { return nil }
func (b readOnly) Sync() error                { return nil }
func (b readOnly) Stat() (os.FileInfo, error) { return nil, os.ErrInvalid }

var errEOF = io.EOF

// TestOrdersHint: a Writer sized by OrdersHint — too small, about right, far too large —
// writes the golden file's bytes exactly (the hint sizes a buffer; it is no part of the
// format).
func TestOrdersHint(t *testing.T) {
	golden, err := os.ReadFile(filepath.Join("testdata", "v1.sst"))
	if err != nil {
		t.Fatal(err)
	}
	es := goldenEntries()
	for _, h := range []int{1, len(es), 1 << 30, -5} {
		fs := vfs.NewMem()
		o := goldenOpts
		o.OrdersHint = h
		writeFile(t, fs, "h.sst", es, o)
		if got := fileBytes(t, fs, "h.sst"); !bytes.Equal(got, golden) {
			t.Fatalf("OrdersHint %d: %d bytes unlike the golden file's %d", h, len(got), len(golden))
		}
	}
}
