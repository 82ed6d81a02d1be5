package slice

import (
	"bytes"
	"errors"
	"flag"
	"path/filepath"
	"testing"

	"github.com/strata-db/strata/internal/base"

	goldenfile "github.com/strata-db/strata/internal/golden"
)

var updateGolden = flag.Bool("update", false, "TestGolden*: rewrite the golden files under testdata/")

// goldenEntries is the fixed content of testdata/slice-v2.bin: every kind, a composite key
// (whose Hash Entry recomputes with base.HashCompositeKey), a map with an empty user key (its
// records after the first hold key references), an empty value, a key of 200 bytes (a 2-byte
// length) and sequence numbers of 1 to 9 varint bytes.
func goldenEntries() []base.Entry {
	ck := base.AppendCompositeKey(nil, 7, 3, []byte("user-42"), []byte("window-1"))
	long := bytes.Repeat([]byte{'L'}, 200)
	es := []base.Entry{
		{Order: 1, Seq: 1, Kind: base.KindValue, Key: ck, Value: []byte("v1")},
		{Order: 2, Seq: 300, Kind: base.KindTombstone, Key: []byte("b")},
		{Order: 3, Seq: 1 << 21, Kind: base.KindListBase, Key: []byte("l"), Value: []byte("base")},
		{Order: 3, Seq: 1<<21 - 1, Kind: base.KindListAppend, Key: []byte("l2"), Value: []byte("op")},
		{Order: 4, Seq: 1 << 40, Kind: base.KindTombstone, Key: []byte("m")},
		{Order: 4, Seq: 1<<40 - 1, Kind: base.KindMapEntry, Key: []byte("m"), UserKey: []byte{}, Value: []byte("empty uk")},
		{Order: 4, Seq: 1<<40 - 2, Kind: base.KindMapEntry, Key: []byte("m"), UserKey: []byte("u"), Value: []byte("w")},
		{Order: 4, Seq: 1<<40 - 3, Kind: base.KindMapEntryTombstone, Key: []byte("m"), UserKey: []byte("v")},
		{Order: 5, Seq: 1 << 62, Kind: base.KindValue, Key: long, Value: nil},
	}
	for i := range es {
		es[i].Hash, es[i].UserHash = keyHash(es[i].Key), userHash(es[i].Kind, es[i].UserKey)
	}
	return es
}

// TestGoldenSliceV2: the builder still produces testdata/slice-v2.bin byte for byte (rewrite
// with -update only for a new format version), and Decode reads the file back to the entries,
// hashes included. A version-1 header is refused with ErrFormatVersion (doc.go: no version-1
// slice was ever persisted).
func TestGoldenSliceV2(t *testing.T) {
	e := newEnv(t, MinSliceSize, Options{BucketBits: -1})
	es := goldenEntries()
	out := e.install(t, es...)
	if len(out) != 1 {
		t.Fatalf("%d slices, want 1", len(out))
	}
	path := filepath.Join("testdata", "slice-v2.bin")
	want := goldenfile.Check(t, path, out[0].Bytes(), *updateGolden)
	s, err := Decode(aligned(want))
	if err != nil {
		t.Fatal(err)
	}
	if s.Len() != len(es) {
		t.Fatalf("%d entries, want %d", s.Len(), len(es))
	}
	for i := range es {
		var g base.Entry
		s.Entry(i, &g)
		w := &es[i]
		if base.Compare(&g, w) != 0 || g.Kind != w.Kind || g.Hash != w.Hash || g.UserHash != w.UserHash ||
			!bytes.Equal(g.Value, w.Value) {
			t.Errorf("entry %d: got %+v, want %+v", i, g, *w)
		}
	}
	v1 := aligned(want)
	v1[hdrVersion] = 1
	if _, err := Decode(v1); !errors.Is(err, base.ErrFormatVersion) {
		t.Errorf("version 1: %v, want ErrFormatVersion", err)
	}
}
