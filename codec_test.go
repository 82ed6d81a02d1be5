package strata

import (
	"bytes"
	"errors"
	"math"
	"sort"
	"testing"
)

func TestCodecRoundTrip(t *testing.T) {
	for _, v := range []int64{math.MinInt64, -1 << 40, -1, 0, 1, 42, math.MaxInt64} {
		got, err := Int64.Decode(Int64.Append(nil, v))
		if err != nil || got != v {
			t.Errorf("Int64 %d: got %d, %v", v, got, err)
		}
	}
	for _, v := range []uint64{0, 1, 1 << 63, math.MaxUint64} {
		got, err := Uint64.Decode(Uint64.Append(nil, v))
		if err != nil || got != v {
			t.Errorf("Uint64 %d: got %d, %v", v, got, err)
		}
	}
	for _, v := range []float64{math.Inf(-1), -1.5, -0.0, 0, math.SmallestNonzeroFloat64, 3.25, math.MaxFloat64, math.Inf(1)} {
		got, err := Float64.Decode(Float64.Append(nil, v))
		if err != nil || math.Float64bits(got) != math.Float64bits(v) {
			t.Errorf("Float64 %v: got %v, %v", v, got, err)
		}
	}
	nan := math.Float64frombits(0x7ff8000000000123)
	if got, _ := Float64.Decode(Float64.Append(nil, nan)); math.Float64bits(got) != math.Float64bits(nan) {
		t.Errorf("Float64 NaN payload lost")
	}
	for _, v := range []string{"", "a", "héllo\x00"} {
		got, err := String.Decode(String.Append(nil, v))
		if err != nil || got != v {
			t.Errorf("String %q: got %q, %v", v, got, err)
		}
	}
	for _, v := range [][]byte{{}, {0}, []byte("xyz")} {
		got, err := Bytes.Decode(Bytes.Append(nil, v))
		if err != nil || !bytes.Equal(got, v) {
			t.Errorf("Bytes %q: got %q, %v", v, got, err)
		}
	}
}

func TestCodecAppendKeepsPrefix(t *testing.T) {
	dst := []byte("prefix")
	out := Int64.Append(dst, 7)
	if string(out[:6]) != "prefix" || len(out) != 14 {
		t.Fatalf("Append clobbered prefix: %q", out)
	}
}

func TestCodecBytesDecodeClipsCapacity(t *testing.T) {
	buf := []byte("abcdef")
	v, _ := Bytes.Decode(buf[:3])
	_ = append(v, 'X')
	if string(buf) != "abcdef" {
		t.Fatalf("append to a decoded Bytes value overwrote the store's memory: %q", buf)
	}
}

func TestCodecOrder(t *testing.T) {
	ints := []int64{math.MaxInt64, 5, -5, 0, math.MinInt64, -1, 1}
	floats := []float64{math.Inf(1), 2.5, -2.5, 0, math.Inf(-1), -1e-300, 1e-300, math.MaxFloat64, -math.MaxFloat64}
	var ib, fb [][]byte
	for _, v := range ints {
		ib = append(ib, Int64.Append(nil, v))
	}
	for _, v := range floats {
		fb = append(fb, Float64.Append(nil, v))
	}
	sort.Slice(ints, func(i, j int) bool { return ints[i] < ints[j] })
	sort.Slice(floats, func(i, j int) bool { return floats[i] < floats[j] })
	sort.Slice(ib, func(i, j int) bool { return bytes.Compare(ib[i], ib[j]) < 0 })
	sort.Slice(fb, func(i, j int) bool { return bytes.Compare(fb[i], fb[j]) < 0 })
	for i := range ints {
		if v, _ := Int64.Decode(ib[i]); v != ints[i] {
			t.Errorf("Int64 order: position %d has %d, want %d", i, v, ints[i])
		}
	}
	for i := range floats {
		if v, _ := Float64.Decode(fb[i]); v != floats[i] {
			t.Errorf("Float64 order: position %d has %v, want %v", i, v, floats[i])
		}
	}
}

func TestCodecBadLength(t *testing.T) {
	for name, dec := range map[string]func([]byte) error{
		"Int64":   func(b []byte) error { _, err := Int64.Decode(b); return err },
		"Uint64":  func(b []byte) error { _, err := Uint64.Decode(b); return err },
		"Float64": func(b []byte) error { _, err := Float64.Decode(b); return err },
	} {
		for _, n := range []int{0, 7, 9} {
			if err := dec(make([]byte, n)); !errors.Is(err, ErrCorruption) {
				t.Errorf("%s.Decode(%d bytes) = %v, want ErrCorruption", name, n, err)
			}
		}
	}
}

func TestCodecSame(t *testing.T) {
	if !sameCodec(Int64, Int64) || sameCodec(Int64, Uint64) || sameCodec(Bytes, String) || !sameCodec(nil, nil) || sameCodec(Int64, nil) {
		t.Fatal("sameCodec wrong on built-ins")
	}
	type funcCodec struct{ f func() }
	if !sameCodec(funcCodec{}, funcCodec{}) {
		t.Fatal("sameCodec on uncomparable values of one type must be true")
	}
	type param struct{ n int }
	if sameCodec(param{1}, param{2}) || !sameCodec(param{1}, param{1}) {
		t.Fatal("sameCodec on comparable values must compare them")
	}
}

func fuzzFixed[T any](f *testing.F, c Codec[T]) {
	f.Add([]byte{})
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8})
	f.Add([]byte{0x80, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := c.Decode(b)
		if len(b) != 8 {
			if !errors.Is(err, ErrCorruption) {
				t.Fatalf("Decode(%d bytes) err = %v, want ErrCorruption", len(b), err)
			}
			return
		}
		if err != nil {
			t.Fatalf("Decode(%x): %v", b, err)
		}
		if out := c.Append(nil, v); !bytes.Equal(out, b) {
			t.Fatalf("Append(Decode(%x)) = %x", b, out)
		}
	})
}

func FuzzCodecInt64(f *testing.F)   { fuzzFixed(f, Int64) }
func FuzzCodecUint64(f *testing.F)  { fuzzFixed(f, Uint64) }
func FuzzCodecFloat64(f *testing.F) { fuzzFixed(f, Float64) }

func FuzzCodecBytes(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("abc"))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := Bytes.Decode(b)
		if err != nil || !bytes.Equal(v, b) || cap(v) != len(v) {
			t.Fatalf("Bytes.Decode(%x) = %x (cap %d), %v", b, v, cap(v), err)
		}
	})
}

func FuzzCodecString(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("héllo"))
	f.Add([]byte{0xff, 0xfe})
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := String.Decode(b)
		if err != nil || v != string(b) {
			t.Fatalf("String.Decode(%x) = %q, %v", b, v, err)
		}
		if out := String.Append(nil, v); !bytes.Equal(out, b) {
			t.Fatalf("Append(Decode(%x)) = %x", b, out)
		}
	})
}
