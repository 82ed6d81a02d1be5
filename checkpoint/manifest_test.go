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
	"strings"
	"testing"

	"github.com/strata-db/strata/internal/base"
)

var updateGolden = flag.Bool("update", false, "TestGoldenManifestV1: rewrite testdata/MANIFEST-v1")

// goldenManifest is the fixed content of testdata/MANIFEST-v1: every field set, each kind of
// object, a packed changelog range, an object of another owner (NO_CLAIM), extreme values.
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

// TestGoldenManifestV1: format version 1 encodes goldenManifest to exactly testdata/MANIFEST-v1,
// and the file decodes back to it. If the encoding check fails, the format changed: bump the
// version and add a new golden file rather than regenerating this one. -update (re)creates it.
func TestGoldenManifestV1(t *testing.T) {
	want := goldenManifest()
	fresh, err := want.Encode()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "MANIFEST-v1")
	if *updateGolden {
		if err := os.WriteFile(path, fresh, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, fresh) {
		t.Errorf("the encoder no longer produces %s byte for byte: the format changed\n got %x\nwant %x", path, fresh, b)
	}
	got, err := DecodeManifest("MANIFEST-v1", b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("decoded golden manifest:\n got %+v\nwant %+v", got, want)
	}
}

// TestManifestRoundTrip: manifests at the edges of every field encode and decode to themselves,
// and re-encode to the same bytes.
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
		{"kind 4", func(m *Manifest) { m.Objects[0].Kind = 4 }},
		{"negative size", func(m *Manifest) { m.Objects[0].Size = -1 }},
		{"object key groups outside", func(m *Manifest) { m.Objects[0].KeyGroups.End = 8 }},
		{"order inverted", func(m *Manifest) { m.Objects[0].MinOrder = 2; m.Objects[0].MaxOrder = 1 }},
		{"offset without packed", func(m *Manifest) { m.Objects[0].Offset = 1 }},
		{"packed range past the end", func(m *Manifest) { m.Objects[0].Packed = true; m.Objects[0].Offset = 5; m.Objects[0].Length = 6 }},
		{"packed negative", func(m *Manifest) { m.Objects[0].Packed = true; m.Objects[0].Length = -1 }},
		{"blob too large", func(m *Manifest) { m.Registry = make([]byte, MaxBlob+1) }},
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
	good, err := goldenManifest().Encode()
	if err != nil {
		t.Fatal(err)
	}
	edit := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	set := func(off int, v ...byte) func(b []byte) []byte {
		return func(b []byte) []byte { copy(b[off:], v); return b }
	}
	const p = manifestHeader // payload start
	obj0 := p + manifestFixed + 4 + len(goldenManifest().Registry) + 4 + len(goldenManifest().InputPosition) + 4
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
		{"version 2", edit(set(8, 2)), base.ErrFormatVersion, 8},
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
		{"object count too large", reseal(edit(set(obj0-4, 0xff, 0xff, 0, 0))), base.ErrTruncated, int64(obj0 - 4)},
		{"unknown kind", reseal(edit(set(obj0, 9))), nil, int64(obj0)},
		{"unknown flag", reseal(edit(set(obj0+1, 2))), nil, int64(obj0 + 1)},
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

// FuzzManifestDecode: the decoder never panics; it either returns a manifest that re-encodes to
// exactly the input or a *base.CorruptionError. Each input is also tried resealed (length and
// CRC recomputed), so that the fuzzer reaches the payload checks behind the checksum.
func FuzzManifestDecode(f *testing.F) {
	if b, err := os.ReadFile(filepath.Join("testdata", "MANIFEST-v1")); err == nil {
		f.Add(b)
	}
	for _, m := range []*Manifest{{ID: 1, MaxParallelism: 1}, goldenManifest()} {
		b, _ := m.Encode()
		f.Add(b)
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
			if !bytes.Equal(out, in) {
				t.Fatalf("re-encoding differs:\n in %x\nout %x", in, out)
			}
		}
	})
}
