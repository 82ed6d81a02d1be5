package changelog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"unsafe"

	"github.com/strata-db/strata/internal/base"
)

var update = flag.Bool("update", false, "rewrite testdata/CHANGELOG-v2 (CHANGELOG-v1 is frozen)")

// kgKey returns a composite key of key group kg with suffix s.
func kgKey(kg uint16, s string) []byte { return append([]byte{byte(kg >> 8), byte(kg)}, s...) }

// appendRecordV1 appends the format version 1 encoding of a record (doc.go, "Record,
// version 1"): what writers wrote before version 2, kept to build the objects that pin the
// version 1 decoder.
func appendRecordV1(dst []byte, kind uint8, kg uint16, seq uint64, key, userKey, value []byte) []byte {
	dst = append(dst, kind)
	dst = binary.LittleEndian.AppendUint16(dst, kg)
	dst = binary.LittleEndian.AppendUint64(dst, seq)
	dst = binary.AppendUvarint(dst, uint64(len(key)))
	dst = append(dst, key...)
	dst = binary.AppendUvarint(dst, uint64(len(userKey)))
	dst = append(dst, userKey...)
	dst = binary.AppendUvarint(dst, uint64(len(value)))
	return append(dst, value...)
}

// encodeRecord encodes r in format version v, a version 2 record as the one after seq prev.
func encodeRecord(v uint16, prev uint64, r *Record) []byte {
	if v == formatV1 {
		return appendRecordV1(nil, r.Kind, r.KeyGroup, r.Seq, r.Key, r.UserKey, r.Value)
	}
	return appendRecord(nil, r.Kind, r.Seq-prev, r.Key, r.UserKey, r.Value)
}

var versions = []uint16{formatV1, formatVersion}

// TestRecordRoundTrip: every kind, with and without user keys and values, encodes and decodes
// to itself in both format versions; a version 2 record's length is recordLen's.
func TestRecordRoundTrip(t *testing.T) {
	big := bytes.Repeat([]byte("v"), 300) // two-byte varint
	tests := []struct {
		name string
		prev uint64 // the previous record's seq (version 2)
		r    Record
	}{
		{"put", 1, Record{Kind: 1, KeyGroup: 7, Seq: 1, Key: kgKey(7, "k"), Value: []byte("v")}},
		{"delete", 1, Record{Kind: 2, KeyGroup: 0, Seq: 2, Key: kgKey(0, "k")}},
		{"list-append", 0, Record{Kind: 3, KeyGroup: 300, Seq: 3, Key: kgKey(300, "list"), Value: big}},
		{"list-replace", 5, Record{Kind: 4, KeyGroup: 32767, Seq: 1 << 40, Key: kgKey(32767, "l"), Value: []byte("x")}},
		{"list-delete", 4, Record{Kind: 5, KeyGroup: 1, Seq: 5, Key: kgKey(1, "")}},
		{"map-put", 5, Record{Kind: 6, KeyGroup: 2, Seq: 6, Key: kgKey(2, "m"), UserKey: []byte("uk"), Value: []byte("v")}},
		{"map-remove", 6, Record{Kind: 7, KeyGroup: 2, Seq: 7, Key: kgKey(2, "m"), UserKey: big}},
		{"map-clear", 0, Record{Kind: 8, KeyGroup: 65535, Seq: ^uint64(0), Key: kgKey(65535, "m")}},
	}
	for _, v := range versions {
		for _, tt := range tests {
			t.Run(fmt.Sprintf("v%d/%s", v, tt.name), func(t *testing.T) {
				r := tt.r
				b := encodeRecord(v, tt.prev, &r)
				if v == formatVersion && len(b) != recordLen(r.Kind, r.Seq-tt.prev, r.Key, r.UserKey, r.Value) {
					t.Fatalf("encoded %d bytes, recordLen %d", len(b), recordLen(r.Kind, r.Seq-tt.prev, r.Key, r.UserKey, r.Value))
				}
				if len(b) > maxRecordLen(r.Key, r.UserKey, r.Value) {
					t.Fatalf("encoded %d bytes, maxRecordLen %d", len(b), maxRecordLen(r.Key, r.UserKey, r.Value))
				}
				var got Record
				n, err := decodeRecord("x", 0, b, v, tt.prev, &got)
				if err != nil || n != len(b) {
					t.Fatalf("decode: %d, %v", n, err)
				}
				if got.Kind != r.Kind || got.KeyGroup != r.KeyGroup || got.Seq != r.Seq || !bytes.Equal(got.Key, r.Key) ||
					!bytes.Equal(got.UserKey, r.UserKey) || !bytes.Equal(got.Value, r.Value) {
					t.Fatalf("decoded %+v, want %+v", got, r)
				}
				for cut := range len(b) {
					if _, err := decodeRecord("x", 0, b[:cut], v, tt.prev, &got); !errors.Is(err, base.ErrTruncated) {
						t.Fatalf("cut at %d: %v, want ErrTruncated", cut, err)
					}
				}
			})
		}
	}
}

// TestRecordV2Sizes: a version 2 record stores only its kind's fields and its seq as a delta,
// so the flight demo's small records shrink by about 10 of version 1's 14 bytes of framing.
func TestRecordV2Sizes(t *testing.T) {
	key := kgKey(3, "0123456789abcdefghij") // 22 bytes
	for _, tt := range []struct {
		kind   uint8
		uk, v  []byte
		v1, v2 int // framing bytes besides key, user key and value
	}{
		{1, nil, []byte("value"), 14, 4},      // put: kind, delta, keyLen, valLen
		{2, nil, nil, 14, 3},                  // delete: kind, delta, keyLen
		{6, []byte("uk"), []byte("v"), 14, 5}, // map-put: all three lengths
		{7, []byte("uk"), nil, 14, 4},         // map-remove: no value length
		{8, nil, nil, 14, 3},                  // map-clear
	} {
		logical := len(key) + len(tt.uk) + len(tt.v)
		b1 := appendRecordV1(nil, tt.kind, 3, 1000, key, tt.uk, tt.v)
		b2 := appendRecord(nil, tt.kind, 1, key, tt.uk, tt.v)
		if len(b1)-logical != tt.v1 || len(b2)-logical != tt.v2 {
			t.Errorf("kind %d: framing v1 %d B, v2 %d B; want %d, %d", tt.kind, len(b1)-logical, len(b2)-logical, tt.v1, tt.v2)
		}
	}
}

// TestRecordRules: a record with a bad kind, a key without a key group, a key group that is
// not its key's (version 1) or a seq past 2^64-1 (version 2) is damage.
func TestRecordRules(t *testing.T) {
	for _, tt := range []struct {
		name string
		v    uint16
		prev uint64
		b    []byte
	}{
		{"v1 kind 0", formatV1, 0, appendRecordV1(nil, 0, 1, 1, kgKey(1, "k"), nil, nil)},
		{"v1 kind 9", formatV1, 0, appendRecordV1(nil, 9, 1, 1, kgKey(1, "k"), nil, nil)},
		{"v1 wrong key group (FLINK-26063)", formatV1, 0, appendRecordV1(nil, 1, 2, 1, kgKey(1, "k"), nil, nil)},
		{"v1 short key", formatV1, 0, appendRecordV1(nil, 1, 0, 1, []byte{0}, nil, nil)},
		{"v2 kind 0", formatVersion, 0, appendRecord(nil, 0, 1, kgKey(1, "k"), nil, nil)},
		{"v2 kind 9", formatVersion, 0, appendRecord(nil, 9, 1, kgKey(1, "k"), nil, nil)},
		{"v2 short key", formatVersion, 0, appendRecord(nil, 1, 0, []byte{0}, nil, nil)},
		{"v2 seq past 2^64-1", formatVersion, ^uint64(0) - 1, appendRecord(nil, 1, 2, kgKey(1, "k"), nil, nil)},
	} {
		var r Record
		_, err := decodeRecord("obj", 40, tt.b, tt.v, tt.prev, &r)
		var ce *base.CorruptionError
		if !errors.As(err, &ce) || ce.File != "obj" || ce.Offset < 40 || ce.Offset > 41 {
			t.Errorf("%s: %v, want a CorruptionError at obj:40", tt.name, err)
		}
	}
}

// goldenRec is a record of the golden objects.
type goldenRec struct {
	kind    uint8
	kg      uint16
	seq     uint64
	k, u, v string
}

type goldenStore struct {
	id   string
	recs []goldenRec
}

// goldenStores is the content of the golden object of version v: three segments (what Persist
// writes for three Stores), every kind; version 2's has one more record, after a gap in seq
// (a two-byte delta). Version 1's is frozen with CHANGELOG-v1.
func goldenStores(v uint16) []goldenStore {
	s := []goldenStore{
		{"job-a", []goldenRec{{1, 0, 1, "k1", "", "v1"}, {6, 3, 2, "m", "uk", "mv"}, {8, 3, 3, "m", "", ""}}},
		{"job-b", []goldenRec{{3, 64, 10, "l", "", "e1"}, {4, 65, 11, "l", "", "e2"}, {5, 127, 12, "l", "", ""}}},
		{"job-c", []goldenRec{{2, 200, 100, "gone", "", ""}, {7, 255, 101, "m", "x", ""}}},
	}
	if v != formatV1 {
		s[2].recs = append(s[2].recs, goldenRec{1, 255, 300, "after-a-gap", "", "v"})
	}
	return s
}

// goldenObject is a fixed object of format version v holding goldenStores(v).
func goldenObject(v uint16) []byte {
	obj := appendHeader(nil, v)
	var infos []SegmentInfo
	for _, s := range goldenStores(v) {
		off := len(obj)
		obj = binary.LittleEndian.AppendUint32(obj, uint32(len(s.recs)))
		lo, hi := s.recs[0].kg, s.recs[0].kg
		prev := s.recs[0].seq
		for _, r := range s.recs {
			rec := Record{Kind: r.kind, KeyGroup: r.kg, Seq: r.seq, Key: kgKey(r.kg, r.k), UserKey: []byte(r.u), Value: []byte(r.v)}
			obj = append(obj, encodeRecord(v, prev, &rec)...)
			prev = r.seq
			lo, hi = min(lo, r.kg), max(hi, r.kg)
		}
		infos = append(infos, SegmentInfo{Store: s.id, KeyGroups: KeyGroupRange{Start: int(lo), End: int(hi)},
			MinSeq: s.recs[0].seq, MaxSeq: s.recs[len(s.recs)-1].seq, Offset: int64(off), Length: int64(len(obj) - off),
			Records: uint32(len(s.recs)), CRC: crc32.Checksum(obj[off:], base.CRC32C)})
	}
	return appendFooter(obj, v, infos)
}

// TestGolden pins both format versions: testdata/CHANGELOG-v1, written by the version 1
// encoder before version 2 (now appendRecordV1 here), and testdata/CHANGELOG-v2, which the
// encoder writes byte for byte; the decoder reads each to the records goldenStores lists. A
// change to the format needs a new version and a new golden file (go test -run TestGolden
// -update writes CHANGELOG-v2; CHANGELOG-v1 is never rewritten: checkpoints hold it).
func TestGolden(t *testing.T) {
	for _, v := range versions {
		path := filepath.Join("testdata", fmt.Sprintf("CHANGELOG-v%d", v))
		got := goldenObject(v)
		if *update && v == formatVersion {
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("the encoder no longer writes %s (format version %d changed?)", path, v)
		}
		segs, err := DecodeObject(path, want)
		if err != nil {
			t.Fatal(err)
		}
		if len(segs) != 3 || segs[1].Store != "job-b" || segs[1].KeyGroups != (KeyGroupRange{Start: 64, End: 127}) ||
			segs[2].MinSeq != 100 || segs[2].MaxSeq != goldenStores(v)[2].recs[len(goldenStores(v)[2].recs)-1].seq || segs[0].Offset != headerLen || segs[0].Records != 3 || segs[0].Version != v {
			t.Fatalf("%s: footer %+v", path, segs)
		}
		for i := range segs {
			s := &segs[i]
			var recs []goldenRec
			err := checkSegment(path, s, want[s.Offset:s.Offset+s.Length], func(_ int, r *Record) error {
				if r.KeyGroup != uint16(r.Key[0])<<8|uint16(r.Key[1]) {
					t.Fatalf("%s: record key group %d, key %q", path, r.KeyGroup, r.Key)
				}
				recs = append(recs, goldenRec{r.Kind, r.KeyGroup, r.Seq, string(r.Key[2:]), string(r.UserKey), string(r.Value)})
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if want := goldenStores(v)[i].recs; !slices.Equal(recs, want) {
				t.Fatalf("%s segment %d: records %v, want %v", path, i, recs, want)
			}
		}
	}
	if v1, v2 := len(goldenObject(formatV1)), len(goldenObject(formatVersion)); v2 >= v1-14 {
		t.Fatalf("golden object: version 2 %d bytes, version 1 %d", v2, v1)
	}
}

// TestDecodeSegmentAllocatesNothing: checking a segment of either version allocates nothing
// per record (the one Record handed to fn escapes: one allocation per segment); its records
// alias the segment.
func TestDecodeSegmentAllocatesNothing(t *testing.T) {
	for _, v := range versions {
		g := goldenObject(v)
		segs, err := DecodeObject("g", g)
		if err != nil {
			t.Fatal(err)
		}
		s := &segs[2]
		seg := g[s.Offset : s.Offset+s.Length]
		fn := func(_ int, r *Record) error {
			k, lo := uintptr(unsafe.Pointer(&r.Key[0])), uintptr(unsafe.Pointer(&seg[0]))
			if k < lo || k >= lo+uintptr(len(seg)) {
				t.Fatal("a record's key does not alias its segment")
			}
			return nil
		}
		if n := testing.AllocsPerRun(100, func() {
			if err := checkSegment("g", s, seg, fn); err != nil {
				t.Fatal(err)
			}
		}); n > 1 {
			t.Fatalf("version %d: checkSegment of %d records allocated %v times", v, s.Records, n)
		}
	}
}

// TestDecodeChecksInOrder: each damage has its own cause, found in the order magic, version,
// checksum type, CRC, bounds; every truncation and every bit flip is an error, never a panic.
func TestDecodeChecksInOrder(t *testing.T) {
	for _, v := range versions {
		t.Run(fmt.Sprintf("v%d", v), func(t *testing.T) { testDecodeChecksInOrder(t, v) })
	}
}

func testDecodeChecksInOrder(t *testing.T, v uint16) {
	good := goldenObject(v)
	other := uint16(formatV1+formatVersion) - v // the other version this code reads
	n := len(good)
	mut := func(f func(b []byte)) []byte { b := bytes.Clone(good); f(b); return b }
	tests := []struct {
		name string
		b    []byte
		want error
		off  int64
	}{
		{"header magic", mut(func(b []byte) { b[0] = 'X' }), base.ErrBadMagic, 0},
		{"header version", mut(func(b []byte) { b[8] = 9 }), base.ErrFormatVersion, 8},
		{"header version not the trailer's", mut(func(b []byte) { b[8] = byte(other) }), base.ErrCorruption, int64(n - 16)},
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
// accepts re-encodes to the same bytes, in both format versions.
func FuzzDecodeRecord(f *testing.F) {
	f.Add(false, uint64(0), appendRecordV1(nil, 6, 2, 9, kgKey(2, "m"), []byte("u"), []byte("v")))
	f.Add(true, uint64(8), appendRecord(nil, 6, 1, kgKey(2, "m"), []byte("u"), []byte("v")))
	f.Add(true, uint64(0), appendRecord(nil, 2, 300, kgKey(2, "gone"), nil, nil))
	f.Add(true, uint64(0), []byte{})
	f.Fuzz(func(t *testing.T, v2 bool, prev uint64, b []byte) {
		v := uint16(formatV1)
		if v2 {
			v = formatVersion
		}
		var r Record
		n, err := decodeRecord("f", 0, b, v, prev, &r)
		if err != nil {
			if !errors.Is(err, base.ErrCorruption) {
				t.Fatalf("error not a corruption: %v", err)
			}
			return
		}
		if n > len(b) || r.Seq < prev && v2 {
			t.Fatalf("decoded %d of %d bytes, seq %d after %d", n, len(b), r.Seq, prev)
		}
		if re := encodeRecord(v, prev, &r); !bytes.Equal(re, b[:n]) && len(re) == n {
			t.Fatalf("re-encoded %x, decoded from %x", re, b[:n])
		}
	})
}

// FuzzDecodeSegment: a segment of either format version decodes or reports corruption; never
// a panic, never a record outside the segment's ranges.
func FuzzDecodeSegment(f *testing.F) {
	for _, v := range versions {
		g := goldenObject(v)
		segs, _ := DecodeObject("g", g)
		f.Add(v == formatVersion, g[segs[0].Offset:segs[0].Offset+segs[0].Length], uint16(0), uint16(3), uint64(1), uint64(3))
		f.Add(v == formatVersion, g[segs[2].Offset:segs[2].Offset+segs[2].Length], uint16(200), uint16(255), uint64(100), uint64(300))
	}
	f.Fuzz(func(t *testing.T, v2 bool, seg []byte, lo, hi uint16, minSeq, maxSeq uint64) {
		if len(seg) < 4 {
			return
		}
		v := uint16(formatV1)
		if v2 {
			v = formatVersion
		}
		si := SegmentInfo{KeyGroups: KeyGroupRange{Start: int(lo), End: int(hi)}, MinSeq: minSeq, MaxSeq: maxSeq, Version: v,
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

// FuzzDecodeObject: the header, footer and segments of either version decode or report
// corruption; never a panic; allocation is bounded by the input (the footer's count is
// checked against its bytes).
func FuzzDecodeObject(f *testing.F) {
	for _, v := range versions {
		f.Add(goldenObject(v))
		f.Add(appendFooter(appendHeader(nil, v), v, nil))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		segs, err := DecodeObject("f", b)
		if err != nil {
			if !errors.Is(err, base.ErrCorruption) {
				t.Fatalf("error not a corruption: %v", err)
			}
			return
		}
		for _, s := range segs {
			if s.Offset < headerLen || s.Offset+s.Length > int64(len(b)) || !knownVersion(s.Version) {
				t.Fatalf("accepted segment outside the object: %+v", s)
			}
		}
	})
}
