package checkpoint

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/strata-db/strata/internal/base"

	goldenfile "github.com/strata-db/strata/internal/golden"
)

var updateCanonical = flag.Bool("update-canonical", false, "TestGoldenCanonical, TestGoldenManifestV5: rewrite testdata/CANONICAL-v1 and testdata/MANIFEST-v5")

// goldenCanonicalMeta and goldenCanonicalRecords are the fixed content of
// testdata/CANONICAL-v1: every state kind, with and without TTL, a timer service, entries in
// three key groups (one of them larger than a block), timers of both domains.
func goldenCanonicalMeta() CanonicalMeta {
	return CanonicalMeta{MaxParallelism: 128, KeyGroups: KeyGroupRange{Start: 32, End: 63},
		States: []CanonicalState{
			{Name: "count", Kind: StateValue, Codecs: [2]string{"string", "int64"}},
			{Name: "events", Kind: StateList, TTL: true, Codecs: [2]string{"void", "bytes"}},
			{Name: "seen", Kind: StateMap, TTL: true, Codecs: [2]string{"window", "string"}},
			{Name: "sum", Kind: StateReducing, Codecs: [2]string{"void", "int64"}},
			{Name: "avg", Kind: StateAggregating, TTL: true, Codecs: [2]string{"void", "acc"}},
			{Name: "windows", Kind: StateTimerService, Codecs: [2]string{"window", ""}},
		},
		InputPosition: []byte("partition-0:4711"),
		OperatorState: append([]byte("STRATAOP… opaque here"), 0, 0xff),
	}
}

func goldenCanonicalRecords() ([]CanonicalEntry, []CanonicalTimer) {
	es := []CanonicalEntry{
		{KeyGroup: 33, State: 0, Key: []byte("alice"), Value: []byte{1, 0, 0, 0, 0, 0, 0, 0}},
		{KeyGroup: 33, State: 1, Key: []byte("alice"), Elements: [][]byte{[]byte("e1"), {}, []byte("e3")}, ElementTTLs: []int64{-5, 0, 1 << 40}},
		{KeyGroup: 33, State: 2, Key: []byte("alice"), Namespace: []byte("w1"), UserKey: []byte("uk"), Value: []byte("v"), TTL: 1000},
		{KeyGroup: 40, State: 3, Key: []byte("bob"), Value: []byte{9}},
		{KeyGroup: 40, State: 4, Key: []byte("bob"), Value: []byte("acc"), TTL: -1},
	}
	for i := range 40 { // more than one block of key group 63 (blocks of 1 KiB in the tests)
		es = append(es, CanonicalEntry{KeyGroup: 63, State: 0, Key: []byte{byte(i)}, Value: bytes.Repeat([]byte{byte(i)}, 100)})
	}
	ts := []CanonicalTimer{
		{KeyGroup: 33, Service: 5, Domain: 0, KeyHash: -7, Timestamp: -100, Key: []byte("alice"), Namespace: []byte("w1")},
		{KeyGroup: 33, Service: 5, Domain: 1, KeyHash: -7, Timestamp: 1 << 50, Key: []byte("alice")},
		{KeyGroup: 62, Service: 5, Domain: 0, KeyHash: 3, Timestamp: 0, Key: []byte("carol"), Namespace: []byte("w2")},
	}
	return es, ts
}

func encodeCanonical(t testing.TB, meta CanonicalMeta, es []CanonicalEntry, ts []CanonicalTimer) []byte {
	var buf bytes.Buffer
	w, err := NewCanonicalWriter(&buf, meta)
	if err != nil {
		t.Fatal(err)
	}
	w.target = 1 << 10
	for i := range es {
		if err := w.Add(&es[i]); err != nil {
			t.Fatal(err)
		}
	}
	for i := range ts {
		if err := w.AddTimer(&ts[i]); err != nil {
			t.Fatal(err)
		}
	}
	n, err := w.Close()
	if err != nil || n != int64(buf.Len()) {
		t.Fatalf("Close: %d, %v; wrote %d", n, err, buf.Len())
	}
	return buf.Bytes()
}

// readAll returns the entries and timers of kgs, deep-copied.
func readAll(t testing.TB, r *CanonicalReader, kgs KeyGroupRange) ([]CanonicalEntry, []CanonicalTimer, error) {
	var es []CanonicalEntry
	var ts []CanonicalTimer
	err := r.Scan(kgs, func(e *CanonicalEntry) error {
		c := CanonicalEntry{KeyGroup: e.KeyGroup, State: e.State, Key: clone(e.Key), Namespace: clone(e.Namespace),
			UserKey: clone(e.UserKey), Value: clone(e.Value), TTL: e.TTL}
		for _, el := range e.Elements {
			c.Elements = append(c.Elements, clone(el))
		}
		if len(e.ElementTTLs) > 0 {
			c.ElementTTLs = append([]int64(nil), e.ElementTTLs...)
		}
		es = append(es, c)
		return nil
	}, func(tm *CanonicalTimer) error {
		c := *tm
		c.Key, c.Namespace = clone(tm.Key), clone(tm.Namespace)
		ts = append(ts, c)
		return nil
	})
	return es, ts, err
}

// clone copies b, nil for empty (as the records compare).
func clone(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return bytes.Clone(b)
}

func normalize(es []CanonicalEntry) []CanonicalEntry {
	out := make([]CanonicalEntry, len(es))
	for i, e := range es {
		c := e
		c.Key, c.Namespace, c.UserKey, c.Value = clone(e.Key), clone(e.Namespace), clone(e.UserKey), clone(e.Value)
		c.Elements = nil
		for _, el := range e.Elements {
			c.Elements = append(c.Elements, clone(el))
		}
		out[i] = c
	}
	return out
}

// TestGoldenCanonical: the writer produces testdata/CANONICAL-v1 byte for byte, and the file
// reads back to the golden content, whole and by key-group range. If the encoding check fails
// the format changed: bump the version and add a new golden file. -update-canonical rewrites it.
func TestGoldenCanonical(t *testing.T) {
	meta := goldenCanonicalMeta()
	es, ts := goldenCanonicalRecords()
	fresh := encodeCanonical(t, meta, es, ts)
	path := filepath.Join("testdata", "CANONICAL-v1")
	b := goldenfile.Check(t, path, fresh, *updateCanonical)
	r, err := DecodeCanonical("CANONICAL-v1", b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(*r.Meta(), meta) {
		t.Errorf("meta %+v, want %+v", *r.Meta(), meta)
	}
	gotE, gotT, err := readAll(t, r, meta.KeyGroups)
	if err != nil {
		t.Fatal(err)
	}
	if want := normalize(es); !reflect.DeepEqual(gotE, want) {
		t.Errorf("entries\n got %+v\nwant %+v", gotE, want)
	}
	if !reflect.DeepEqual(gotT, ts) {
		t.Errorf("timers\n got %+v\nwant %+v", gotT, ts)
	}
	// A sub-range reads only its key groups.
	gotE, gotT, err = readAll(t, r, KeyGroupRange{Start: 34, End: 62})
	if err != nil || len(gotE) != 2 || len(gotT) != 1 || gotT[0].KeyGroup != 62 {
		t.Errorf("key groups 34-62: %d entries, %+v, %v", len(gotE), gotT, err)
	}
	if n, m, err := r.Verify(); err != nil || n != int64(len(es)) || m != int64(len(ts)) {
		t.Errorf("Verify: %d, %d, %v", n, m, err)
	}
}

// TestCanonicalDamage: a flipped byte anywhere is an ErrCorruption naming the object (at
// open, or at the scan of the block it hits); a cut-short object is ErrTruncated; another
// version is ErrFormatVersion.
func TestCanonicalDamage(t *testing.T) {
	es, ts := goldenCanonicalRecords()
	b := encodeCanonical(t, goldenCanonicalMeta(), es, ts)
	check := func(what string, in []byte) error {
		r, err := DecodeCanonical("obj", in)
		if err == nil {
			_, _, err = r.Verify()
		}
		if !errors.Is(err, base.ErrCorruption) {
			t.Fatalf("%s: %v, want ErrCorruption", what, err)
		}
		var ce *base.CorruptionError
		if !errors.As(err, &ce) || ce.File != "obj" {
			t.Fatalf("%s: %v does not name the object", what, err)
		}
		return err
	}
	for i := 0; i < len(b); i += 7 {
		d := bytes.Clone(b)
		d[i] ^= 0x10
		check("flip", d)
	}
	for _, n := range []int{0, 5, 23, 100, len(b) / 2, len(b) - 1} {
		if err := check("truncated", b[:n]); n > 8 && !errors.Is(err, base.ErrTruncated) {
			t.Errorf("cut to %d: %v, want ErrTruncated", n, err)
		}
	}
	d := bytes.Clone(b)
	binary.LittleEndian.PutUint16(d[8:], 2)
	if err := check("version", d); !errors.Is(err, base.ErrFormatVersion) {
		t.Errorf("version 2: %v", err)
	}
}

// TestCanonicalWriterRules: the writer refuses what the format cannot hold.
func TestCanonicalWriterRules(t *testing.T) {
	meta := goldenCanonicalMeta()
	for name, e := range map[string]CanonicalEntry{
		"order":      {KeyGroup: 32, State: 0},
		"range":      {KeyGroup: 64, State: 0},
		"state":      {KeyGroup: 40, State: 9},
		"timersvc":   {KeyGroup: 40, State: 5},
		"emptylist":  {KeyGroup: 40, State: 1},
		"ttlmissing": {KeyGroup: 40, State: 1, Elements: [][]byte{{1}}},
	} {
		w, err := NewCanonicalWriter(&bytes.Buffer{}, meta)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Add(&CanonicalEntry{KeyGroup: 33, State: 0}); err != nil {
			t.Fatal(err)
		}
		if err := w.Add(&e); !errors.Is(err, ErrInvalidEntry) {
			t.Errorf("%s: %v, want ErrInvalidEntry", name, err)
		}
	}
	bad := meta
	bad.States = append(bad.States, CanonicalState{Name: "count", Kind: StateValue})
	if _, err := NewCanonicalWriter(&bytes.Buffer{}, bad); !errors.Is(err, ErrInvalidEntry) {
		t.Errorf("duplicate state: %v", err)
	}
}

// FuzzDecodeCanonical: the reader never panics on any bytes, fails only with a
// *base.CorruptionError, and what it accepts re-encodes to the same bytes.
func FuzzDecodeCanonical(f *testing.F) {
	es, ts := goldenCanonicalRecords()
	f.Add(encodeCanonical(f, goldenCanonicalMeta(), es[:6], ts))
	f.Add(encodeCanonical(f, CanonicalMeta{MaxParallelism: 1}, nil, nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeCanonical("fuzz", b)
		var gotE []CanonicalEntry
		var gotT []CanonicalTimer
		if err == nil {
			gotE, gotT, err = readAll(t, r, r.Meta().KeyGroups)
		}
		if err != nil {
			var ce *base.CorruptionError
			if !errors.As(err, &ce) || !errors.Is(err, base.ErrCorruption) {
				t.Fatalf("%v: not a *base.CorruptionError", err)
			}
			return
		}
		// What decodes re-encodes to a stream that reads the same (blocks may split
		// differently, so compare contents).
		again := encodeCanonical(t, *r.Meta(), gotE, gotT)
		r2, err := DecodeCanonical("again", again)
		if err != nil {
			t.Fatal(err)
		}
		e2, t2, err := readAll(t, r2, r2.Meta().KeyGroups)
		if err != nil || !reflect.DeepEqual(e2, gotE) || !reflect.DeepEqual(t2, gotT) {
			t.Fatalf("re-encoding reads differently: %v", err)
		}
	})
}

// goldenManifestV5 is the fixed content of testdata/MANIFEST-v5: a canonical savepoint.
func goldenManifestV5() *Manifest {
	m := goldenManifestV3()
	m.Parent, m.LastSeq = 0, 0
	m.Objects = []Object{{Name: "job-a-savepoint/chk-00000000000000000042/00032-00063-0000000000000007.canon",
		Kind: KindCanonical, Size: 5000, CRC: 0xca0011ca, KeyGroups: KeyGroupRange{Start: 32, End: 63}}}
	return m
}

// TestGoldenManifestV5: a manifest listing a canonical savepoint encodes as version 5 to
// exactly testdata/MANIFEST-v5 and decodes back; version 4 bytes with a canonical object and
// version 5 bytes without one are corrupt. -update-canonical rewrites the file.
func TestGoldenManifestV5(t *testing.T) {
	want := goldenManifestV5()
	fresh, err := want.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if v := binary.LittleEndian.Uint16(fresh[8:]); v != manifestVersion5 {
		t.Fatalf("encoded as version %d", v)
	}
	path := filepath.Join("testdata", "MANIFEST-v5")
	b := goldenfile.Check(t, path, fresh, *updateCanonical)
	if got, err := DecodeManifest("MANIFEST-v5", b); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("decoded %+v, %v", got, err)
	}
	v4 := bytes.Clone(b)
	binary.LittleEndian.PutUint16(v4[8:], manifestVersion)
	if _, err := DecodeManifest("v4", reseal(v4)); !errors.Is(err, base.ErrCorruption) {
		t.Errorf("a canonical object in version 4: %v", err)
	}
	plain, err := goldenManifestV4().Encode()
	if err != nil {
		t.Fatal(err)
	}
	binary.LittleEndian.PutUint16(plain[8:], manifestVersion5)
	if _, err := DecodeManifest("v5", reseal(plain)); !errors.Is(err, base.ErrCorruption) {
		t.Errorf("version 5 without a canonical object: %v", err)
	}
}
