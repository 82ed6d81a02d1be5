package slice

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"

	"github.com/strata-db/strata/internal/base"
)

// aligned copies b into 8-byte aligned memory, as blocks are.
func aligned(b []byte) []byte {
	w := make([]uint64, (len(b)+7)/8+1)
	out := unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), len(w)*8)[:len(b)]
	copy(out, b)
	return out
}

// seedSlices returns encoded slices holding every kind.
func seedSlices(tb testing.TB) [][]byte {
	e := newEnv(tb, MinSliceSize, Options{BucketBits: -1})
	out := e.install(tb, kv(1, "a", 9, "value"), tomb(1, "b", 8), lbase(2, "l", 7, "B"), lapp(2, "l", 10, "x"),
		ment(3, "m", "", 6, "empty uk"), ment(3, "m", "u", 5, "w"), mtomb(3, "m", "v", 4), tomb(3, "m", 3),
		kv(^uint64(0), "max", 2, ""))
	var bs [][]byte
	for _, s := range out {
		bs = append(bs, slices.Clone(s.Bytes()))
	}
	return bs
}

// FuzzDecode: Decode never panics; what it accepts reads back entirely,
// in order, and re-encodes to the same bytes.
func FuzzDecode(f *testing.F) {
	for _, b := range seedSlices(f) {
		f.Add(b)
		f.Add(b[:len(b)-1])
		c := slices.Clone(b)
		c[headerSize+3] ^= 1 // fingerprint bit flip: CRC must catch it
		f.Add(c)
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		b = aligned(b)
		// Re-seal the CRC half the time so the fuzzer gets past it to the
		// structural checks.
		if len(b) >= headerSize && len(b)%2 == 0 {
			if size := int(binary.LittleEndian.Uint32(b[hdrSize:])); size >= headerSize && size <= len(b) {
				binary.LittleEndian.PutUint32(b[hdrCRC:], checksum(b[:size]))
			}
		}
		s, err := Decode(b)
		if err != nil {
			if !errors.Is(err, base.ErrCorruption) {
				t.Fatalf("Decode error %v does not wrap base.ErrCorruption", err)
			}
			return
		}
		var b2 []byte
		var prev base.Entry
		lastInline := 0 // as the builder: a key equal to the last inline one is a reference
		for i := 0; i < s.Len(); i++ {
			var e base.Entry
			s.Entry(i, &e)
			if i > 0 {
				if base.Compare(&prev, &e) >= 0 {
					t.Fatalf("accepted slice out of order at %d", i)
				}
			}
			if j := s.seek(e.Order, e.Key, e.UserKey); j > i {
				t.Fatalf("seek(%d) = %d", i, j)
			}
			ref := 0
			if i > 0 && bytes.Equal(e.Key, prev.Key) {
				ref = len(b2) - lastInline
			} else {
				lastInline = len(b2)
			}
			b2 = appendRecord(b2, &e, ref)
			prev = e
		}
		base := headerSize + (fpSize+offSize)*s.Len()
		if !slices.Equal(b2, s.Bytes()[base:]) {
			t.Fatal("records do not re-encode to the same bytes")
		}
	})
}

func TestDecodeErrorsInOrder(t *testing.T) {
	b := aligned(seedSlices(t)[0])
	if _, err := Decode(b); err != nil {
		t.Fatal(err)
	}
	mut := func(off int, v byte) []byte { c := aligned(b); c[off] ^= v; return c }
	cases := []struct {
		b    []byte
		want error
	}{
		{mut(hdrMagic, 1), base.ErrBadMagic},
		{mut(hdrVersion, 2), base.ErrFormatVersion},
		{mut(hdrCsum, 2), base.ErrChecksumType},
		{mut(len(b)-1, 1), base.ErrChecksum},
		{mut(hdrCRC, 1), base.ErrChecksum},
		{b[:headerSize-1], base.ErrCorruption},
		{aligned(b)[:len(b)-1], base.ErrCorruption},
	}
	for i, c := range cases {
		if _, err := Decode(c.b); !errors.Is(err, c.want) {
			t.Errorf("case %d: %v, want %v", i, err, c.want)
		}
	}
	un := make([]byte, len(b)+1)
	copy(un[1:], b)
	if _, err := Decode(un[1:]); !errors.Is(err, ErrAlignment) && uintptr(unsafe.Pointer(&un[1]))%8 != 0 {
		t.Errorf("misaligned buffer: %v", err)
	}
}

func TestLowerBoundMatchesBinarySearch(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{0, 1, 2, 3, 7, 8, 9, 15, 16, 17, 100, 255, 256, 257, 1000, 1 << 12} {
		for trial := 0; trial < 20; trial++ {
			fps := make([]uint64, n)
			span := uint64(1) << (r.IntN(60) + 4)
			for i := range fps {
				fps[i] = r.Uint64N(span)
			}
			slices.Sort(fps)
			probes := []uint64{0, ^uint64(0), span, span / 2}
			for i := 0; i < 20 && n > 0; i++ {
				x := fps[r.IntN(n)]
				probes = append(probes, x, x-1, x+1)
			}
			for _, x := range probes {
				want, _ := slices.BinarySearch(fps, x)
				if got := lowerBound(fps, x); got != want {
					t.Fatalf("n=%d x=%d: lowerBound=%d, slices.BinarySearch=%d", n, x, got, want)
				}
				if got := lowerBoundGo(fps, x); got != want {
					t.Fatalf("n=%d x=%d: lowerBoundGo=%d, want %d", n, x, got, want)
				}
			}
		}
	}
}
