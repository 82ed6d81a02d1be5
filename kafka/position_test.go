package kafka

import (
	"errors"
	"os"
	"testing"
)

func TestPositionRoundTrip(t *testing.T) {
	for _, p := range []Position{{}, {Job: "j", Topic: "in", Partition: 7, Offset: 1 << 40}, {Job: "flights", Topic: "t", Partition: -1, Offset: -1}} {
		got, err := DecodePosition(p.Append(nil))
		if err != nil || got != p {
			t.Fatalf("DecodePosition(Append(%+v)) = %+v, %v", p, got, err)
		}
	}
	b := Position{Job: "j", Topic: "in", Partition: 1, Offset: 2}.Append(nil)
	for i := range b {
		c := append([]byte(nil), b...)
		c[i] ^= 0x40
		if _, err := DecodePosition(c); !errors.Is(err, ErrBadPosition) {
			t.Fatalf("byte %d flipped: err = %v, want ErrBadPosition", i, err)
		}
	}
	for n := range len(b) {
		if _, err := DecodePosition(b[:n]); !errors.Is(err, ErrBadPosition) {
			t.Fatalf("truncated to %d: err = %v, want ErrBadPosition", n, err)
		}
	}
}

// TestPositionGolden pins format version 1 (testdata/position-v1.bin; regenerate only with a
// new version).
func TestPositionGolden(t *testing.T) {
	want := Position{Job: "flights", Topic: "in", Partition: 3, Offset: 123456}
	b, err := os.ReadFile("testdata/position-v1.bin")
	if os.IsNotExist(err) && os.Getenv("STRATA_WRITE_GOLDEN") != "" {
		if err := os.WriteFile("testdata/position-v1.bin", want.Append(nil), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodePosition(b)
	if err != nil || got != want {
		t.Fatalf("golden = %+v, %v; want %+v", got, err, want)
	}
	if string(want.Append(nil)) != string(b) {
		t.Fatal("the encoding of version 1 changed")
	}
}

func FuzzDecodePosition(f *testing.F) {
	f.Add(Position{Job: "j", Topic: "in", Partition: 1, Offset: 2}.Append(nil))
	f.Add([]byte("SKP1\x01"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := DecodePosition(b)
		if err != nil {
			if !errors.Is(err, ErrBadPosition) {
				t.Fatalf("error %v does not wrap ErrBadPosition", err)
			}
			return
		}
		if got := p.Append(nil); string(got) != string(b) {
			t.Fatalf("decoded %+v re-encodes differently", p)
		}
	})
}
