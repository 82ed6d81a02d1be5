package lsm

import (
	"flag"
	"path/filepath"
	"reflect"
	"testing"

	goldenfile "github.com/strata-db/strata/internal/golden"
)

var updateGolden = flag.Bool("update", false, "TestGolden*: rewrite the golden files under testdata/")

// goldenEdits is the fixed content of testdata/MANIFEST-v1, laid out as doc.go's "after a
// persist point": a snapshot of a version (counters, files on two levels), a compaction edit
// (deletions and an addition), the persist point with its metadata, then an install after it.
func goldenEdits() []edit {
	return []edit{
		{HasNextFile: true, NextFile: 5, HasLastSeq: true, LastSeq: 100, Added: []newFile{
			{Level: 0, Meta: FileMeta{Num: 3, Size: 4096, Entries: 40, Blocks: 2, Tombstones: 1, MinOrder: 0x10, MaxOrder: 0xfff0, MinSeq: 61, MaxSeq: 100}},
			{Level: 1, Meta: FileMeta{Num: 1, Size: 1 << 20, Entries: 9000, Blocks: 260, MinOrder: 0, MaxOrder: 0x7fffffffffffffff, MinSeq: 1, MaxSeq: 30}},
			{Level: 1, Meta: FileMeta{Num: 2, Size: 300, Entries: 3, Blocks: 1, Tombstones: 3, MinOrder: 0x8000000000000000, MaxOrder: 0xffffffffffffffff, MinSeq: 31, MaxSeq: 60}},
		}},
		{HasNextFile: true, NextFile: 6, Deleted: []deletedFile{{Level: 0, Num: 3}, {Level: 1, Num: 1}},
			Added: []newFile{{Level: 1, Meta: FileMeta{Num: 5, Size: 1<<20 + 4000, Entries: 9039, Blocks: 262, Tombstones: 1, MinOrder: 0, MaxOrder: 0x7fffffffffffffff, MinSeq: 1, MaxSeq: 100}}}},
		{HasLastSeq: true, LastSeq: 180, Persist: &persistPoint{LastSeq: 180, Meta: []byte("the caller's metadata (the state registry)")}},
		{HasNextFile: true, NextFile: 7, HasLastSeq: true, LastSeq: 200, Added: []newFile{
			{Level: 0, Meta: FileMeta{Num: 6, Size: 512, Entries: 5, Blocks: 1, MinOrder: 0x20, MaxOrder: 0x20, MinSeq: 181, MaxSeq: 200}},
		}},
	}
}

// goldenManifest encodes edits as a manifest file: the header, then one record per edit.
func goldenManifest(edits []edit) []byte {
	b := appendFileHeader(nil, manifestMagic)
	for i := range edits {
		b = appendRecord(b, edits[i].encode(nil))
	}
	return b
}

// golden compares fresh with testdata/name (rewriting it first under -update) and returns the
// golden bytes.
func golden(t *testing.T, name string, fresh []byte) []byte {
	t.Helper()
	return goldenfile.Check(t, filepath.Join("testdata", name), fresh, *updateGolden)
}

// TestGoldenManifestV1: the manifest format (version 1: header, framed records of edits)
// encodes goldenEdits to exactly testdata/MANIFEST-v1, and the file decodes back to them with
// no torn tail. TestGoldenCurrentV2: CURRENT (format version 2) naming that manifest and its
// persist-point record encodes to exactly testdata/CURRENT-v2 and decodes back, and the record
// it names is the persist point. If an encoding check fails, the format changed: bump the
// version and add a new golden file rather than regenerating this one. Run with -update to
// (re)create the files.
func TestGoldenManifestV1(t *testing.T) {
	want := goldenEdits()
	b := golden(t, "MANIFEST-v1", goldenManifest(want))
	var got []edit
	end, torn, err := decodeManifest("MANIFEST-v1", b, func(_ recordPos, e *edit) error {
		got = append(got, *e)
		return nil
	})
	if err != nil || torn || end != int64(len(b)) {
		t.Fatalf("decodeManifest: end %d of %d, torn %v, %v", end, len(b), torn, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("MANIFEST-v1 decodes to\n%+v\nwant\n%+v", got, want)
	}
}

func TestGoldenCurrentV2(t *testing.T) {
	m := goldenManifest(goldenEdits())
	var persist recordPos
	if _, _, err := decodeManifest("MANIFEST-v1", m, func(r recordPos, e *edit) error {
		if e.Persist != nil {
			persist = r
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	want := current{Manifest: 9, Synced: int64(len(m)), PersistEnd: persist.End, PersistSeq: 180, PersistCRC: persist.CRC}
	if persist.End == 0 || persist.End == int64(len(m)) {
		t.Fatalf("the golden manifest's persist point ends at %d of %d: it must be a record before the last", persist.End, len(m))
	}
	b := golden(t, "CURRENT-v2", encodeCurrent(want))
	got, err := decodeCurrent("CURRENT-v2", b)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("CURRENT-v2 decodes to %+v, want %+v", got, want)
	}
}
