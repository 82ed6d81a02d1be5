package checkpoint

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/strata-db/strata/internal/base"

	goldenfile "github.com/strata-db/strata/internal/golden"
)

var updateGolden = flag.Bool("update", false, "TestGoldenManifestV4: rewrite testdata/MANIFEST-v4 (MANIFEST-v1 to MANIFEST-v3 are frozen: Encode writes only version 4)")

// goldenManifest is the fixed content of testdata/MANIFEST-v1: every field version 1 has set,
// each kind of object, a packed changelog range, an object of another owner (NO_CLAIM),
// extreme values. LastSeq and every Level are 0, as version 1 cannot hold them.
func goldenManifest() *Manifest {
	return &Manifest{
		ID: 42, Parent: 41, Epoch: 3, CreatedUnixMilli: 1_700_000_000_123,
		MaxParallelism: 128, KeyGroups: KeyGroupRange{Start: 32, End: 63},
		Registry:      []byte("STRATARG… the state registry, opaque here"),
		InputPosition: []byte(`{"topic":"flights","partition":3,"offset":1234567}`),
		Objects: []Object{
			{Name: "job-a/shared/00032-00063/00000000000000000040-00000000deadbeef.sst", Kind: KindTable, Size: 1 << 20, CRC: 0x01020304,
				KeyGroups: KeyGroupRange{Start: 32, End: 63}, MinOrder: 0x4000000000000000, MaxOrder: 0x7fffffffffffffff},
			{Name: "job-old/shared/00000-00127/00000000000000000007-0000000000c0ffee.sst", Kind: KindTable, Size: 4096, CRC: 0xffffffff,
				KeyGroups: KeyGroupRange{Start: 0, End: 127}, MinOrder: 0, MaxOrder: math.MaxUint64},
			{Name: "job-a/shared/00000-00127/00000000000000000042-0000000000000001.log", Kind: KindChangelog, Size: 10000, CRC: 0xcafef00d,
				KeyGroups: KeyGroupRange{Start: 32, End: 47}, MinOrder: 0x4000000000000000, MaxOrder: 0x5fffffffffffffff,
				Packed: true, Offset: 2048, Length: 512},
			{Name: "job-a/chk-00000000000000000042/00032-00063-0000000000000002.bin", Kind: KindOther, Size: 0, CRC: 0,
				KeyGroups: KeyGroupRange{Start: 63, End: 63}, MinOrder: 5, MaxOrder: 5},
		},
	}
}

// goldenManifestV2 is the fixed content of testdata/MANIFEST-v2: goldenManifest with a LastSeq
// whose eight bytes all differ (a width or byte-order slip shows) and tables at levels 0, 1, 6
// and 15 (no level bit, the lowest, middle ones, all four).
func goldenManifestV2() *Manifest {
	m := goldenManifest()
	m.LastSeq = 0x0123456789abcdef
	m.Objects[0].Level = 6
	m.Objects[1].Level = 15
	m.Objects = append(m.Objects,
		Object{Name: "job-a/shared/00032-00063/00000000000000000042-0000000000000003.sst", Kind: KindTable, Size: 65536, CRC: 0x0badf00d,
			KeyGroups: KeyGroupRange{Start: 40, End: 50}, MinOrder: 0x5000000000000000, MaxOrder: 0x6000000000000000, Level: 0},
		Object{Name: "job-a/shared/00032-00063/00000000000000000042-0000000000000004.sst", Kind: KindTable, Size: 8192, CRC: 0x12345678,
			KeyGroups: KeyGroupRange{Start: 32, End: 63}, MinOrder: 0x4000000000000000, MaxOrder: 0x7fffffffffffffff, Level: 1},
	)
	return m
}

// goldenManifestV3 is the fixed content of testdata/MANIFEST-v3: goldenManifestV2 with an
// operator state blob (opaque here; its bytes include every byte value class: text, zero, 0xff).
func goldenManifestV3() *Manifest {
	m := goldenManifestV2()
	m.OperatorState = append([]byte("STRATAOP… the operator state, opaque here"), 0, 0xff, 0x80, 1)
	return m
}

// goldenManifestV4 is the fixed content of testdata/MANIFEST-v4: goldenManifestV3 with the
// timer sections of two key groups packed in one object (timestamps' sign bits flipped into
// the order range: a negative first timestamp and a positive last one).
func goldenManifestV4() *Manifest {
	m := goldenManifestV3()
	const name = "job-a/chk-00000000000000000042/00032-00063-0000000000000005.tmr"
	m.Objects = append(m.Objects,
		Object{Name: name, Kind: KindTimers, Size: 700, CRC: 0x7157a11d, KeyGroups: KeyGroupRange{Start: 33, End: 33},
			MinOrder: 0x7fffffffffffff00, MaxOrder: 0x8000000000001000, Packed: true, Offset: 0, Length: 300},
		Object{Name: name, Kind: KindTimers, Size: 700, CRC: 0x00c0ffee, KeyGroups: KeyGroupRange{Start: 63, End: 63},
			MinOrder: 0x8000000000000000, MaxOrder: 0x8000000000000000, Packed: true, Offset: 300, Length: 400},
	)
	return m
}

// v3Bytes rewrites the version 4 bytes of a manifest without timer objects as version 3: the
// same bytes with the version set, resealed. That the result is MANIFEST-v3 byte for byte
// (TestGoldenManifestV3) pins version 3 as "version 4 without timers".
func v3Bytes(v4 []byte) []byte {
	b := append([]byte(nil), v4...)
	binary.LittleEndian.PutUint16(b[8:], manifestVersion3)
	return reseal(b)
}

// v2Bytes rewrites the version 4 (or 3) bytes of a manifest without operator state or timers
// as version 2:
// drop the 4 bytes of the (zero) operator state length after the input position, set the
// version, reseal. That the result is MANIFEST-v2 byte for byte (TestGoldenManifestV2) pins
// version 2 as "version 3 without operator state", which lets tests build version 2 input.
func v2Bytes(v3 []byte) []byte {
	le := binary.LittleEndian
	off := manifestHeader + manifestFixed
	off += 4 + int(le.Uint32(v3[off:])) // registry
	off += 4 + int(le.Uint32(v3[off:])) // input position
	if le.Uint32(v3[off:]) != 0 {
		panic("v2Bytes of a manifest with operator state")
	}
	b := append(append([]byte(nil), v3[:off]...), v3[off+4:]...)
	le.PutUint16(b[8:], manifestVersion2)
	return reseal(b)
}

// v1Bytes rewrites the version 3 bytes of a manifest with LastSeq 0, every Level 0 and no
// operator state as version 1: version 2 (v2Bytes) less the 8 bytes of lastSeq after kg end,
// with the version set, resealed. That the result is MANIFEST-v1 byte for byte
// (TestGoldenManifestV1) pins version 1 as "version 2 without lastSeq and levels", which lets
// tests build version 1 input.
func v1Bytes(v3 []byte) []byte {
	v2 := v2Bytes(v3)
	const lastSeq = manifestHeader + manifestFixedV1
	b := append(append([]byte(nil), v2[:lastSeq]...), v2[lastSeq+8:]...)
	binary.LittleEndian.PutUint16(b[8:], manifestVersion1)
	return reseal(b)
}

// TestGoldenManifestV1: testdata/MANIFEST-v1, written by the version 1 encoder, still decodes
// to goldenManifest (with LastSeq and levels 0), is goldenManifest's version 3 encoding less
// lastSeq and the operator state length, and re-encodes as version 3 to the same Manifest. The
// file is frozen: Encode writes only version 3, so -update does not touch it.
func TestGoldenManifestV1(t *testing.T) {
	want := goldenManifest()
	path := filepath.Join("testdata", "MANIFEST-v1")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if v := binary.LittleEndian.Uint16(b[8:]); v != 1 {
		t.Fatalf("%s has format version %d", path, v)
	}
	got, err := DecodeManifest("MANIFEST-v1", b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("decoded golden manifest:\n got %+v\nwant %+v", got, want)
	}
	v3, err := got.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if binary.LittleEndian.Uint16(v3[8:]) != manifestVersion {
		t.Errorf("a decoded version 1 manifest encodes as version %d", binary.LittleEndian.Uint16(v3[8:]))
	}
	if again, err := DecodeManifest("v3", v3); err != nil || !reflect.DeepEqual(again, want) {
		t.Errorf("version 1 re-encoded as version 3 decodes to %+v, %v", again, err)
	}
	if v1 := v1Bytes(v3); !bytes.Equal(v1, b) {
		t.Errorf("version 3 less lastSeq and the operator state length is not %s:\n got %x\nwant %x", path, v1, b)
	}
}

// TestGoldenManifestV2: testdata/MANIFEST-v2, written by the version 2 encoder, still decodes
// to goldenManifestV2, is its version 3 encoding less the operator state length, and
// re-encodes as version 3 to the same Manifest. The file is frozen: Encode writes only version
// 3, so -update does not touch it.
func TestGoldenManifestV2(t *testing.T) {
	want := goldenManifestV2()
	path := filepath.Join("testdata", "MANIFEST-v2")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if v := binary.LittleEndian.Uint16(b[8:]); v != 2 {
		t.Fatalf("%s has format version %d", path, v)
	}
	got, err := DecodeManifest("MANIFEST-v2", b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("decoded golden manifest:\n got %+v\nwant %+v", got, want)
	}
	v3, err := got.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if again, err := DecodeManifest("v3", v3); err != nil || !reflect.DeepEqual(again, want) {
		t.Errorf("version 2 re-encoded as version 3 decodes to %+v, %v", again, err)
	}
	if v2 := v2Bytes(v3); !bytes.Equal(v2, b) {
		t.Errorf("version 3 less the operator state length is not %s:\n got %x\nwant %x", path, v2, b)
	}
}

// TestGoldenManifestV3: testdata/MANIFEST-v3, written by the version 3 encoder, still decodes
// to goldenManifestV3, is its version 4 encoding with the version changed, and re-encodes as
// version 4 to the same Manifest. The file is frozen: Encode writes only version 4, so -update
// does not touch it.
func TestGoldenManifestV3(t *testing.T) {
	want := goldenManifestV3()
	path := filepath.Join("testdata", "MANIFEST-v3")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if v := binary.LittleEndian.Uint16(b[8:]); v != 3 {
		t.Fatalf("%s has format version %d", path, v)
	}
	got, err := DecodeManifest("MANIFEST-v3", b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("decoded golden manifest:\n got %+v\nwant %+v", got, want)
	}
	v4, err := got.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if again, err := DecodeManifest("v4", v4); err != nil || !reflect.DeepEqual(again, want) {
		t.Errorf("version 3 re-encoded as version 4 decodes to %+v, %v", again, err)
	}
	if v3 := v3Bytes(v4); !bytes.Equal(v3, b) {
		t.Errorf("version 4 relabelled is not %s:\n got %x\nwant %x", path, v3, b)
	}
	// A timer entry in a version 3 manifest is an unknown kind.
	withTimers, err := goldenManifestV4().Encode()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeManifest("v3", v3Bytes(withTimers)); !errors.Is(err, base.ErrCorruption) {
		t.Errorf("a version 3 manifest with timer objects decodes: %v", err)
	}
}

// TestGoldenManifestV4: format version 4 encodes goldenManifestV4 to exactly
// testdata/MANIFEST-v4, and the file decodes back to it. If the encoding check fails, the
// format changed: bump the version and add a new golden file rather than regenerating this
// one. -update (re)creates it.
func TestGoldenManifestV4(t *testing.T) {
	want := goldenManifestV4()
	fresh, err := want.Encode()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "MANIFEST-v4")
	b := goldenfile.Check(t, path, fresh, *updateGolden)
	got, err := DecodeManifest("MANIFEST-v4", b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("decoded golden manifest:\n got %+v\nwant %+v", got, want)
	}
}

// TestManifestRoundTrip: manifests at the edges of every field encode and decode to themselves,
// and re-encode to the same bytes; those version 2 (or 1) can hold decode to themselves from
// version 2 (and 1) bytes too.
func TestManifestRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    Manifest
	}{
		{"minimal", Manifest{ID: 1, MaxParallelism: 1}},
		{"max parallelism", Manifest{ID: math.MaxUint64, Parent: math.MaxUint64 - 1, Epoch: math.MaxUint64, CreatedUnixMilli: -1,
			MaxParallelism: MaxParallelismLimit, KeyGroups: KeyGroupRange{Start: 0, End: MaxParallelismLimit - 1}}},
		{"blobs only", Manifest{ID: 2, MaxParallelism: 4, Registry: []byte{0}, InputPosition: bytes.Repeat([]byte("x"), 1000)}},
		{"longest name", Manifest{ID: 3, MaxParallelism: 2, Objects: []Object{{Name: strings.Repeat("n", MaxNameLen), Kind: KindOther, Size: math.MaxInt64,
			Packed: true, Offset: math.MaxInt64, Length: 0, KeyGroups: KeyGroupRange{Start: 1, End: 1}}}}},
		{"repeated packed object", Manifest{ID: 4, MaxParallelism: 8, Objects: []Object{
			{Name: "a/x.log", Kind: KindChangelog, Size: 100, Packed: true, Offset: 0, Length: 50},
			{Name: "a/x.log", Kind: KindChangelog, Size: 100, Packed: true, Offset: 50, Length: 50, KeyGroups: KeyGroupRange{Start: 4, End: 7}},
		}}},
		{"golden", *goldenManifest()},
		{"golden v2", *goldenManifestV2()},
		{"golden v3", *goldenManifestV3()},
		{"golden v4", *goldenManifestV4()},
		{"operator state only", Manifest{ID: 7, MaxParallelism: 3, OperatorState: []byte{0}}},
		{"every blob", Manifest{ID: 8, MaxParallelism: 3, Registry: []byte("r"), InputPosition: []byte("ip"),
			OperatorState: bytes.Repeat([]byte{0xa5}, 4097)}},
		{"last seq max, levels at the edges", Manifest{ID: 5, MaxParallelism: 2, LastSeq: math.MaxUint64, Objects: []Object{
			{Name: "a/0.sst", Kind: KindTable, Level: 0},
			{Name: "a/15.sst", Kind: KindTable, Level: MaxLevel},
			{Name: "a/9.sst", Kind: KindTable, Level: 9, Size: 10, Packed: true, Offset: 1, Length: 2}, // every flag bit class at once
		}}},
		{"last seq 1", Manifest{ID: 6, MaxParallelism: 1, LastSeq: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := tc.m.Encode()
			if err != nil {
				t.Fatal(err)
			}
			got, err := DecodeManifest("m", b)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, &tc.m) {
				t.Fatalf("round trip:\n got %+v\nwant %+v", got, tc.m)
			}
			b2, err := got.Encode()
			if err != nil || !bytes.Equal(b, b2) {
				t.Fatalf("re-encoding differs: %v", err)
			}
			if slices.ContainsFunc(tc.m.Objects, func(o Object) bool { return o.Kind == KindTimers }) {
				return // not expressible in version 3
			}
			got3, err := DecodeManifest("m", v3Bytes(b))
			if err != nil || !reflect.DeepEqual(got3, &tc.m) {
				t.Fatalf("version 3 round trip:\n got %+v %v\nwant %+v", got3, err, tc.m)
			}
			if tc.m.OperatorState != nil {
				return // not expressible in version 2
			}
			got2, err := DecodeManifest("m", v2Bytes(b))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got2, &tc.m) {
				t.Fatalf("version 2 round trip:\n got %+v\nwant %+v", got2, tc.m)
			}
			if tc.m.LastSeq != 0 || slices.ContainsFunc(tc.m.Objects, func(o Object) bool { return o.Level != 0 }) {
				return // not expressible in version 1
			}
			got1, err := DecodeManifest("m", v1Bytes(b))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got1, &tc.m) {
				t.Fatalf("version 1 round trip:\n got %+v\nwant %+v", got1, tc.m)
			}
		})
	}
}

// TestManifestValidate: Encode refuses every manifest that breaks a rule of the format.
func TestManifestValidate(t *testing.T) {
	ok := Object{Name: "a/b", Kind: KindTable, Size: 10}
	for _, tc := range []struct {
		name string
		edit func(m *Manifest)
	}{
		{"id 0", func(m *Manifest) { m.ID = 0 }},
		{"max parallelism 0", func(m *Manifest) { m.MaxParallelism = 0 }},
		{"max parallelism too large", func(m *Manifest) { m.MaxParallelism = MaxParallelismLimit + 1 }},
		{"key groups inverted", func(m *Manifest) { m.KeyGroups = KeyGroupRange{Start: 2, End: 1} }},
		{"key groups outside", func(m *Manifest) { m.KeyGroups = KeyGroupRange{Start: 0, End: 8} }},
		{"bad name", func(m *Manifest) { m.Objects[0].Name = "../x" }},
		{"kind 0", func(m *Manifest) { m.Objects[0].Kind = 0 }},
		{"kind 6", func(m *Manifest) { m.Objects[0].Kind = 6 }},
		{"packed canonical", func(m *Manifest) {
			m.Objects[0].Kind = KindCanonical
			m.Objects[0].Packed = true
			m.Objects[0].Length = 1
		}},
		{"timers of two key groups", func(m *Manifest) { m.Objects[0].Kind = KindTimers; m.Objects[0].KeyGroups.End = 1 }},
		{"level on a timers object", func(m *Manifest) { m.Objects[0].Kind = KindTimers; m.Objects[0].Level = 1 }},
		{"negative size", func(m *Manifest) { m.Objects[0].Size = -1 }},
		{"object key groups outside", func(m *Manifest) { m.Objects[0].KeyGroups.End = 8 }},
		{"order inverted", func(m *Manifest) { m.Objects[0].MinOrder = 2; m.Objects[0].MaxOrder = 1 }},
		{"offset without packed", func(m *Manifest) { m.Objects[0].Offset = 1 }},
		{"packed range past the end", func(m *Manifest) { m.Objects[0].Packed = true; m.Objects[0].Offset = 5; m.Objects[0].Length = 6 }},
		{"packed negative", func(m *Manifest) { m.Objects[0].Packed = true; m.Objects[0].Length = -1 }},
		{"blob too large", func(m *Manifest) { m.Registry = make([]byte, MaxBlob+1) }},
		{"operator state too large", func(m *Manifest) { m.OperatorState = make([]byte, MaxBlob+1) }},
		{"level 16", func(m *Manifest) { m.Objects[0].Level = MaxLevel + 1 }},
		{"level 255", func(m *Manifest) { m.Objects[0].Level = 255 }},
		{"level on a changelog object", func(m *Manifest) { m.Objects[0].Kind = KindChangelog; m.Objects[0].Level = 1 }},
		{"level on an other object", func(m *Manifest) { m.Objects[0].Kind = KindOther; m.Objects[0].Level = MaxLevel }},
	} {
		m := Manifest{ID: 1, MaxParallelism: 8, KeyGroups: KeyGroupRange{Start: 0, End: 7}, Objects: []Object{ok}}
		tc.edit(&m)
		if _, err := m.Encode(); !errors.Is(err, errInvalid) {
			t.Errorf("%s: Encode = %v, want an invalid-manifest error", tc.name, err)
		}
	}
}

// reseal recomputes the payload length and the CRC of a manifest whose payload a test edited,
// so that the decoder's payload checks are reached.
func reseal(b []byte) []byte {
	b = append([]byte(nil), b...)
	if len(b) < manifestHeader+4 {
		return b
	}
	end := len(b) - 4
	binary.LittleEndian.PutUint32(b[12:], uint32(end-manifestHeader))
	binary.LittleEndian.PutUint32(b[end:], crc32.Checksum(b[:end], base.CRC32C))
	return b
}

// TestManifestCorruption: each kind of damage is a *base.CorruptionError naming the object,
// at the right offset, with its own cause.
func TestManifestCorruption(t *testing.T) {
	gm := goldenManifestV3()
	good, err := gm.Encode()
	if err != nil {
		t.Fatal(err)
	}
	edit := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	set := func(off int, v ...byte) func(b []byte) []byte {
		return func(b []byte) []byte { copy(b[off:], v); return b }
	}
	const p = manifestHeader // payload start
	// objAt returns the offset of each object entry of a manifest with gm's objects whose
	// fixed payload fields take fixed bytes, with operator state of op bytes (-1: no field,
	// versions 1 and 2).
	opAt := p + manifestFixed + 4 + len(gm.Registry) + 4 + len(gm.InputPosition) // the operator state length
	objAt := func(fixed, op int) []int {
		off := p + fixed + 4 + len(gm.Registry) + 4 + len(gm.InputPosition) + 4
		if op >= 0 {
			off += 4 + op
		}
		var at []int
		for _, o := range gm.Objects {
			at = append(at, off)
			off += objectFixed + len(o.Name)
		}
		return at
	}
	obj := objAt(manifestFixed, len(gm.OperatorState))
	obj0 := obj[0] // a table at level 6
	chlog, other := obj[2], obj[3]
	if gm.Objects[2].Kind != KindChangelog || !gm.Objects[2].Packed || gm.Objects[3].Kind != KindOther {
		t.Fatal("goldenManifestV2's objects moved: fix the offsets here")
	}

	// Version 1 input: goldenManifest (no levels, no lastSeq) in version 1 bytes.
	good1, err := goldenManifest().Encode()
	if err != nil {
		t.Fatal(err)
	}
	good1 = v1Bytes(good1)
	set1 := func(off int, v ...byte) []byte {
		b := append([]byte(nil), good1...)
		copy(b[off:], v)
		return reseal(b)
	}
	obj0v1 := objAt(manifestFixedV1, -1)[0]
	// Version 2 input: goldenManifestV2 (no operator state) in version 2 bytes.
	good2, err := goldenManifestV2().Encode()
	if err != nil {
		t.Fatal(err)
	}
	good2 = v2Bytes(good2)
	obj0v2 := objAt(manifestFixed, -1)[0]
	if m, err := DecodeManifest("v2", good2); err != nil || !reflect.DeepEqual(m, goldenManifestV2()) {
		t.Fatalf("the unedited version 2 input does not decode to goldenManifestV2: %+v, %v", m, err)
	}
	set2 := func(off int, v ...byte) []byte {
		b := append([]byte(nil), good2...)
		copy(b[off:], v)
		return b
	}
	if m, err := DecodeManifest("v1", good1); err != nil || !reflect.DeepEqual(m, goldenManifest()) {
		t.Fatalf("the unedited version 1 input does not decode to goldenManifest: %+v, %v", m, err)
	}
	for _, tc := range []struct {
		name  string
		b     []byte
		cause error // nil: ErrCorruption alone
		off   int64
	}{
		{"empty", nil, base.ErrTruncated, 0},
		{"7 bytes", good[:7], base.ErrTruncated, 0},
		{"bad magic", edit(set(0, 'X')), base.ErrBadMagic, 0},
		{"header only", good[:16], base.ErrTruncated, 0},
		{"version 0", edit(set(8, 0)), base.ErrFormatVersion, 8},
		{"version 6", edit(set(8, 6)), base.ErrFormatVersion, 8},
		{"version 0x0102", edit(set(8, 2, 1)), base.ErrFormatVersion, 8},
		// Version 3 bytes labelled version 1: lastSeq's low half is read as the registry length.
		{"version 3 payload as version 1", reseal(edit(set(8, 1))), nil, p + manifestFixedV1},
		// Version 3 bytes labelled version 2: the operator state length is read as the object
		// count, far more objects than the bytes left hold.
		{"version 3 payload as version 2", reseal(edit(set(8, 2))), base.ErrTruncated, int64(opAt)},
		// Version 2 bytes labelled version 3: the object count (6) is read as the operator
		// state length, and the count read after those 6 bytes is far more than the rest holds.
		{"version 2 payload as version 3", reseal(set2(8, 3)), base.ErrTruncated, int64(obj0v2 + 6)},
		{"operator state length huge", reseal(edit(set(opAt, 0xff, 0xff, 0xff, 0x7f))), nil, int64(opAt)},
		{"operator state runs past the payload", reseal(edit(set(opAt, 0xff, 0xff, 0, 0))), base.ErrTruncated, int64(opAt)},
		{"checksum type 2", edit(set(10, 2)), base.ErrChecksumType, 10},
		{"reserved byte", edit(set(11, 1)), nil, 11},
		{"cut short", good[:len(good)-1], base.ErrTruncated, 12},
		{"trailing byte", append(append([]byte(nil), good...), 0), nil, 12},
		{"payload length huge", edit(set(12, 0xff, 0xff, 0xff, 0xff)), nil, 12},
		{"flipped payload bit", edit(func(b []byte) []byte { b[p+3] ^= 1; return b }), base.ErrChecksum, int64(len(good) - 4)},
		{"flipped crc bit", edit(func(b []byte) []byte { b[len(b)-1] ^= 1; return b }), base.ErrChecksum, int64(len(good) - 4)},
		{"id 0", reseal(edit(set(p, 0, 0, 0, 0, 0, 0, 0, 0))), nil, p},
		{"max parallelism 0", reseal(edit(set(p+32, 0, 0, 0, 0))), nil, p + 32},
		{"key groups outside", reseal(edit(set(p+38, 200, 0))), nil, p + 36},
		{"payload cut in the fixed fields", reseal(append(append([]byte(nil), good[:p+20]...), 0, 0, 0, 0)), base.ErrTruncated, p + 16},
		{"payload cut in lastSeq", reseal(append(append([]byte(nil), good[:p+44]...), 0, 0, 0, 0)), base.ErrTruncated, p + 40},
		{"object count too large", reseal(edit(set(obj0-4, 0xff, 0xff, 0, 0))), base.ErrTruncated, int64(obj0 - 4)},
		{"unknown kind", reseal(edit(set(obj0, 9))), nil, int64(obj0)},
		{"timers kind in version 3", reseal(edit(func(b []byte) []byte { b[8] = 3; b[obj0] = byte(KindTimers); return b })), nil, int64(obj0)},
		{"timers of two key groups", reseal(edit(set(chlog, byte(KindTimers)))), nil, int64(chlog)},
		{"v2 flag bit 1", reseal(edit(set(obj0+1, 0x02))), nil, int64(obj0 + 1)},
		{"v2 flag bit 2", reseal(edit(set(obj0+1, 0x04))), nil, int64(obj0 + 1)},
		{"v2 flag bit 3 beside a level", reseal(edit(set(obj0+1, 0x68))), nil, int64(obj0 + 1)},
		{"v2 level on a changelog object", reseal(edit(set(chlog+1, 0x11))), nil, int64(chlog)},
		{"v2 level on an other object", reseal(edit(set(other+1, 0xf0))), nil, int64(other)},
		{"v1 flag bit 1", set1(obj0v1+1, 0x02), nil, int64(obj0v1 + 1)},
		{"v1 flag bit 3", set1(obj0v1+1, 0x08), nil, int64(obj0v1 + 1)},
		{"v1 flag bit 4 (a v2 level)", set1(obj0v1+1, 0x10), nil, int64(obj0v1 + 1)},
		{"v1 flag bit 7 (a v2 level)", set1(obj0v1+1, 0x80), nil, int64(obj0v1 + 1)},
		{"v1 level 15 beside packed", set1(obj0v1+1, 0xf1), nil, int64(obj0v1 + 1)},
		{"v1 payload cut in the fixed fields", reseal(append(append([]byte(nil), good1[:p+36]...), 0, 0, 0, 0)), base.ErrTruncated, p + 36},
		{"bad name", reseal(edit(set(obj0+4, '/'))), nil, int64(obj0)},
		{"name runs past the payload", reseal(edit(set(obj0+2, 0xff, 0xff))), base.ErrTruncated, int64(obj0)},
		{"bytes after the objects", reseal(append(append(append([]byte(nil), good[:len(good)-4]...), 1), 0, 0, 0, 0)), nil, int64(len(good) - 4)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := DecodeManifest("job/chk-00000000000000000042/MANIFEST", tc.b)
			var ce *base.CorruptionError
			if m != nil || !errors.As(err, &ce) || !errors.Is(err, base.ErrCorruption) {
				t.Fatalf("DecodeManifest = %v, %v; want a *base.CorruptionError", m, err)
			}
			if ce.File != "job/chk-00000000000000000042/MANIFEST" || ce.Offset != tc.off {
				t.Errorf("error %q: file %q offset %d, want offset %d", err, ce.File, ce.Offset, tc.off)
			}
			for _, cause := range []error{base.ErrTruncated, base.ErrBadMagic, base.ErrFormatVersion, base.ErrChecksumType, base.ErrChecksum} {
				if errors.Is(err, cause) != (cause == tc.cause) {
					t.Errorf("error %q: errors.Is(%v) = %v", err, cause, !(cause == tc.cause))
				}
			}
		})
	}
}

// TestCommitAndRead: Commit is create-if-absent (a second commit of an id, a zombie's, fails
// with ErrExists and changes nothing); ReadManifest returns what was committed, ErrNotFound for
// an id never committed, and corruption for a manifest stored under another id.
func TestCommitAndRead(t *testing.T) {
	ctx := context.Background()
	d, _ := newMemStorage(t)
	m := goldenManifest()
	if err := Commit(ctx, d, "job-a", m); err != nil {
		t.Fatal(err)
	}
	zombie := *m
	zombie.Epoch = 2
	if err := Commit(ctx, d, "job-a", &zombie); !errors.Is(err, ErrExists) {
		t.Fatalf("zombie commit: %v, want ErrExists", err)
	}
	got, err := ReadManifest(ctx, d, "job-a", 42)
	if err != nil || !reflect.DeepEqual(got, m) {
		t.Fatalf("ReadManifest = %+v, %v", got, err)
	}
	if _, err := ReadManifest(ctx, d, "job-a", 43); !errors.Is(err, ErrNotFound) {
		t.Fatalf("ReadManifest of a missing id: %v", err)
	}
	b, _ := m.Encode()
	d.Put(ctx, ManifestName("job-a", 44), b)
	if _, err := ReadManifest(ctx, d, "job-a", 44); !errors.Is(err, base.ErrCorruption) {
		t.Fatalf("ReadManifest of a manifest under another id: %v", err)
	}
	if err := Commit(ctx, d, "a/b", m); !errors.Is(err, ErrInvalidName) {
		t.Fatalf("Commit with owner a/b: %v", err)
	}
}

// FuzzManifestDecode: the decoder never panics; it either returns a manifest or a
// *base.CorruptionError. A manifest decoded from version 3 re-encodes to exactly the input; one
// decoded from version 2 or 1 re-encodes (as version 3) to bytes that decode to the same
// Manifest and that, less the operator state length (and lastSeq for version 1), are exactly
// the input (versions 1 and 2 are canonical too). Each input is
// also tried resealed (length and CRC recomputed), so that the fuzzer reaches the payload
// checks behind the checksum.
func FuzzManifestDecode(f *testing.F) {
	for _, name := range []string{"MANIFEST-v1", "MANIFEST-v2", "MANIFEST-v3", "MANIFEST-v4", "MANIFEST-v5"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, m := range []*Manifest{{ID: 1, MaxParallelism: 1}, goldenManifest(), goldenManifestV2(), goldenManifestV3(),
		goldenManifestV4(), {ID: 2, MaxParallelism: 2, OperatorState: []byte("op")}} {
		b, err := m.Encode()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		if slices.ContainsFunc(m.Objects, func(o Object) bool { return o.Kind == KindTimers }) {
			continue
		}
		f.Add(v3Bytes(b))
		if m.OperatorState != nil {
			continue
		}
		f.Add(v2Bytes(b))
		if m.LastSeq == 0 && !slices.ContainsFunc(m.Objects, func(o Object) bool { return o.Level != 0 }) {
			f.Add(v1Bytes(b))
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, in := range [][]byte{b, reseal(b)} {
			m, err := DecodeManifest("fuzz", in)
			if err != nil {
				var ce *base.CorruptionError
				if m != nil || !errors.As(err, &ce) || !errors.Is(err, base.ErrCorruption) {
					t.Fatalf("DecodeManifest: %v, %v: not a *base.CorruptionError", m, err)
				}
				continue
			}
			out, err := m.Encode()
			if err != nil {
				t.Fatalf("a decoded manifest does not encode: %v", err)
			}
			switch v := binary.LittleEndian.Uint16(in[8:]); v {
			case manifestVersion, manifestVersion5:
				if !bytes.Equal(out, in) {
					t.Fatalf("re-encoding differs:\n in %x\nout %x", in, out)
				}
			case manifestVersion1, manifestVersion2, manifestVersion3:
				again, err := DecodeManifest("fuzz", out)
				if err != nil || !reflect.DeepEqual(again, m) {
					t.Fatalf("version %d re-encoded as version 4 decodes to %+v, %v; want %+v", v, again, err, m)
				}
				old := v3Bytes(out)
				switch v {
				case manifestVersion2:
					old = v2Bytes(out)
				case manifestVersion1:
					old = v1Bytes(out)
				}
				if !bytes.Equal(old, in) {
					t.Fatalf("version %d re-encoding differs:\n in %x\nout %x", v, in, old)
				}
			default:
				t.Fatalf("decoded a manifest of format version %d", v)
			}
		}
	})
}
