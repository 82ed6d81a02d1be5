package changelog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"

	"github.com/strata-db/strata/internal/base"
)

var update = flag.Bool("update", false, "rewrite testdata/CHANGELOG-v1")

// kgKey returns a composite key of key group kg with suffix s.
func kgKey(kg uint16, s string) []byte { return append([]byte{byte(kg >> 8), byte(kg)}, s...) }

// TestRecordRoundTrip: every kind, with and without user keys and values, encodes and decodes
// to itself; the encoded length is recordLen's.
func TestRecordRoundTrip(t *testing.T) {
	big := bytes.Repeat([]byte("v"), 300) // two-byte varint
	tests := []struct {
		name string
		r    Record
	}{
		{"put", Record{Kind: 1, KeyGroup: 7, Seq: 1, Key: kgKey(7, "k"), Value: []byte("v")}},
		{"delete", Record{Kind: 2, KeyGroup: 0, Seq: 2, Key: kgKey(0, "k")}},
		{"list-append", Record{Kind: 3, KeyGroup: 300, Seq: 3, Key: kgKey(300, "list"), Value: big}},
		{"list-replace", Record{Kind: 4, KeyGroup: 32767, Seq: 1 << 40, Key: kgKey(32767, "l"), Value: []byte("x")}},
		{"list-delete", Record{Kind: 5, KeyGroup: 1, Seq: 5, Key: kgKey(1, "")}},
		{"map-put", Record{Kind: 6, KeyGroup: 2, Seq: 6, Key: kgKey(2, "m"), UserKey: []byte("uk"), Value: []byte("v")}},
		{"map-remove", Record{Kind: 7, KeyGroup: 2, Seq: 7, Key: kgKey(2, "m"), UserKey: big}},
		{"map-clear", Record{Kind: 8, KeyGroup: 65535, Seq: ^uint64(0), Key: kgKey(65535, "m")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.r
			b := appendRecord(nil, r.Kind, r.KeyGroup, r.Seq, r.Key, r.UserKey, r.Value)
			if len(b) != recordLen(r.Key, r.UserKey, r.Value) {
				t.Fatalf("encoded %d bytes, recordLen %d", len(b), recordLen(r.Key, r.UserKey, r.Value))
			}
			var got Record
			n, err := decodeRecord("x", 0, b, &got)
			if err != nil || n != len(b) {
				t.Fatalf("decode: %d, %v", n, err)
			}
			if got.Kind != r.Kind || got.KeyGroup != r.KeyGroup || got.Seq != r.Seq || !bytes.Equal(got.Key, r.Key) ||
				!bytes.Equal(got.UserKey, r.UserKey) || !bytes.Equal(got.Value, r.Value) {
				t.Fatalf("decoded %+v, want %+v", got, r)
			}
			for cut := range len(b) {
				if _, err := decodeRecord("x", 0, b[:cut], &got); !errors.Is(err, base.ErrTruncated) {
					t.Fatalf("cut at %d: %v, want ErrTruncated", cut, err)
				}
			}
		})
	}
}

// TestRecordRules: a record with a bad kind or a key group that is not its key's is damage.
func TestRecordRules(t *testing.T) {
	for _, tt := range []struct {
		name string
		b    []byte
	}{
		{"kind 0", appendRecord(nil, 0, 1, 1, kgKey(1, "k"), nil, nil)},
		{"kind 9", appendRecord(nil, 9, 1, 1, kgKey(1, "k"), nil, nil)},
		{"wrong key group (FLINK-26063)", appendRecord(nil, 1, 2, 1, kgKey(1, "k"), nil, nil)},
		{"short key", appendRecord(nil, 1, 0, 1, []byte{0}, nil, nil)},
	} {
		var r Record
		_, err := decodeRecord("obj", 40, tt.b, &r)
		var ce *base.CorruptionError
		if !errors.As(err, &ce) || ce.File != "obj" || ce.Offset != 40 {
			t.Errorf("%s: %v, want a CorruptionError at obj:40", tt.name, err)
		}
	}
}

// goldenObject is a fixed object of three segments (what Persist writes for three Stores).
func goldenObject() []byte {
	type rec struct {
		kind    uint8
		kg      uint16
		seq     uint64
		k, u, v string
	}
	stores := []struct {
		id   string
		recs []rec
	}{
		{"job-a", []rec{{1, 0, 1, "k1", "", "v1"}, {6, 3, 2, "m", "uk", "mv"}, {8, 3, 3, "m", "", ""}}},
		{"job-b", []rec{{3, 64, 10, "l", "", "e1"}, {4, 65, 11, "l", "", "e2"}, {5, 127, 12, "l", "", ""}}},
		{"job-c", []rec{{2, 200, 100, "gone", "", ""}, {7, 255, 101, "m", "x", ""}}},
	}
	obj := appendHeader(nil)
	var infos []SegmentInfo
	for _, s := range stores {
		off := len(obj)
		obj = binary.LittleEndian.AppendUint32(obj, uint32(len(s.recs)))
		lo, hi := s.recs[0].kg, s.recs[0].kg
		for _, r := range s.recs {
			obj = appendRecord(obj, r.kind, r.kg, r.seq, kgKey(r.kg, r.k), []byte(r.u), []byte(r.v))
			lo, hi = min(lo, r.kg), max(hi, r.kg)
		}
		infos = append(infos, SegmentInfo{Store: s.id, KeyGroups: KeyGroupRange{Start: lo, End: hi},
			MinSeq: s.recs[0].seq, MaxSeq: s.recs[len(s.recs)-1].seq, Offset: int64(off), Length: int64(len(obj) - off),
			Records: uint32(len(s.recs)), CRC: crc32.Checksum(obj[off:], base.CRC32C)})
	}
	return appendFooter(obj, infos)
}

// TestGolden pins format version 1: the encoder writes testdata/CHANGELOG-v1 byte for byte
// and the decoder reads it. A change to the format needs a new version and a new golden file
// (go test -run TestGolden -update writes it).
func TestGolden(t *testing.T) {
	path := filepath.Join("testdata", "CHANGELOG-v1")
	got := goldenObject()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the encoder no longer writes %s (format version 1 changed?)", path)
	}
	segs, err := DecodeObject(path, want)
	if err != nil {
		t.Fatal(err)
	}
	if len(segs) != 3 || segs[1].Store != "job-b" || segs[1].KeyGroups != (KeyGroupRange{Start: 64, End: 127}) ||
		segs[2].MinSeq != 100 || segs[2].MaxSeq != 101 || segs[0].Offset != headerLen || segs[0].Records != 3 {
		t.Fatalf("footer %+v", segs)
	}
}

// TestDecodeChecksInOrder: each damage has its own cause, found in the order magic, version,
// checksum type, CRC, bounds; every truncation and every bit flip is an error, never a panic.
func TestDecodeChecksInOrder(t *testing.T) {
	good := goldenObject()
	n := len(good)
	mut := func(f func(b []byte)) []byte { b := bytes.Clone(good); f(b); return b }
	tests := []struct {
		name string
		b    []byte
		want error
		off  int64
	}{
		{"header magic", mut(func(b []byte) { b[0] = 'X' }), base.ErrBadMagic, 0},
		{"header version", mut(func(b []byte) { b[8] = 2 }), base.ErrFormatVersion, 8},
		{"header checksum type", mut(func(b []byte) { b[10] = 2 }), base.ErrChecksumType, 10},
		{"trailer magic", mut(func(b []byte) { b[n-1] = 'X' }), base.ErrBadMagic, int64(n - 8)},
		{"trailer version (and magic intact)", mut(func(b []byte) { b[n-16] = 9; b[n-6] ^= 0 }), base.ErrFormatVersion, int64(n - 16)},
		{"trailer checksum type", mut(func(b []byte) { b[n-14] = 3 }), base.ErrChecksumType, int64(n - 14)},
		{"footer crc", mut(func(b []byte) { b[n-trailerLen-1] ^= 1 }), base.ErrChecksum, -2},
		{"footer length", mut(func(b []byte) { binary.LittleEndian.PutUint32(b[n-trailerLen:], uint32(n)) }), base.ErrTruncated, int64(n - trailerLen)},
		{"segment crc", mut(func(b []byte) { b[headerLen+5] ^= 1 }), base.ErrChecksum, headerLen},
	}
	for _, tt := range tests {
		_, err := DecodeObject("o", tt.b)
		var ce *base.CorruptionError
		if !errors.Is(err, tt.want) || !errors.As(err, &ce) || ce.File != "o" || (tt.off != -2 && ce.Offset != tt.off) {
			t.Errorf("%s: %v, want %v at offset %d", tt.name, err, tt.want, tt.off)
		}
	}
	for cut := range n {
		if _, err := DecodeObject("o", good[:cut]); !errors.Is(err, base.ErrCorruption) {
			t.Fatalf("cut at %d: %v", cut, err)
		}
	}
	for i := range n * 8 {
		b := bytes.Clone(good)
		b[i/8] ^= 1 << (i % 8)
		if _, err := DecodeObject("o", b); !errors.Is(err, base.ErrCorruption) {
			t.Fatalf("bit %d flipped: %v", i, err)
		}
	}
}

// FuzzDecodeRecord: decodeRecord never panics, never reads past its input, and what it
// accepts re-encodes to the same bytes.
func FuzzDecodeRecord(f *testing.F) {
	f.Add(appendRecord(nil, 6, 2, 9, kgKey(2, "m"), []byte("u"), []byte("v")))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		var r Record
		n, err := decodeRecord("f", 0, b, &r)
		if err != nil {
			if !errors.Is(err, base.ErrCorruption) {
				t.Fatalf("error not a corruption: %v", err)
			}
			return
		}
		if re := appendRecord(nil, r.Kind, r.KeyGroup, r.Seq, r.Key, r.UserKey, r.Value); !bytes.Equal(re, b[:n]) && len(re) == n {
			t.Fatalf("re-encoded %x, decoded from %x", re, b[:n])
		}
	})
}

// FuzzDecodeSegment: a segment decodes or reports corruption; never a panic.
func FuzzDecodeSegment(f *testing.F) {
	g := goldenObject()
	segs, _ := DecodeObject("g", g)
	f.Add(g[segs[0].Offset:segs[0].Offset+segs[0].Length], uint16(0), uint16(3), uint64(1), uint64(3))
	f.Fuzz(func(t *testing.T, seg []byte, lo, hi uint16, minSeq, maxSeq uint64) {
		if len(seg) < 4 {
			return
		}
		si := SegmentInfo{KeyGroups: KeyGroupRange{Start: lo, End: hi}, MinSeq: minSeq, MaxSeq: maxSeq,
			Offset: headerLen, Length: int64(len(seg)), Records: binary.LittleEndian.Uint32(seg), CRC: crc32.Checksum(seg, base.CRC32C)}
		err := checkSegment("f", &si, seg, func(off int, r *Record) error {
			if !contains(si.KeyGroups, r.KeyGroup) || r.Seq < minSeq || r.Seq > maxSeq {
				t.Fatalf("accepted a record outside the segment's ranges: %+v", r)
			}
			return nil
		})
		if err != nil && !errors.Is(err, base.ErrCorruption) {
			t.Fatalf("error not a corruption: %v", err)
		}
	})
}

// FuzzDecodeObject: the header, footer and segments decode or report corruption; never a
// panic; allocation is bounded by the input (the footer's count is checked against its bytes).
func FuzzDecodeObject(f *testing.F) {
	f.Add(goldenObject())
	f.Add(appendFooter(appendHeader(nil), nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		segs, err := DecodeObject("f", b)
		if err != nil {
			if !errors.Is(err, base.ErrCorruption) {
				t.Fatalf("error not a corruption: %v", err)
			}
			return
		}
		for _, s := range segs {
			if s.Offset < headerLen || s.Offset+s.Length > int64(len(b)) {
				t.Fatalf("accepted segment outside the object: %+v", s)
			}
		}
	})
}
