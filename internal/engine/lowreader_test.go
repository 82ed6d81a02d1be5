package engine

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/internal/engine/enginetest"
)

// TestLowReaderArena checks that the values the lower tier's point reads hand out stay intact
// over any number of later reads (the arena takes a new chunk when one is full, never reusing
// bytes before a write resets it), that a reset reuses the chunk, and that reads allocate
// nothing once the arena is warm.
func TestLowReaderArena(t *testing.T) {
	low := enginetest.NewMemLower()
	var ents []base.Entry
	for i := range 100 {
		ents = append(ents, base.Entry{Kind: base.KindValue, Seq: uint64(i + 1), Key: []byte(fmt.Sprintf("k%03d", i)),
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

// fixedLower is a LowerTier whose every key holds one entry, without allocating (memLower's
// Get allocates).
type fixedLower struct {
	enginetest.MemLower
	e base.Entry
}

func (f *fixedLower) Get(order uint64, key, userKey []byte, visit func(*base.Entry) bool) error {
	visit(&f.e)
	return nil
}

func (f *fixedLower) GetLoc(order uint64, key, userKey []byte, visit func(*base.Entry, base.Loc) bool) error {
	visit(&f.e, base.Loc{})
	return nil
}

// sliceIter is an base.Iterator over sorted entries (tests).
type sliceIter struct {
	ents []base.Entry
	i    int
}

func (it *sliceIter) Next() bool         { it.i++; return it.i < len(it.ents) }
func (it *sliceIter) Entry() *base.Entry { return &it.ents[it.i] }
func (it *sliceIter) Err() error         { return nil }

func slicesSortEntries(ents []base.Entry) {
	for i := 1; i < len(ents); i++ {
		for j := i; j > 0 && base.Compare(&ents[j], &ents[j-1]) < 0; j-- {
			ents[j], ents[j-1] = ents[j-1], ents[j]
		}
	}
}

// TestLowReaderListGet: list batches read from the lower tier come oldest first, stop at the
// base, survive later reads until a reset, and a warm read allocates nothing (the visit
// function is bound once; copies go to the arena).
func TestLowReaderListGet(t *testing.T) {
	low := enginetest.NewMemLower()
	key := []byte("list")
	ents := []base.Entry{
		{Kind: base.KindListAppend, Seq: 4, Key: key, Value: []byte("d")},
		{Kind: base.KindListAppend, Seq: 3, Key: key, Value: []byte("c")},
		{Kind: base.KindListBase, Seq: 2, Key: key, Value: []byte("b")},
		{Kind: base.KindListAppend, Seq: 1, Key: key, Value: []byte("hidden by the base")},
	}
	p, err := low.Evict(&sliceIter{ents: ents, i: -1})
	if err != nil {
		t.Fatal(err)
	}
	must(0, low.Install(p, 4))
	var r lowReader
	first, err := r.listGet(low, 0, key, [][]byte{[]byte("kept")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := "kept|b|c|d"
	if got := string(bytes.Join(first, []byte("|"))); got != want {
		t.Fatalf("listGet = %q, want %q", got, want)
	}
	for range 1000 { // later reads must not overwrite the first one's copies
		if _, err := r.listGet(low, 0, key, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	if got := string(bytes.Join(first, []byte("|"))); got != want {
		t.Fatalf("after more reads: %q, want %q", got, want)
	}
	fl := &fixedLower{e: ents[2]}
	dst := make([][]byte, 0, 4)
	if a := testing.AllocsPerRun(100, func() {
		r.reset()
		if out, _ := r.listGet(fl, 0, key, dst[:0], nil); len(out) != 1 {
			panic("fixedLower list read")
		}
	}); a != 0 {
		t.Fatalf("a warm list read allocates %v times", a)
	}
}
