package lsm

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/internal/vfs"
)

// TestListPieces: a list grown by many operands over several flushes and
// compacted to the bottom stays a chain of pieces of at most MaxListPiece
// bytes (rule 4), every one readable again through GetLoc and ReadAt, and
// the chain reads as the whole list.
func TestListPieces(t *testing.T) {
	fs := vfs.NewMem()
	opts := smallOptions(fs)
	opts.MaxListPiece = 100
	d, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	key := []byte("the-list")
	var want []byte
	seq := uint64(0)
	for f := range 12 {
		var es []base.Entry
		for i := range 40 {
			seq++
			v := fmt.Appendf(nil, "<%d.%d>", f, i)
			want = append(want, v...)
			es = append(es, base.Entry{Order: 7, Seq: seq, Kind: base.KindListAppend, Key: key, Value: v})
		}
		slices.Reverse(es) // newest first
		p, err := d.WriteL0(&sliceIter{es: es})
		if err != nil {
			t.Fatal(err)
		}
		if err := d.InstallL0(p, seq); err != nil {
			t.Fatal(err)
		}
		compactAll(t, d)
	}
	compactToBottom(t, d)
	var locs []base.Loc
	var kinds []base.Kind
	pieces := 0
	if err := d.GetLoc(7, key, nil, func(e *base.Entry, loc base.Loc) bool {
		if len(e.Value) > opts.MaxListPiece {
			t.Errorf("a piece of %d bytes > MaxListPiece %d", len(e.Value), opts.MaxListPiece)
		}
		locs, kinds = append(locs, loc), append(kinds, e.Kind)
		pieces++
		return e.Kind == base.KindListAppend
	}); err != nil {
		t.Fatal(err)
	}
	if pieces < len(want)/opts.MaxListPiece || kinds[len(kinds)-1] != base.KindListBase {
		t.Fatalf("%d pieces (kinds %v) for a list of %d bytes", pieces, kinds, len(want))
	}
	var got []byte
	for i := len(locs) - 1; i >= 0; i-- {
		if err := d.ReadAt(7, key, locs[i], func(e *base.Entry) { got = append(got, e.Value...) }); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("pieces read back:\n%s\nwant\n%s", got, want)
	}
	// A place in a table a later install replaced is refused, not misread.
	p, _ := d.WriteL0(&sliceIter{es: []base.Entry{{Order: 7, Seq: seq + 1, Kind: base.KindTombstone, Key: key}}})
	if err := d.InstallL0(p, seq+1); err != nil {
		t.Fatal(err)
	}
	compactToBottom(t, d)
	if err := d.ReadAt(7, key, locs[0], func(*base.Entry) {}); err == nil {
		t.Fatal("ReadAt of a compacted table's place succeeded")
	}
}

// TestMapRangeChunks: a map held by several files, larger than a round of
// MapRange's merge, is visited in entry order with every version once, from
// its beginning and from any user key, and a walk stopped at a user key and
// resumed there sees the same entries.
func TestMapRangeChunks(t *testing.T) {
	fs := vfs.NewMem()
	opts := smallOptions(fs)
	opts.L0CompactionTrigger = 100 // keep the files apart
	d, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	rng := rand.New(rand.NewPCG(testSeed(t), 3))
	key := []byte("the-map")
	var all []base.Entry
	seq := uint64(0)
	for f := range 5 {
		var es []base.Entry
		if f == 2 {
			seq++
			es = append(es, base.Entry{Order: 9, Seq: seq, Kind: base.KindTombstone, Key: key})
		}
		for range 1500 + f*300 {
			seq++
			k := base.KindMapEntry
			if rng.IntN(8) == 0 {
				k = base.KindMapEntryTombstone
			}
			uk := fmt.Appendf(nil, "u%05d", rng.IntN(4000))
			es = append(es, base.Entry{Order: 9, Seq: seq, Kind: k, Key: key, UserKey: uk, Value: fmt.Appendf(nil, "v%d", seq)})
		}
		slices.SortFunc(es, func(a, b base.Entry) int { return base.Compare(&a, &b) })
		es = slices.CompactFunc(es, func(a, b base.Entry) bool { return bytes.Equal(a.UserKey, b.UserKey) && a.Seq == b.Seq })
		p, err := d.WriteL0(&sliceIter{es: es})
		if err != nil {
			t.Fatal(err)
		}
		if err := d.InstallL0(p, seq); err != nil {
			t.Fatal(err)
		}
		all = append(all, es...)
	}
	if n := d.Metrics().Levels[0].Files; n < 5 {
		t.Fatalf("%d L0 files, want 5", n)
	}
	slices.SortFunc(all, func(a, b base.Entry) int { return base.Compare(&a, &b) })
	render := func(es []base.Entry) string {
		var b bytes.Buffer
		for _, e := range es {
			fmt.Fprintf(&b, "%s/%d/%d/%s ", e.UserKey, e.Seq, e.Kind, e.Value)
		}
		return b.String()
	}
	walk := func(from []byte, stopAfter int) ([]base.Entry, []byte) {
		var out []base.Entry
		var next []byte
		if err := d.MapRange(9, key, from, func(e *base.Entry) bool {
			if stopAfter > 0 && len(out) >= stopAfter && !bytes.Equal(e.UserKey, out[len(out)-1].UserKey) {
				next = bytes.Clone(e.UserKey)
				return false
			}
			out = append(out, copyEntry(e))
			return true
		}); err != nil {
			t.Fatal(err)
		}
		return out, next
	}
	got, _ := walk(nil, 0)
	if render(got) != render(all) {
		t.Fatalf("MapRange: %d entries, want %d", len(got), len(all))
	}
	for range 20 {
		from := fmt.Appendf(nil, "u%05d", rng.IntN(4100))
		i, _ := slices.BinarySearchFunc(all, from, func(e base.Entry, uk []byte) int { return bytes.Compare(e.UserKey, uk) })
		if got, _ := walk(from, 0); render(got) != render(all[i:]) {
			t.Fatalf("MapRange from %s: %d entries, want %d", from, len(got), len(all[i:]))
		}
	}
	// In chunks of ~100 entries, resuming where the last chunk stopped.
	var chunks []base.Entry
	var from []byte
	for {
		part, next := walk(from, 100)
		chunks = append(chunks, part...)
		if next == nil {
			break
		}
		from = next
	}
	if render(chunks) != render(all) {
		t.Fatalf("MapRange in chunks: %d entries, want %d", len(chunks), len(all))
	}
}
