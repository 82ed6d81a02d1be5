package strata

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/strata-db/strata/internal/entry"
)

// TestLowReaderArena checks that the values the lower tier's point reads hand out stay intact
// over any number of later reads (the arena takes a new chunk when one is full, never reusing
// bytes before a write resets it), that a reset reuses the chunk, and that reads allocate
// nothing once the arena is warm.
func TestLowReaderArena(t *testing.T) {
	low := newMemLower()
	var ents []entry.Entry
	for i := range 100 {
		ents = append(ents, entry.Entry{Kind: entry.KindValue, Seq: uint64(i + 1), Key: []byte(fmt.Sprintf("k%03d", i)),
			Value: bytes.Repeat([]byte{byte(i)}, 1+i*97%3000)})
	}
	slicesSortEntries(ents)
	p, err := low.Evict(&sliceIter{ents: ents, i: -1})
	if err != nil {
		t.Fatal(err)
	}
	must(0, low.Install(p, 100))
	var r lowReader
	var got [][]byte
	for round := range 40 { // well past lowArenaMax bytes
		for i := range ents {
			v, st, err := r.get(low, 0, ents[i].Key)
			if err != nil || st != found || !bytes.Equal(v, ents[i].Value) {
				t.Fatalf("round %d key %d: %v %v, value of %d bytes, want %d", round, i, st, err, len(v), len(ents[i].Value))
			}
			if round == 0 {
				got = append(got, v)
			}
		}
	}
	for i, v := range got {
		if !bytes.Equal(v, ents[i].Value) {
			t.Fatalf("value %d read in round 0 changed by later reads", i)
		}
	}
	fl := &fixedLower{e: ents[5]}
	r.reset()
	if a := testing.AllocsPerRun(100, func() {
		r.reset()
		for range 10 {
			if v, st, _ := r.get(fl, 0, fl.e.Key); st != found || len(v) != len(fl.e.Value) {
				panic("fixedLower read")
			}
		}
	}); a != 0 {
		t.Fatalf("a warm read allocates %v times per 10 reads", a)
	}
}

// fixedLower is a lowerTier whose every key holds one entry, without allocating (memLower's
// Get allocates).
type fixedLower struct {
	memLower
	e entry.Entry
}

func (f *fixedLower) Get(order uint64, key, userKey []byte, visit func(*entry.Entry) bool) error {
	visit(&f.e)
	return nil
}

// sliceIter is an entry.Iterator over sorted entries (tests).
type sliceIter struct {
	ents []entry.Entry
	i    int
}

func (it *sliceIter) Next() bool          { it.i++; return it.i < len(it.ents) }
func (it *sliceIter) Entry() *entry.Entry { return &it.ents[it.i] }
func (it *sliceIter) Err() error          { return nil }

func slicesSortEntries(ents []entry.Entry) {
	for i := 1; i < len(ents); i++ {
		for j := i; j > 0 && compareEntries(ents[j], ents[j-1]) < 0; j-- {
			ents[j], ents[j-1] = ents[j-1], ents[j]
		}
	}
}
