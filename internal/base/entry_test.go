package base

import (
	"math/rand/v2"
	"testing"
)

func TestOrderHashKeepsKeyGroupsContiguous(t *testing.T) {
	for _, maxP := range []int{1, 2, 10, 128, 1000, 32768} {
		stride := Stride(maxP)
		r := rand.New(rand.NewPCG(1, uint64(maxP)))
		for i := 0; i < 10000; i++ {
			kg := uint16(r.IntN(maxP))
			h := r.Uint64()
			if i%100 == 0 {
				h = ^uint64(0) // the top of the range stays inside it
			}
			o := OrderHash(kg, stride, h)
			lo := uint64(kg) * stride
			if o < lo || o-lo >= stride {
				t.Fatalf("maxP %d kg %d h %#x: order %#x outside [%#x, +%#x)", maxP, kg, h, o, lo, stride)
			}
			if got := KeyGroupOfOrder(o, stride); got != kg {
				t.Fatalf("maxP %d: KeyGroupOfOrder(%#x) = %d, want %d", maxP, o, got, kg)
			}
		}
	}
}

func TestOrderHashMonotoneInHash(t *testing.T) {
	stride := Stride(128)
	if OrderHash(5, stride, 1<<40) > OrderHash(5, stride, 1<<63) {
		t.Fatal("order hash does not follow the key hash inside a key group")
	}
	if OrderHash(5, stride, ^uint64(0)) >= OrderHash(6, stride, 0) {
		t.Fatal("key group 5's range overlaps key group 6's")
	}
}

func TestKeyGroupOf(t *testing.T) {
	if kg, ok := KeyGroupOf([]byte{0x7f, 0xff, 9}); !ok || kg != 32767 {
		t.Fatalf("KeyGroupOf = %d, %v", kg, ok)
	}
	if _, ok := KeyGroupOf([]byte{1}); ok {
		t.Fatal("KeyGroupOf accepted a 1-byte key")
	}
}

func TestKindValid(t *testing.T) {
	for k := Kind(0); k < 10; k++ {
		want := k >= 1 && k <= 6
		if k.Valid() != want {
			t.Fatalf("Kind(%d).Valid() = %v", k, k.Valid())
		}
		if want && k.String() == "kind(?)" {
			t.Fatalf("Kind(%d) has no name", k)
		}
	}
}
