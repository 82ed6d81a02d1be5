package engine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"hash/crc32"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/strata-db/strata/internal/base"

	goldenfile "github.com/strata-db/strata/internal/golden"
)

var updateGolden = flag.Bool("update", false, "TestGoldenOperatorStateV2, TestGoldenWriterFileV1: rewrite the root's testdata/opstate-v2.bin, testdata/writer-v1.bin")

// TestSplitSharesFlink: splitShares is Flink's split: sizes, contiguity, and the rotation of
// the longer parts over successive states.
func TestSplitSharesFlink(t *testing.T) {
	for _, tc := range []struct {
		total, n, start int
		want            [][2]int
		next            int
	}{
		{5, 3, 0, [][2]int{{0, 2}, {2, 4}, {4, 5}}, 2},
		{6, 3, 0, [][2]int{{0, 2}, {2, 4}, {4, 6}}, 0},
		{5, 3, 2, [][2]int{{2, 4}, {4, 5}, {0, 2}}, 1}, // the round starts at subtask 2, the next at 1
		{1, 4, 3, [][2]int{{1, 1}, {1, 1}, {1, 1}, {0, 1}}, 0},
		{0, 2, 1, [][2]int{{0, 0}, {0, 0}}, 1},
	} {
		got, next := splitShares(tc.total, tc.n, tc.start)
		if !slices.Equal(got, tc.want) || next != tc.next {
			t.Errorf("splitShares(%d, %d, %d) = %v, %d; want %v, %d", tc.total, tc.n, tc.start, got, next, tc.want, tc.next)
		}
	}
}

// int64Elem is the root's Int64 codec's encoding of v (big endian, sign bit flipped).
func int64Elem(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)^1<<63) }

// goldenOpSnapshot is the fixed content of testdata/opstate-v2.bin: subtask 2 of 5, an
// even-split list (an empty element among them), a union list with its element ids, an empty
// list, and a broadcast map with an empty value.
func goldenOpSnapshot() *OpSnapshot {
	const pkg = "github.com/strata-db/strata."
	return &OpSnapshot{Subtask: 2, Parallelism: 5, States: []*OpState{
		{Name: "empty", Kind: OpStateList, Codecs: [2]string{pkg + "int64Codec", ""}},
		{Name: "offsets", Kind: OpStateList, Codecs: [2]string{pkg + "int64Codec", ""},
			Elems: [][]byte{int64Elem(42), {}, int64Elem(-1)}},
		{Name: "pending", Kind: OpStateUnion, Codecs: [2]string{pkg + "stringCodec", ""},
			Elems: [][]byte{[]byte("received-0"), []byte("own"), []byte("received-1")}, IDs: []uint64{1, 0xfedcba9876543210, 1<<64 - 1}},
		{Name: "rules", Kind: OpStateBroadcast, Codecs: [2]string{pkg + "stringCodec", pkg + "bytesCodec"},
			Map: map[string][]byte{"a": []byte("alpha"), "b": {}, "zz": {0, 0xff}}},
	}}
}

// goldenOpSnapshotV1 is what testdata/opstate-v1.bin (and the operator state of
// registry-v2.bin, registry-v3-ops.bin and registry-v4.bin) decodes to: goldenOpSnapshot
// with the union's ids derived from its index (the root's opstate.go, "Union state", invariant 4). The
// file held the union in its version 1 directory form, received-0 and received-1 flagged
// received.
func goldenOpSnapshotV1() *OpSnapshot {
	o := goldenOpSnapshot()
	u := o.States[2]
	for i := range u.IDs {
		u.IDs[i] = V1UnionID(2, 5, u.Name, i)
	}
	return o
}

// opEqual compares two snapshots (costs recomputed, views ignored).
func opEqual(a, b *OpSnapshot) bool {
	if a.Subtask != b.Subtask || a.Parallelism != b.Parallelism || len(a.States) != len(b.States) {
		return false
	}
	for i, x := range a.States {
		y := b.States[i]
		if x.Name != y.Name || x.Kind != y.Kind || x.Codecs != y.Codecs || len(x.Elems) != len(y.Elems) ||
			!maps.EqualFunc(x.Map, y.Map, bytes.Equal) || len(x.Map) != len(y.Map) || !slices.Equal(x.IDs, y.IDs) {
			return false
		}
		for j := range x.Elems {
			if !bytes.Equal(x.Elems[j], y.Elems[j]) {
				return false
			}
		}
	}
	return true
}

// setUnionFlag returns a copy of the version 2 blob of goldenOpSnapshot with the flags of its
// union's first element set to 1 (received: version 1 only).
func setUnionFlag(good []byte) []byte {
	b := bytes.Clone(good)
	i := bytes.Index(b, []byte("received-0"))
	b[i-4-8-1] = 1 // flags, id, len, element
	return b
}

// TestGoldenOperatorStateV1: testdata/opstate-v1.bin (opstate.go, version 1, no longer
// written: a union list with received elements) still decodes, its union elements under the
// ids derived from their indices; the received flags are refused in the checkpoint form.
func TestGoldenOperatorStateV1(t *testing.T) {
	path := filepath.Join("..", "..", "testdata", "opstate-v1.bin")
	golden := goldenfile.Read(t, path)
	got, err := DecodeOps(path, golden, false)
	if err != nil {
		t.Fatal(err)
	}
	if want := goldenOpSnapshotV1(); !opEqual(got, want) {
		t.Fatalf("%s decodes to %+v", path, got)
	}
	if _, err := DecodeOps(path, golden, true); !errors.Is(err, base.ErrCorruption) {
		t.Fatalf("received elements in the checkpoint form: %v, want base.ErrCorruption", err)
	}
	// A blob without union lists is still written in version 1.
	o := goldenOpSnapshot()
	o.States = slices.Delete(o.States, 2, 3)
	if b := o.Encode(); binary.LittleEndian.Uint16(b[8:]) != 1 {
		t.Fatalf("a blob without union lists is version %d", binary.LittleEndian.Uint16(b[8:]))
	}
}

// TestGoldenOperatorStateV2: the operator state blob (opstate.go, version 2: union elements
// with ids) encodes goldenOpSnapshot to exactly testdata/opstate-v2.bin, in both forms, and
// the file decodes back to it in both. If the encoding check fails, the format changed: bump
// opVersion and add a golden file rather than regenerating this one (-update).
func TestGoldenOperatorStateV2(t *testing.T) {
	want := goldenOpSnapshot()
	path := filepath.Join("..", "..", "testdata", "opstate-v2.bin")
	golden := goldenfile.Check(t, path, want.Encode(), *updateGolden)
	if !bytes.Equal(want.Encode(), golden) {
		t.Fatal("the checkpoint form differs from the directory form")
	}
	for _, ck := range []bool{false, true} {
		got, err := DecodeOps(path, golden, ck)
		if err != nil {
			t.Fatal(err)
		}
		if !opEqual(got, want) {
			t.Fatalf("%s decodes to %+v", path, got)
		}
	}
	if v := binary.LittleEndian.Uint16(golden[8:]); v != 2 {
		t.Fatalf("version %d", v)
	}
}

// resealOps recomputes the payload length and CRC of an operator state blob a test edited.
func resealOps(b []byte) []byte {
	b = bytes.Clone(b)
	if len(b) < opHeader+4 {
		return b
	}
	end := len(b) - 4
	binary.LittleEndian.PutUint32(b[12:], uint32(end-opHeader))
	binary.LittleEndian.PutUint32(b[end:], crc32.Checksum(b[:end], base.CRC32C))
	return b
}

// TestOperatorStateCorruption: every damage of an operator state blob is a typed error, never
// a panic — each truncation, each flipped bit, another version, magic or checksum type, and
// payloads breaking each rule — and a checkpoint whose operator state is damaged or of
// another version fails Restore with base.ErrCorruption (base.ErrFormatVersion), naming the manifest.
func TestOperatorStateCorruption(t *testing.T) {
	good := goldenOpSnapshot().Encode()
	for n := range len(good) {
		if _, err := DecodeOps("x", good[:n], false); !errors.Is(err, base.ErrCorruption) {
			t.Fatalf("truncated to %d: %v", n, err)
		}
	}
	for i := range len(good) * 8 {
		b := bytes.Clone(good)
		b[i/8] ^= 1 << (i % 8)
		if _, err := DecodeOps("x", b, false); !errors.Is(err, base.ErrCorruption) {
			t.Fatalf("bit %d flipped: %v", i, err)
		}
	}
	set := func(off int, v ...byte) []byte {
		b := bytes.Clone(good)
		copy(b[off:], v)
		return b
	}
	p := opHeader
	first := p + 12                                                                                 // the first state ("empty")
	st2 := first + 2 + 2 + len("empty") + 2 + len("github.com/strata-db/strata.int64Codec") + 2 + 4 // "offsets"
	for _, tc := range []struct {
		name  string
		b     []byte
		cause error
	}{
		{"magic", set(0, 'X'), base.ErrBadMagic},
		{"version 3", set(8, 3), base.ErrFormatVersion},
		{"received flag in a version 2 union list", resealOps(setUnionFlag(good)), nil},
		{"checksum type", set(10, 2), base.ErrChecksumType},
		{"reserved", set(11, 1), nil},
		{"trailing byte", append(bytes.Clone(good), 0), nil},
		{"crc", set(len(good)-1, good[len(good)-1]^1), base.ErrChecksum},
		{"subtask beyond parallelism", resealOps(set(p, 5)), nil},
		{"parallelism 0", resealOps(set(p+4, 0, 0, 0, 0)), nil},
		{"state count too large", resealOps(set(p+8, 0xff, 0xff)), base.ErrTruncated},
		{"unknown kind", resealOps(set(first, 4)), nil},
		{"kind 0", resealOps(set(first, 0)), nil},
		{"state reserved byte", resealOps(set(first+1, 1)), nil},
		{"names out of order", resealOps(set(first+4, 'z')), nil},
		{"a list with a value codec", resealOps(set(st2, byte(OpStateBroadcast))), nil},
		{"item count too large", resealOps(set(st2-4, 0xff, 0xff, 0xff)), base.ErrTruncated},
		{"received flag in an even-split list", resealOps(set(st2+4+len("offsets")+2+len("github.com/strata-db/strata.int64Codec")+2+4, 1)), nil},
		{"bytes after the last state", resealOps(append(good[:len(good)-4:len(good)-4], 0, 0, 0, 0, 0)), nil},
	} {
		_, err := DecodeOps("x", tc.b, false)
		var ce *base.CorruptionError
		if !errors.As(err, &ce) || ce.File != "x" {
			t.Errorf("%s: %v, want a *base.CorruptionError", tc.name, err)
			continue
		}
		for _, cause := range []error{base.ErrTruncated, base.ErrBadMagic, base.ErrFormatVersion, base.ErrChecksumType, base.ErrChecksum} {
			if errors.Is(err, cause) != (cause == tc.cause) {
				t.Errorf("%s: %v: errors.Is(%v) = %v", tc.name, err, cause, !(cause == tc.cause))
			}
		}
	}
}

// FuzzDecodeOps: the decoder never panics; it returns a snapshot or a
// *base.CorruptionError; a blob that decodes (in either form) re-encodes to exactly the input.
// Each input is also tried resealed, to reach the payload checks.
func FuzzDecodeOps(f *testing.F) {
	g := goldenOpSnapshot()
	f.Add(g.Encode())
	if b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "opstate-v1.bin")); err == nil {
		f.Add(b)
	}
	f.Add((&OpSnapshot{Subtask: 0, Parallelism: 1}).Encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, in := range [][]byte{b, resealOps(b)} {
			for _, ck := range []bool{false, true} {
				o, err := DecodeOps("fuzz", in, ck)
				if err != nil {
					var ce *base.CorruptionError
					if o != nil || !errors.As(err, &ce) || !errors.Is(err, base.ErrCorruption) {
						t.Fatalf("DecodeOps: %v, %v: not a *base.CorruptionError", o, err)
					}
					continue
				}
				v1Union := binary.LittleEndian.Uint16(in[8:]) == opVersion1 && slices.ContainsFunc(o.States, func(st *OpState) bool { return st.Kind == OpStateUnion })
				if out := o.Encode(); !bytes.Equal(out, in) && !v1Union { // version 1 union lists are written as version 2
					t.Fatalf("re-encoding differs:\n in %x\nout %x", in, out)
				}
			}
		}
	})
}
