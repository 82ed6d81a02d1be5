package timer

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"hash/crc32"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/memory"

	goldenfile "github.com/strata-db/strata/internal/golden"
)

var updateGolden = flag.Bool("update", false, "TestGoldenSectionV1: rewrite testdata/section-v1.bin")

func crcOf(b []byte) uint32 { return crc32.Checksum(b, base.CRC32C) }

// goldenBlocks is the fixed content of testdata/section-v1.bin (key group 0x1234): two
// services, both domains, empty and long namespaces, negative and extreme timestamps and
// key hashes, an empty key.
func goldenBlocks() []Block {
	return []Block{
		{Service: "session-gaps", Domain: EventTime, Timers: []Timer{
			{KeyHash: -1, Key: []byte("user-17"), Namespace: []byte{0, 0, 0, 0, 0, 0, 0x03, 0xe8}, Timestamp: 1_700_000_000_000},
			{KeyHash: 0x7fffffff, Key: []byte{}, Namespace: []byte{}, Timestamp: -9223372036854775808},
		}},
		{Service: "session-gaps", Domain: ProcessingTime, Timers: []Timer{
			{KeyHash: 42, Key: []byte("k"), Namespace: bytes.Repeat([]byte("ns"), 100), Timestamp: 9223372036854775807},
		}},
		{Service: "windows", Domain: EventTime, Timers: []Timer{
			{KeyHash: -2147483648, Key: []byte("user-17"), Namespace: []byte("w"), Timestamp: 0},
			{KeyHash: 7, Key: []byte("\xff\x00key"), Namespace: nil, Timestamp: -1},
		}},
	}
}

// decodeAll decodes the section at the start of b into blocks (in order).
func decodeAll(b []byte) (int, int, []Block, error) {
	var out []Block
	kg, n, err := DecodeSection("test", 0, b, func(service string, d Domain, t Timer) error {
		if len(out) == 0 || out[len(out)-1].Service != service || out[len(out)-1].Domain != d {
			out = append(out, Block{Service: service, Domain: d})
		}
		t.Key, t.Namespace = bytes.Clone(t.Key), bytes.Clone(t.Namespace)
		if t.Key == nil {
			t.Key = []byte{}
		}
		if t.Namespace == nil {
			t.Namespace = []byte{}
		}
		out[len(out)-1].Timers = append(out[len(out)-1].Timers, t)
		return nil
	})
	return kg, n, out, err
}

// TestGoldenSectionV1: AppendSection encodes goldenBlocks to exactly testdata/section-v1.bin,
// and the file decodes to them. If the encoding check fails the format changed: bump the
// version and add a new golden file rather than regenerating this one. -update (re)creates it.
func TestGoldenSectionV1(t *testing.T) {
	fresh := AppendSection(nil, 0x1234, goldenBlocks())
	path := filepath.Join("testdata", "section-v1.bin")
	b := goldenfile.Check(t, path, fresh, *updateGolden)
	kg, n, blocks, err := decodeAll(b)
	if err != nil || kg != 0x1234 || n != len(b) {
		t.Fatalf("decode: kg %#x n %d of %d: %v", kg, n, len(b), err)
	}
	want := goldenBlocks()
	for i := range want {
		for j := range want[i].Timers {
			w := &want[i].Timers[j]
			w.KeyGroup = 0x1234
			if w.Namespace == nil {
				w.Namespace = []byte{}
			}
		}
	}
	if !reflect.DeepEqual(blocks, want) {
		t.Fatalf("%s decodes to\n%+v\nwant\n%+v", path, blocks, want)
	}
}

// TestSnapshotMatchesAppendSection: a snapshot of several queues writes, key group by key
// group, exactly the sections AppendSection gives for their timers in the order written.
func TestSnapshotMatchesAppendSection(t *testing.T) {
	b := memory.NewBudget(1 << 28)
	qs := []*Queue{NewQueue(b, 5, 4), NewQueue(b, 5, 4), NewQueue(b, 5, 4)}
	for i := range 300 {
		q := qs[i%3]
		x := mt{5 + i%4, "key", string(rune('a' + i%26)), int64(i)}
		if i%3 == 1 && i%4 == 2 {
			continue // key group 7 has no timers in the second queue
		}
		add(t, q, x)
	}
	s := Freeze([]Source{{"a", EventTime, qs[0]}, {"a", ProcessingTime, qs[1]}, {"b", EventTime, qs[2]}})
	defer s.Release()
	var buf bytes.Buffer
	secs, err := s.WriteTo(t.Context(), &buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(secs) != 4 {
		t.Fatalf("%d sections", len(secs))
	}
	for _, sec := range secs {
		part := buf.Bytes()[sec.Offset : sec.Offset+sec.Length]
		_, _, blocks, err := decodeAll(part)
		if err != nil {
			t.Fatal(err)
		}
		if again := AppendSection(nil, sec.KeyGroup, blocks); !bytes.Equal(again, part) {
			t.Fatalf("key group %d: the snapshot's section differs from AppendSection's", sec.KeyGroup)
		}
	}
	if err := DecodeSections("all", buf.Bytes(), func(string, Domain, Timer) error { return nil }); err != nil {
		t.Fatal(err)
	}
	twice := append(bytes.Clone(buf.Bytes()), buf.Bytes()[secs[0].Offset:secs[0].Offset+secs[0].Length]...)
	if err := DecodeSections("twice", twice, func(string, Domain, Timer) error { return nil }); !errors.Is(err, base.ErrCorruption) {
		t.Fatalf("two sections of one key group: %v", err)
	}
}

// reseal recomputes a section's length and CRC (so fuzzed payloads reach the payload checks).
func reseal(b []byte) []byte {
	if len(b) < sectionHeader+4 {
		return b
	}
	c := bytes.Clone(b)
	binary.LittleEndian.PutUint32(c[12:], uint32(len(c)-sectionHeader-4))
	binary.LittleEndian.PutUint32(c[len(c)-4:], crcOf(c[:len(c)-4]))
	return c
}

// TestSectionCorruption: each damage of the golden section fails with its cause, naming the
// offset.
func TestSectionCorruption(t *testing.T) {
	golden := AppendSection(nil, 0x1234, goldenBlocks())
	mod := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(golden)) }
	set := func(off int, v ...byte) []byte {
		return mod(func(b []byte) []byte { copy(b[off:], v); return b })
	}
	block0 := sectionHeader + sectionFixed
	timer0 := block0 + 2 + len("session-gaps") + 6
	for _, tc := range []struct {
		name  string
		b     []byte
		cause error
		off   int64
	}{
		{"empty", nil, base.ErrTruncated, 0},
		{"magic", set(0, 'X'), base.ErrBadMagic, 0},
		{"short header", golden[:12], base.ErrTruncated, 0},
		{"version", set(8, 2), base.ErrFormatVersion, 8},
		{"checksum type", set(10, 2), base.ErrChecksumType, 10},
		{"reserved", set(11, 1), nil, 11},
		{"truncated", golden[:len(golden)-1], base.ErrTruncated, 12},
		{"flipped bit", set(40, golden[40]^1), base.ErrChecksum, int64(len(golden) - 4)},
		{"reserved kg field", reseal(set(sectionHeader+2, 1)), nil, sectionHeader + 2},
		{"no blocks", reseal(set(sectionHeader+4, 0, 0, 0, 0)), nil, sectionHeader + 4},
		{"unknown domain", reseal(set(timer0-6, 7)), nil, int64(timer0 - 6)},
		{"dead bit", reseal(set(timer0+15, 0x80)), nil, int64(timer0 + 14)},
		{"block order", reseal(set(block0+2, 'z')), nil, int64(block0 + 2 + len("session-gaps") + 6 + (16 + 7 + 8) + 16)},
		{"trailing byte", reseal(append(bytes.Clone(golden), 0)), nil, int64(len(golden) - 4)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := DecodeSection("f", 0, tc.b, func(string, Domain, Timer) error { return nil })
			var ce *base.CorruptionError
			if !errors.As(err, &ce) || !errors.Is(err, base.ErrCorruption) {
				t.Fatalf("%v: not a corruption error", err)
			}
			if tc.cause != nil && !errors.Is(err, tc.cause) {
				t.Fatalf("%v: want cause %v", err, tc.cause)
			}
			if ce.Offset != tc.off {
				t.Fatalf("%v: offset %d, want %d", err, ce.Offset, tc.off)
			}
		})
	}
}

// FuzzSectionDecode: the decoder never panics; it returns a *base.CorruptionError or a
// section that re-encodes (AppendSection) to exactly its bytes. Each input is also tried
// resealed, so the fuzzer reaches the payload behind the checksum.
func FuzzSectionDecode(f *testing.F) {
	golden, err := os.ReadFile(filepath.Join("testdata", "section-v1.bin"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(golden)
	f.Add(AppendSection(nil, 0, []Block{{Service: "s", Timers: []Timer{{Key: []byte("k")}}}}))
	f.Add(golden[:30])
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, in := range [][]byte{b, reseal(b)} {
			kg, n, blocks, err := decodeAll(in)
			if err != nil {
				var ce *base.CorruptionError
				if !errors.As(err, &ce) || !errors.Is(err, base.ErrCorruption) {
					t.Fatalf("DecodeSection: %v: not a *base.CorruptionError", err)
				}
				continue
			}
			if out := AppendSection(nil, kg, blocks); !bytes.Equal(out, in[:n]) {
				t.Fatalf("re-encoding differs:\n in %x\nout %x", in[:n], out)
			}
		}
	})
}
