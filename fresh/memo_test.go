package fresh

import (
	"bytes"
	"fmt"
	"math/rand"
	"testing"
)

// TestRememberedProbe drives reads followed by writes of the same key with
// writes of other keys, seals, index growths, rolls and failed writes in
// between, and keys that share a hash (so a memo left for one key is
// offered to another), and compares every read with a map model: the
// remembered probe (doc.go, invariants 12 and 13) must fall back to a
// probe whenever it no longer holds.
func TestRememberedProbe(t *testing.T) {
	seed := *seedFlag
	if seed == 0 {
		seed = 1
	}
	rng := rand.New(rand.NewSource(seed))
	t.Logf("seed %d", seed)
	// Small segments: a roll every thousand writes or so; 640 keys in all,
	// so the index (448 slots before it doubles) grows in most segments.
	tb, _ := newTestTable(t, 4<<30, 16<<20, 64<<10) // mapped, mostly untouched
	const nkeys, nhash = 320, 64
	// 64 hashes for 320 keys of each family: most writes meet a memo left
	// by another key with the same hash.
	hashOfKey := func(k []byte) uint64 { return hashOf(k[len(k)-2:]) }
	kvKey := func(i int) []byte { return []byte(fmt.Sprintf("kv-%03d-%02d", i, i%nhash)) }
	lsKey := func(i int) []byte { return []byte(fmt.Sprintf("ls-%03d-%02d", i, i%nhash)) }
	kv := map[string][]byte{} // absent: never written or deleted
	ls := map[string][]byte{} // concatenated batches; nil: absent or deleted
	big := make([]byte, tb.maxValue+1)

	check := func(step int) {
		t.Helper()
		for i := 0; i < nkeys; i++ {
			k := kvKey(i)
			v, st := tb.Get(hashOfKey(k), k)
			want, ok := kv[string(k)]
			if ok != (st == Found) || !bytes.Equal(v, want) {
				t.Fatalf("step %d: Get(%s) = %q, %v; want %q, %v", step, k, v, st, want, ok)
			}
			k = lsKey(i)
			bs, _, _ := tb.ListGet(hashOfKey(k), k, nil)
			if got := bytes.Join(bs, nil); !bytes.Equal(got, ls[string(k)]) {
				t.Fatalf("step %d: ListGet(%s) = %q; want %q", step, k, got, ls[string(k)])
			}
		}
		if err := tb.Verify(); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
	}
	write := func(list bool, i int) {
		t.Helper()
		if list {
			k := lsKey(i)
			h := hashOfKey(k)
			switch rng.Intn(4) {
			case 0:
				b := []byte(fmt.Sprintf("<r%d>", rng.Intn(1000)))
				must(t, tb.ListReplace(h, k, b))
				ls[string(k)] = b
			case 1:
				must(t, tb.ListDelete(h, k))
				delete(ls, string(k))
			default:
				b := bytes.Repeat([]byte{'x'}, 1+rng.Intn(40))
				must(t, tb.ListAppend(h, k, b))
				ls[string(k)] = append(append([]byte(nil), ls[string(k)]...), b...)
			}
			return
		}
		k := kvKey(i)
		h := hashOfKey(k)
		if rng.Intn(5) == 0 {
			must(t, tb.Delete(h, k))
			delete(kv, string(k))
			return
		}
		v := bytes.Repeat([]byte{byte('A' + rng.Intn(26))}, rng.Intn(60))
		must(t, tb.Put(h, k, v))
		kv[string(k)] = v
	}
	grew := 0
	for step := 0; step < 8000; step++ {
		mask := uint32(0)
		if tb.active != nil {
			mask = tb.active.mask
		}
		list := rng.Intn(2) == 0
		i := rng.Intn(nkeys)
		// The read that leaves the memo.
		if list {
			k := lsKey(i)
			tb.ListGet(hashOfKey(k), k, nil)
		} else {
			k := kvKey(i)
			tb.Get(hashOfKey(k), k)
		}
		// What may come between the read and the write.
		switch rng.Intn(8) {
		case 0: // a write of another key (often one with the same hash)
			write(rng.Intn(2) == 0, rng.Intn(nkeys))
		case 1:
			if rng.Intn(16) == 0 {
				must(t, tb.Seal())
			}
		case 2: // failed writes: nothing written (invariant 8)
			k := kvKey(i)
			if err := tb.Put(hashOfKey(k), k, big); err == nil {
				t.Fatal("Put of a value above the limit succeeded")
			}
			k = lsKey(i)
			if err := tb.ListAppend(hashOfKey(k), k, big); err == nil {
				t.Fatal("ListAppend of a batch above the limit succeeded")
			}
		case 3: // a read of another key with the same hash replaces the memo
			j := (i + nhash*(1+rng.Intn(nkeys/nhash-1))) % nkeys
			k := kvKey(j)
			tb.Get(hashOfKey(k), k)
		}
		// The write, usually of the key read; sometimes of another key with
		// its hash, in the other family or the same.
		j := i
		if rng.Intn(4) == 0 {
			j = (i + nhash*rng.Intn(nkeys/nhash)) % nkeys
		}
		write(list, j)
		if tb.active != nil && mask != 0 && tb.active.mask != mask {
			grew++
		}
		if step%500 == 0 {
			check(step)
		}
	}
	check(-1)
	if st := tb.Stats(); st.Segments < 10 || grew == 0 {
		t.Fatalf("%d segments, %d index growths: the test did not roll segments or grow an index", st.Segments, grew)
	}
	t.Logf("%d segments, %d index growths", tb.Stats().Segments, grew)
}

// TestRememberedProbeUsed pins that the memo is taken: a Put after a Get of
// the same absent key inserts at the slot the Get found, without a probe —
// shown by pointing the memo at another empty slot and seeing the insert go
// there.
func TestRememberedProbeUsed(t *testing.T) {
	tb, _ := newTestTable(t, 1<<30, 16<<20, 0)
	k := []byte("key")
	h := hashOf(k)
	must(t, tb.Put(h, []byte("other"), []byte("v"))) // an active segment
	if _, st := tb.Get(h, k); st != Absent {
		t.Fatal(st)
	}
	s := tb.active
	if tb.memo.roll != tb.rolls || tb.memo.off != 0 {
		t.Fatalf("Get left no memo for an absent key: %+v", tb.memo)
	}
	home := tb.memo.pos
	// Another empty slot of the same group (one key and "other" fill at
	// most two of its eight).
	alt := home/groupSlots*groupSlots + (home+1)%groupSlots
	for s.idx[alt/groupSlots*groupBytes+alt%groupSlots] != 0 {
		alt = alt/groupSlots*groupSlots + (alt+1)%groupSlots
	}
	tb.memo.pos = alt
	must(t, tb.Put(h, k, []byte("v1")))
	if s.idx[alt/groupSlots*groupBytes+alt%groupSlots] == 0 {
		t.Fatalf("Put probed again instead of using the memo (slot %d empty)", alt)
	}
	// The slot is as good as any other of the group: the key is found.
	if v, st := tb.Get(h, k); st != Found || string(v) != "v1" {
		t.Fatalf("Get = %q, %v", v, st)
	}
}
