package fresh

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/memory"
)

// seedSegment returns the used bytes of a segment holding one record of
// every kind and flag, and the record offsets.
func seedSegment(tb testing.TB) ([]byte, []uint32) {
	t, _ := newTestTable(tb, 1<<30, memory.SegmentSize16M, 0)
	k := []byte("key")
	must(tb, t.Put(hashOf(k), k, []byte("value")))
	must(tb, t.Put(hashOf(k), k, []byte("a larger value")))
	must(tb, t.Delete(2, []byte("gone")))
	must(tb, t.ListAppend(3, []byte("l"), []byte("e1")))
	must(tb, t.ListAppend(3, []byte("l"), []byte("e2")))
	must(tb, t.ListReplace(4, []byte("r"), []byte("base")))
	must(tb, t.MapPut(5, []byte("m"), 6, []byte("uk"), []byte("uv")))
	must(tb, t.MapRemove(5, []byte("m"), 7, []byte("gone")))
	must(tb, t.MapClear(8, []byte("c")))
	s := t.active
	seg := append([]byte(nil), s.data[:s.used]...)
	var offs []uint32
	for off := uint32(segHeaderSize); off < s.used; off += s.recordSize(off) {
		offs = append(offs, off)
	}
	return seg, offs
}

// FuzzDecodeRecord: DecodeRecord never panics, and what it accepts lies
// inside the segment.
func FuzzDecodeRecord(f *testing.F) {
	seg, offs := seedSegment(f)
	for _, off := range offs {
		f.Add(seg, off)
	}
	f.Add([]byte{}, uint32(0))
	f.Add(seg[:20], uint32(16))
	f.Fuzz(func(t *testing.T, seg []byte, off uint32) {
		r, err := DecodeRecord(seg, off)
		if err != nil {
			if !errors.Is(err, base.ErrCorruption) {
				t.Fatalf("error does not wrap base.ErrCorruption: %v", err)
			}
			return
		}
		if uint64(off)+uint64(r.Size) > uint64(len(seg)) || r.Size < keyHdrSize {
			t.Fatalf("record of %d bytes at %d past %d", r.Size, off, len(seg))
		}
		if len(r.Value) > r.Cap {
			t.Fatalf("value %d > cap %d", len(r.Value), r.Cap)
		}
	})
}

// TestDecodeRecordSeeds checks the decoder on the records the table wrote
// and on targeted damage.
func TestDecodeRecordSeeds(t *testing.T) {
	seg, offs := seedSegment(t)
	kinds := map[RecordKind]int{}
	for _, off := range offs {
		r, err := DecodeRecord(seg, off)
		if err != nil {
			t.Fatal(err)
		}
		kinds[r.Kind]++
	}
	for k := KindValue; k <= KindMapEntry; k++ {
		if kinds[k] == 0 {
			t.Fatalf("no %v in seed segment", k)
		}
	}
	bad := func(name string, mut func(b []byte), off uint32) {
		b := append([]byte(nil), seg...)
		mut(b)
		if _, err := DecodeRecord(b, off); !errors.Is(err, base.ErrCorruption) {
			t.Errorf("%s: %v", name, err)
		}
	}
	first := offs[0]
	bad("kind 0", func(b []byte) { b[first+7] &^= 0xF }, first)
	bad("kind 9", func(b []byte) { b[first+7] = b[first+7]&0xF0 | 9 }, first)
	bad("base on value", func(b []byte) { b[first+7] |= FlagBase << 4 }, first)
	bad("value length", func(b []byte) { binary.LittleEndian.PutUint32(b[first+12:], 1<<30) }, first)
	bad("truncated", func(b []byte) {}, uint32(len(seg)-4))
	bad("offset 0", func(b []byte) {}, 0)
	if _, err := DecodeRecord(seg[:offs[1]-1], first); !errors.Is(err, base.ErrCorruption) {
		t.Errorf("record cut short: %v", err)
	}
}

// FuzzDecodeSegmentHeader: never panics; errors wrap base.ErrCorruption.
func FuzzDecodeSegmentHeader(f *testing.F) {
	seg, _ := seedSegment(f)
	f.Add(seg[:segHeaderSize])
	f.Add([]byte("SFRS"))
	f.Add(make([]byte, 16))
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, err := DecodeSegmentHeader(b); err != nil && !errors.Is(err, base.ErrCorruption) {
			t.Fatal(err)
		}
	})
}

func TestDecodeSegmentHeader(t *testing.T) {
	seg, _ := seedSegment(t)
	if l, err := DecodeSegmentHeader(seg); err != nil || l != memory.SegmentSize16M {
		t.Fatal(l, err)
	}
	for i, mut := range []func(b []byte){
		func(b []byte) { b[0] ^= 1 },                             // magic
		func(b []byte) { b[4] = 2 },                              // version
		func(b []byte) { b[13] = 1 },                             // reserved
		func(b []byte) { b[9], b[10], b[11], b[8] = 0, 0, 0, 1 }, // limit
	} {
		b := append([]byte(nil), seg[:segHeaderSize]...)
		mut(b)
		if _, err := DecodeSegmentHeader(b); !errors.Is(err, base.ErrCorruption) {
			t.Errorf("mutation %d: %v", i, err)
		}
	}
}

// TestMatchTag compares the SWAR tag match with a byte loop.
func TestMatchTag(t *testing.T) {
	for i := 0; i < 100000; i++ {
		x := uint64(i)*0x9E3779B97F4A7C15 ^ uint64(i)<<7
		var ctrl uint64
		for j := 0; j < 8; j++ {
			b := byte(x >> (8 * j))
			if b&1 == 0 {
				b = 0 // empty
			} else {
				b = ctrlFull | b&3 // few tags: many matches
			}
			ctrl |= uint64(b) << (8 * j)
		}
		tag := uint64(ctrlFull | i&3)
		m := matchTag(ctrl, lsb*tag)
		e := matchEmpty(ctrl)
		for j := 0; j < 8; j++ {
			b := byte(ctrl >> (8 * j))
			got := m>>(8*j+7)&1 == 1
			if b == byte(tag) && !got {
				t.Fatalf("ctrl %#x tag %#x: missed slot %d", ctrl, tag, j)
			}
			if got && b != byte(tag) && (j == 0 || byte(ctrl>>(8*(j-1))) != byte(tag)) {
				t.Fatalf("ctrl %#x tag %#x: false positive at %d not above a match", ctrl, tag, j)
			}
			if (e>>(8*j+7)&1 == 1) != (b == 0) {
				t.Fatalf("ctrl %#x: empty mismatch at %d", ctrl, j)
			}
		}
	}
}
