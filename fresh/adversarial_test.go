package fresh

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/strata-db/strata/memory"
)

// TestCollidingHashes gives every key of every family the same hash (so the
// same tag, the same h24 and the same home group), and map entries the same
// user-key hash: lookups must fall back on the key bytes, across index
// growth and seals.
func TestCollidingHashes(t *testing.T) {
	tb, _ := newTestTable(t, 1<<30, memory.SegmentSize16M, 64<<10)
	const h = 0xDEADBEEF_12345678
	const n = 700 // > one index's growAt (448) in one segment: forces growth with one home group
	kv := func(i int) []byte { return []byte(fmt.Sprintf("kv%d", i)) }
	lk := func(i int) []byte { return []byte(fmt.Sprintf("l%d", i)) }
	uk := func(i int) []byte { return []byte(fmt.Sprintf("u%d", i)) }
	m := []byte("map")
	for i := 0; i < n; i++ {
		must(t, tb.Put(h, kv(i), kv(i)))
		must(t, tb.ListAppend(h, lk(i%50), lk(i)))
		must(t, tb.MapPut(h, m, h, uk(i), uk(i)))
		if i%3 == 0 {
			must(t, tb.Delete(h, kv(i)))
			must(t, tb.MapRemove(h, m, h, uk(i)))
		}
		if i == n/2 {
			must(t, tb.Seal())
		}
	}
	must(t, tb.Put(h, nil, []byte("empty key"))) // the empty key collides too
	for i := 0; i < n; i++ {
		v, st := tb.Get(h, kv(i))
		mv, mst := tb.MapGet(h, m, h, uk(i))
		if i%3 == 0 {
			if st != Deleted || mst != Deleted {
				t.Fatalf("%d: deleted key reads %q %v / %q %v", i, v, st, mv, mst)
			}
			continue
		}
		if st != Found || !bytes.Equal(v, kv(i)) || mst != Found || !bytes.Equal(mv, uk(i)) {
			t.Fatalf("%d: %q %v / %q %v", i, v, st, mv, mst)
		}
	}
	for j := 0; j < 50; j++ {
		got, st, _ := tb.ListGet(h, lk(j), nil)
		var want [][]byte
		for i := j; i < n; i += 50 {
			want = append(want, lk(i))
		}
		// Batches are concatenable: appends in place join them.
		if st != Found || !bytes.Equal(bytes.Join(got, nil), bytes.Join(want, nil)) {
			t.Fatalf("list %d: %q %v", j, got, st)
		}
	}
	if v, st := tb.Get(h, nil); st != Found || string(v) != "empty key" {
		t.Fatalf("empty key: %q %v", v, st)
	}
	it := tb.MapIter(h, m)
	c := 0
	for it.Next() {
		c++
	}
	if want := n - (n+2)/3; c != want {
		t.Fatalf("iterated %d entries, want %d", c, want)
	}
	must(t, tb.Verify())
}

// TestEntryLookupHitsShortRecordAtSegmentEnd: a map-entry lookup whose
// entry hash has the tag and h24 of a 16-byte key-level record lying in the
// last bytes of a segment must not read past the segment (an entry header
// is 28 bytes).
func TestEntryLookupHitsShortRecordAtSegmentEnd(t *testing.T) {
	const limit = 1024
	tb, _ := newTestTable(t, 1<<30, memory.SegmentSize16M, limit)
	hm, hu := uint64(0x1111_2222_3333_4444), uint64(0x5555_6666_7777_8888)
	must(t, tb.MapPut(hm, []byte("m"), hu, []byte("a"), []byte("x")))
	_, hdr, _ := tb.active.mapHeader(hm, []byte("m"))
	if hdr == 0 {
		t.Fatal("no header")
	}
	// Fill up to limit-16 with values, then a 16-byte record (empty key,
	// empty value) whose hash collides with the entry hash of user key "b".
	for i := 0; tb.active.used < limit-16; i++ {
		room := int(limit - 16 - tb.active.used)
		n := room - (keyHdrSize + 1)
		if n > 256 {
			n = min(256, room-2*(keyHdrSize+1))
		}
		must(t, tb.Put(uint64(i), []byte{byte('A' + i)}, make([]byte, n)))
	}
	if tb.active.used != limit-16 {
		t.Fatalf("used %d", tb.active.used)
	}
	hb := uint64(0x9999_AAAA_0000_0000)
	must(t, tb.Put(entryHash(hdr, uint32(hb>>32)), nil, nil))
	if tb.active.used != limit {
		t.Fatalf("used %d, want %d", tb.active.used, limit)
	}
	if _, st := tb.MapGet(hm, []byte("m"), hb, []byte("b")); st != Absent {
		t.Fatalf("b: %v", st)
	}
	if v, st := tb.MapGet(hm, []byte("m"), hu, []byte("a")); st != Found || string(v) != "x" {
		t.Fatalf("a: %q %v", v, st)
	}
	must(t, tb.MapPut(hm, []byte("m"), hb, []byte("b"), []byte("y"))) // rolls a segment
	must(t, tb.MapRemove(hm, []byte("m"), hb, []byte("b")))
	if _, st := tb.MapGet(hm, []byte("m"), hb, []byte("b")); st != Deleted {
		t.Fatalf("b after remove: %v", st)
	}
	must(t, tb.Verify())
}

// TestLimitsWriteNothing: keys of 0 and MaxKeySize bytes, values of 0 and
// exactly the limit work for every family; one byte over fails with the
// typed error, does not advance Seq and leaves the table consistent.
func TestLimitsWriteNothing(t *testing.T) {
	tb, _ := newTestTable(t, 1<<30, memory.SegmentSize16M, 0)
	maxV := memory.SegmentSize16M / 4
	bigKey := bytes.Repeat([]byte("K"), MaxKeySize)
	ok := [][2][]byte{{nil, nil}, {nil, make([]byte, maxV)}, {bigKey, nil}, {bigKey, make([]byte, maxV)}}
	for i, c := range ok {
		k, v := c[0], c[1]
		must(t, tb.Put(uint64(i), k, v))
		if got, st := tb.Get(uint64(i), k); st != Found || len(got) != len(v) {
			t.Fatalf("case %d: %v %d", i, st, len(got))
		}
		if len(v) > 0 {
			must(t, tb.ListAppend(uint64(i)+100, k, v))
			must(t, tb.ListReplace(uint64(i)+100, k, v))
		}
		must(t, tb.MapPut(uint64(i)+200, k, uint64(i), k, v))
		if got, st := tb.MapGet(uint64(i)+200, k, uint64(i), k); st != Found || len(got) != len(v) {
			t.Fatalf("map case %d: %v %d", i, st, len(got))
		}
	}
	must(t, tb.Verify())
	seq, stats := tb.Seq(), tb.Stats()
	over := make([]byte, maxV+1)
	tooLongKey := make([]byte, MaxKeySize+1)
	for name, err := range map[string]error{
		"put":             tb.Put(1, []byte("k"), over),
		"put key":         tb.Put(1, tooLongKey, nil),
		"delete key":      tb.Delete(1, tooLongKey),
		"append":          tb.ListAppend(1, []byte("k"), over),
		"append key":      tb.ListAppend(1, tooLongKey, []byte("x")),
		"replace":         tb.ListReplace(1, []byte("k"), over),
		"replace key":     tb.ListReplace(1, tooLongKey, []byte("x")),
		"listdelete key":  tb.ListDelete(1, tooLongKey),
		"mapput":          tb.MapPut(1, []byte("m"), 2, []byte("u"), over),
		"mapput mapkey":   tb.MapPut(1, tooLongKey, 2, []byte("u"), nil),
		"mapput userkey":  tb.MapPut(1, []byte("m"), 2, tooLongKey, nil),
		"mapremove key":   tb.MapRemove(1, []byte("m"), 2, tooLongKey),
		"mapremove mkey":  tb.MapRemove(1, tooLongKey, 2, []byte("u")),
		"mapclear mapkey": tb.MapClear(1, tooLongKey),
	} {
		want := ErrValueTooLarge
		if strings.Contains(name, "key") {
			want = ErrKeyTooLarge
		}
		if !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", name, err, want)
		}
	}
	if tb.Seq() != seq || tb.Stats() != stats {
		t.Fatalf("failed writes changed the table: seq %d -> %d, %+v -> %+v", seq, tb.Seq(), stats, tb.Stats())
	}
	must(t, tb.Verify())
}

// TestInPlaceShrinkGrow: a value rewritten smaller keeps its capacity, can
// grow back into it in place, and moves when it outgrows it; deletes and
// re-puts keep reading right.
func TestInPlaceShrinkGrow(t *testing.T) {
	tb, _ := newTestTable(t, 1<<30, memory.SegmentSize16M, 0)
	k := []byte("key")
	h := hashOf(k)
	check := func(want string, st Status) {
		t.Helper()
		v, s := tb.Get(h, k)
		if s != st || string(v) != want {
			t.Fatalf("got %q %v, want %q %v", v, s, want, st)
		}
	}
	steps := []int{100, 10, 0, 100, 101, 1, 70000, 3, 70000, 0}
	for _, n := range steps {
		v := strings.Repeat(fmt.Sprint(n%10), n)
		must(t, tb.Put(h, k, []byte(v)))
		check(v, Found)
		must(t, tb.Delete(h, k))
		check("", Deleted)
		must(t, tb.Put(h, k, []byte(v)))
		check(v, Found)
		must(t, tb.Verify())
	}
	must(t, tb.ListReplace(h+1, k, []byte(strings.Repeat("x", 100))))
	for _, n := range []int{10, 100, 101, 1} {
		b := strings.Repeat("r", n)
		must(t, tb.ListReplace(h+1, k, []byte(b)))
		if got, st, _ := tb.ListGet(h+1, k, nil); st != Found || len(got) != 1 || string(got[0]) != b {
			t.Fatalf("replace %d: %q %v", n, got, st)
		}
	}
	must(t, tb.Verify())
}

// TestListsAcrossSegments appends thousands of batches across many
// segments and replaces lists in the same and in older segments.
func TestListsAcrossSegments(t *testing.T) {
	tb, _ := newTestTable(t, 4<<30, memory.SegmentSize16M, 2<<10)
	const lists, n = 5, 3000
	want := make([][]string, lists)
	key := func(l int) []byte { return []byte(fmt.Sprint("list", l)) }
	for i := 0; i < n; i++ {
		l := i % lists
		b := fmt.Sprintf("e%d", i)
		must(t, tb.ListAppend(hashOf(key(l)), key(l), []byte(b)))
		want[l] = append(want[l], b)
		switch {
		case i == 1000: // replace after appends in the same segment
			must(t, tb.ListReplace(hashOf(key(0)), key(0), []byte("r0")))
			want[0] = []string{"r0"}
		case i == 2000: // list 1's appends span older segments only now
			must(t, tb.Seal())
			must(t, tb.ListReplace(hashOf(key(1)), key(1), []byte("r1")))
			want[1] = []string{"r1"}
		case i == 2500:
			must(t, tb.ListDelete(hashOf(key(2)), key(2)))
			want[2] = nil
		}
	}
	if st := tb.Stats(); st.Segments < 5 {
		t.Fatalf("want many segments: %+v", st)
	}
	dst := make([][]byte, 0, 4096)
	for l := 0; l < lists; l++ {
		got, st, _ := tb.ListGet(hashOf(key(l)), key(l), dst[:0])
		var gs []string
		for _, g := range got {
			gs = append(gs, string(g))
		}
		if st != Found || strings.Join(gs, "") != strings.Join(want[l], "") {
			t.Fatalf("list %d: %v %d batches, want %d", l, st, len(gs), len(want[l]))
		}
	}
	must(t, tb.Verify())
}

// TestManySeals seals after nearly every write.
func TestManySeals(t *testing.T) {
	tb, _ := newTestTable(t, 8<<30, memory.SegmentSize16M, 4096)
	want := map[string]string{}
	for i := 0; i < 300; i++ {
		k := fmt.Sprint("k", i%37)
		v := fmt.Sprint("v", i)
		must(t, tb.Put(hashOf([]byte(k)), []byte(k), []byte(v)))
		must(t, mput(tb, "m", k, v))
		want[k] = v
		must(t, tb.Seal())
		must(t, tb.Seal()) // twice: a no-op
	}
	for k, v := range want {
		if got, st := tb.Get(hashOf([]byte(k)), []byte(k)); st != Found || string(got) != v {
			t.Fatalf("%s: %q %v", k, got, st)
		}
		if got, st := mget(tb, "m", k); st != Found || got != v {
			t.Fatalf("map %s: %q %v", k, got, st)
		}
	}
	if c := strings.Count(mall(t, tb, "m"), "="); c != len(want) {
		t.Fatalf("iterated %d, want %d", c, len(want))
	}
	must(t, tb.Verify())
}

// TestBudgetTiny: with a budget of one segment and its first index, the
// write that needs a second index or segment fails with a wrapped
// memory.ErrMemoryBudget; acknowledged writes of every family read back
// and the table stays usable and consistent.
func TestBudgetTiny(t *testing.T) {
	for _, limit := range []int64{memory.SegmentSize16M + 4096, memory.SegmentSize16M + 3*4096, 2*memory.SegmentSize16M + 4096} {
		t.Run(fmt.Sprint("budget=", limit), func(t *testing.T) {
			tb, _ := newTestTable(t, limit, memory.SegmentSize16M, 0)
			type w struct{ fam, k, v string }
			var acked []w
			var err error
			val := strings.Repeat("v", 2000)
			for i := 0; err == nil; i++ {
				k := fmt.Sprint("k", i)
				seq := tb.Seq()
				switch i % 3 {
				case 0:
					err = tb.Put(hashOf([]byte(k)), []byte(k), []byte(val))
				case 1:
					err = tb.ListAppend(hashOf([]byte("L")), []byte("L"), []byte(k))
				case 2:
					err = mput(tb, "M", k, val)
				}
				if err == nil {
					acked = append(acked, w{[]string{"kv", "list", "map"}[i%3], k, val})
				} else if tb.Seq() != seq {
					t.Fatalf("failed write advanced Seq")
				}
				if i > 1e6 {
					t.Fatal("budget never exhausted")
				}
			}
			if !errors.Is(err, memory.ErrMemoryBudget) {
				t.Fatalf("after %d writes: %v", len(acked), err)
			}
			must(t, tb.Verify())
			lb, _, _ := tb.ListGet(hashOf([]byte("L")), []byte("L"), nil)
			lst := string(bytes.Join(lb, nil)) // batches are concatenable
			for _, a := range acked {
				switch a.fam {
				case "kv":
					if v, st := tb.Get(hashOf([]byte(a.k)), []byte(a.k)); st != Found || string(v) != a.v {
						t.Fatalf("%s lost: %v", a.k, st)
					}
				case "list":
					if !strings.HasPrefix(lst, a.k) {
						t.Fatalf("list element %s lost", a.k)
					}
					lst = lst[len(a.k):]
				case "map":
					if v, st := mget(tb, "M", a.k); st != Found || v != a.v {
						t.Fatalf("map %s lost: %v", a.k, st)
					}
				}
			}
			// Still usable: in-place writes and every failing family again.
			must(t, tb.Put(hashOf([]byte("k0")), []byte("k0"), []byte("small")))
			for _, e := range []error{
				tb.Put(1, []byte("new"), []byte(val)),
				tb.ListAppend(2, []byte("new"), []byte("x")),
				mput(tb, "new", "u", "v"),
				tb.MapClear(3, []byte("new")),
			} {
				if e != nil && !errors.Is(e, memory.ErrMemoryBudget) {
					t.Fatalf("unexpected error %v", e)
				}
			}
			must(t, tb.Verify())
		})
	}
}
