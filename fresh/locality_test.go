package fresh

import (
	"encoding/binary"
	"testing"
)

// TestIndexHashLocality: IndexHash takes the home group and h24 from loc and the tag from h,
// so keys that share loc share their home group while their tags still differ; and a Table
// indexed by IndexHash finds every key, with several keys per shared loc (the states of one
// key) filling and overflowing their home group.
func TestIndexHashLocality(t *testing.T) {
	h, loc := uint64(0xfedcba9876543210), uint64(0x0123456789abcdef)
	got := IndexHash(h, loc)
	if _, h24 := hashParts(got); h24 != uint32(loc>>32)&0xFFFFFF {
		t.Fatalf("h24 %#x, want loc's bits 32..55 %#x", h24, uint32(loc>>32)&0xFFFFFF)
	}
	if c, _ := hashParts(got); c != lsb*(ctrlFull|h>>57) {
		t.Fatalf("tag from %#x, want h's", got)
	}

	tab, _ := newTestTable(t, 64<<20, 4<<20, 0)
	const keys, states = 2000, 12 // 12 states per key: more than a group's 8 slots
	key := func(k, s int) []byte {
		b := binary.BigEndian.AppendUint32(nil, uint32(s))
		return binary.BigEndian.AppendUint64(b, uint64(k))
	}
	hash := func(k, s int) uint64 {
		hk := uint64(k+1) * 0x9e3779b97f4a7c15
		return IndexHash(hk^uint64(s+1)*0xd6e8feb86659fd93, hk)
	}
	for k := range keys {
		for s := range states {
			if err := tab.Put(hash(k, s), key(k, s), key(s, k)); err != nil {
				t.Fatal(err)
			}
		}
	}
	for k := range keys {
		for s := range states {
			v, st := tab.Get(hash(k, s), key(k, s))
			if st != Found || string(v) != string(key(s, k)) {
				t.Fatalf("key %d state %d: %v %x", k, s, st, v)
			}
		}
	}
}
