package slice

import (
	"context"
	"errors"
	"testing"

	"github.com/strata-db/strata/internal/base"
)

func TestGetVersionsAcrossChain(t *testing.T) {
	e := newEnv(t, DefaultSliceSize, Options{})
	const o = 0x1234 << 40
	e.install(t, kv(o, "a", 1, "a1"), kv(o, "b", 2, "b2"), kv(o+1, "c", 3, "c3"))
	e.install(t, kv(o, "a", 5, "a5"), tomb(o, "b", 6), kv(o, "a", 4, "a4"))
	cases := []struct {
		order uint64
		key   string
		want  string
		st    Status
	}{
		{o, "a", "a5", Found},
		{o, "b", "", Deleted},
		{o + 1, "c", "c3", Found},
		{o, "c", "", Absent},     // same order, other key
		{o + 2, "a", "", Absent}, // other order
		{0, "", "", Absent},
		{^uint64(0), "z", "", Absent},
	}
	for _, c := range cases {
		v, st := e.t.Get(c.order, []byte(c.key))
		if st != c.st || string(v) != c.want {
			t.Errorf("Get(%#x, %q) = %q, %v; want %q, %v", c.order, c.key, v, st, c.want, c.st)
		}
	}
	if st := e.t.Stats(); st.Runs != 2 || st.Slices != 2 || st.Entries != 6 || st.MaxChain != 2 {
		t.Errorf("stats %+v", st)
	}
}

func TestListGet(t *testing.T) {
	e := newEnv(t, DefaultSliceSize, Options{})
	const o = 7 << 50
	e.install(t, lapp(o, "l", 1, "x"), lbase(o, "m", 2, "m0"), lapp(o, "n", 3, "n0"))
	e.install(t, lapp(o, "l", 4, "y"), lapp(o, "l", 5, "z"), lapp(o, "m", 6, "m1"), tomb(o, "n", 7))
	e.install(t, lapp(o, "n", 8, "n1"))
	cases := []struct {
		key      string
		want     string
		complete bool
	}{
		{"l", "x|y|z", false}, // operands all the way down: lower tiers may add older ones
		{"m", "m0|m1", true},
		{"n", "n1", true}, // the tombstone ends it
		{"o", "", false},
	}
	buf := make([][]byte, 0, 8)
	for _, c := range cases {
		got, complete := e.t.ListGet(o, []byte(c.key), buf[:0])
		if joined(got) != c.want || complete != c.complete {
			t.Errorf("ListGet(%q) = %q, %v; want %q, %v", c.key, joined(got), complete, c.want, c.complete)
		}
	}
	// dst's existing elements stay in front.
	got, _ := e.t.ListGet(o, []byte("m"), [][]byte{[]byte("pre")})
	if joined(got) != "pre|m0|m1" {
		t.Errorf("ListGet with a prefix = %q", joined(got))
	}
}

func TestMapGetAndIterAcrossClears(t *testing.T) {
	e := newEnv(t, DefaultSliceSize, Options{})
	const o = 3 << 60
	// run 1 (oldest): a, b, c, "" (empty user key)
	e.install(t, ment(o, "M", "a", 1, "a1"), ment(o, "M", "b", 2, "b1"), ment(o, "M", "c", 3, "c1"), ment(o, "M", "", 4, "e1"),
		ment(o, "N", "a", 5, "other map"))
	// run 2: b removed, d added
	e.install(t, mtomb(o, "M", "b", 6), ment(o, "M", "d", 7, "d2"))
	// run 3: cleared, then e added; c written before the clear in the same run
	e.install(t, ment(o, "M", "c", 8, "c3-old"), tomb(o, "M", 9), ment(o, "M", "e", 10, "e3"))
	// run 4: a re-added
	e.install(t, ment(o, "M", "a", 11, "a4"))
	get := map[string]struct {
		v  string
		st Status
	}{
		"a": {"a4", Found}, "b": {"", Deleted}, "c": {"", Deleted}, "d": {"", Deleted},
		"e": {"e3", Found}, "": {"", Deleted}, "zz": {"", Deleted},
	}
	for uk, w := range get {
		v, st := e.t.MapGet(o, []byte("M"), []byte(uk))
		if string(v) != w.v || st != w.st {
			t.Errorf("MapGet(M, %q) = %q, %v; want %q, %v", uk, v, st, w.v, w.st)
		}
	}
	if v, st := e.t.MapGet(o, []byte("N"), []byte("a")); st != Found || string(v) != "other map" {
		t.Errorf("MapGet(N, a) = %q, %v", v, st)
	}
	if _, st := e.t.MapGet(o, []byte("N"), []byte("b")); st != Absent {
		t.Errorf("MapGet(N, b) = %v, want absent", st)
	}
	it := e.t.MapIter(o, []byte("M"))
	var got []string
	for it.Next() {
		got = append(got, string(it.UserKey())+"="+string(it.Value()))
	}
	if want := "a=a4,e=e3"; joinS(got) != want || !it.Complete() || it.Err() != nil {
		t.Errorf("MapIter(M) = %q complete=%v err=%v; want %q complete", joinS(got), it.Complete(), it.Err(), want)
	}
	it = e.t.MapIter(o, []byte("N"))
	got = got[:0]
	for it.Next() {
		got = append(got, string(it.UserKey())+"="+string(it.Value()))
	}
	if joinS(got) != "a=other map" || it.Complete() {
		t.Errorf("MapIter(N) = %q complete=%v", joinS(got), it.Complete())
	}
}

func joinS(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += ","
		}
		out += x
	}
	return out
}

func TestInstallRejects(t *testing.T) {
	e := newEnv(t, DefaultSliceSize, Options{})
	e.install(t, kv(1, "a", 10, "x"))
	out, err := e.t.Build(context.Background(), iterOf(kv(1, "a", 5, "old")))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.t.Install(out); !errors.Is(err, ErrSeqOrder) {
		t.Fatalf("installing older data over newer: %v, want ErrSeqOrder", err)
	}
	e.t.Release(out)
	if _, err := e.t.Build(context.Background(), iterOf(kv(2, "a", 1, ""), kv(1, "a", 2, ""))); !errors.Is(err, ErrUnsorted) {
		t.Fatalf("unsorted build: %v", err)
	}
	if _, err := e.t.Build(context.Background(), iterOf(kv(1, "a", 1, ""), kv(1, "a", 1, ""))); !errors.Is(err, ErrUnsorted) {
		t.Fatalf("duplicate seq: %v", err)
	}
	bad := kv(1, "a", 1, "")
	bad.Kind = 9
	if _, err := e.t.Build(context.Background(), iterOf(bad)); !errors.Is(err, ErrEntry) {
		t.Fatalf("bad kind: %v", err)
	}
	bad = kv(1, "a", 1, "")
	bad.UserKey = []byte("u")
	if _, err := e.t.Build(context.Background(), iterOf(bad)); !errors.Is(err, ErrEntry) {
		t.Fatalf("user key on a value: %v", err)
	}
	if st := e.a.Stats(); st.Blocks != 1 {
		t.Fatalf("failed builds leaked blocks: %+v", st)
	}
}

func TestBuildSplitsAtBucketsAndSize(t *testing.T) {
	e := newEnv(t, MinSliceSize, Options{BucketBits: 2})
	var es []base.Entry
	val := make([]byte, 100)
	for i := 0; i < 400; i++ {
		es = append(es, base.Entry{Order: uint64(i) << 55, Seq: uint64(i + 1), Kind: base.KindValue, Key: []byte("k"), Value: val})
	}
	big := make([]byte, 3*MinSliceSize)
	big[7] = 7
	es = append(es, base.Entry{Order: 1<<63 + 5, Seq: 1000, Kind: base.KindValue, Key: []byte("big"), Value: big})
	out := e.install(t, es...)
	seen := 0
	for _, s := range out {
		if e.t.BucketOf(s.minOrder) != e.t.BucketOf(s.maxOrder) {
			t.Fatalf("slice spans buckets %d..%d", e.t.BucketOf(s.minOrder), e.t.BucketOf(s.maxOrder))
		}
		if len(s.Bytes()) > MinSliceSize && s.Len() != 1 {
			t.Fatalf("oversized slice with %d entries", s.Len())
		}
		if _, err := Decode(s.Bytes()); err != nil {
			t.Fatal(err)
		}
		seen += s.Len()
	}
	if seen != len(es) {
		t.Fatalf("%d entries in slices, want %d", seen, len(es))
	}
	if v, st := e.t.Get(1<<63+5, []byte("big")); st != Found || len(v) != len(big) || v[7] != 7 {
		t.Fatalf("oversized value: %v len %d", st, len(v))
	}
	for _, x := range es[:400] {
		if _, st := e.t.Get(x.Order, x.Key); st != Found {
			t.Fatalf("Get(%#x) = %v", x.Order, st)
		}
	}
	if st := e.a.Stats(); st.Oversized != 1 {
		t.Fatalf("allocator %+v, want one oversized region", st)
	}
}

// TestVersionsSpanSlices: many operands of one list key fill several
// slices of one run; reads and compaction keep them in order.
func TestVersionsSpanSlices(t *testing.T) {
	e := newEnv(t, MinSliceSize, Options{BucketBits: -1})
	var es []base.Entry
	want := ""
	for i := 0; i < 300; i++ {
		v := string(rune('a' + i%26))
		es = append(es, lapp(42, "list", uint64(i+1), v))
		want += v
	}
	es = append(es, lbase(42, "list", 0, "B"))
	out := e.install(t, es...)
	if len(out) < 2 {
		t.Fatalf("want the operands to span slices, got %d slice(s)", len(out))
	}
	got, complete := e.t.ListGet(42, []byte("list"), nil)
	if s := string(bytesJoin(got)); s != "B"+want || !complete {
		t.Fatalf("ListGet = %q (%v), want %q", s, complete, "B"+want)
	}
}

func bytesJoin(bs [][]byte) []byte {
	var out []byte
	for _, b := range bs {
		out = append(out, b...)
	}
	return out
}

func TestHotPathsAllocateNothing(t *testing.T) {
	e := newEnv(t, DefaultSliceSize, Options{})
	e.install(t, kv(5, "a", 1, "v"), lapp(6, "l", 2, "x"), ment(7, "m", "u", 3, "w"))
	e.install(t, kv(5, "a", 4, "v2"), lapp(6, "l", 5, "y"), ment(7, "m", "v", 6, "w2"))
	dst := make([][]byte, 0, 4)
	a, zz, l, m, v := []byte("a"), []byte("zz"), []byte("l"), []byte("m"), []byte("v")
	n := testing.AllocsPerRun(1000, func() {
		e.t.Get(5, a)
		e.t.Get(9, zz)
		dst, _ = e.t.ListGet(6, l, dst[:0])
		e.t.MapGet(7, m, v)
		it := e.t.MapIter(7, m)
		for it.Next() {
		}
	})
	if n != 0 {
		t.Fatalf("hot paths allocate %.1f times per run", n)
	}
}
