package fresh

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/strata-db/strata/memory"
)

func mput(tb *Table, m, k, v string) error {
	return tb.MapPut(hashOf([]byte(m)), []byte(m), hashOf([]byte(k)), []byte(k), []byte(v))
}
func mrem(tb *Table, m, k string) error {
	return tb.MapRemove(hashOf([]byte(m)), []byte(m), hashOf([]byte(k)), []byte(k))
}
func mget(tb *Table, m, k string) (string, Status) {
	v, st := tb.MapGet(hashOf([]byte(m)), []byte(m), hashOf([]byte(k)), []byte(k))
	return string(v), st
}

// mall returns the iterated entries "k=v" sorted, and fails on a duplicate.
func mall(t testing.TB, tb *Table, m string) string {
	t.Helper()
	it := tb.MapIter(hashOf([]byte(m)), []byte(m))
	seen := map[string]bool{}
	var out []string
	for it.Next() {
		k := string(it.UserKey())
		if seen[k] {
			t.Fatalf("iterator yielded %q twice", k)
		}
		seen[k] = true
		out = append(out, k+"="+string(it.Value()))
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

func TestMap(t *testing.T) {
	tests := []struct {
		name string
		ops  []string // "p:k=v", "r:k", "c" (clear), "s" (seal), "d" (key-level Delete of the map key)
		get  string   // user key to MapGet
		want string
		st   Status
		all  string // iteration result
		// complete: the iteration stops at a base header or key tombstone
		complete bool
	}{
		{name: "absent", get: "a", st: Absent},
		{name: "put/get", ops: []string{"p:a=1", "p:b=2"}, get: "a", want: "1", st: Found, all: "a=1,b=2"},
		{name: "other user key absent", ops: []string{"p:a=1"}, get: "b", st: Absent, all: "a=1"},
		{name: "overwrite smaller", ops: []string{"p:a=123", "p:a=4"}, get: "a", want: "4", st: Found, all: "a=4"},
		{name: "overwrite larger", ops: []string{"p:a=1", "p:a=234"}, get: "a", want: "234", st: Found, all: "a=234"},
		{name: "remove", ops: []string{"p:a=1", "p:b=2", "r:a"}, get: "a", st: Deleted, all: "b=2"},
		{name: "remove then put", ops: []string{"p:a=1", "r:a", "p:a=55"}, get: "a", want: "55", st: Found, all: "a=55"},
		{name: "clear", ops: []string{"p:a=1", "p:b=2", "c"}, get: "a", st: Deleted, all: "", complete: true},
		{name: "clear then put", ops: []string{"p:a=1", "p:b=2", "c", "p:b=3"}, get: "b", want: "3", st: Found, all: "b=3", complete: true},
		{name: "clear then put, old key", ops: []string{"p:a=1", "c", "p:b=3"}, get: "a", st: Deleted, all: "b=3", complete: true},
		{name: "across seal", ops: []string{"p:a=1", "s", "p:b=2"}, get: "a", want: "1", st: Found, all: "a=1,b=2"},
		{name: "newer segment wins", ops: []string{"p:a=1", "s", "p:a=2"}, get: "a", want: "2", st: Found, all: "a=2"},
		{name: "remove across seal", ops: []string{"p:a=1", "p:b=2", "s", "r:a"}, get: "a", st: Deleted, all: "b=2"},
		{name: "put over sealed remove", ops: []string{"p:a=1", "r:a", "s", "p:a=3"}, get: "a", want: "3", st: Found, all: "a=3"},
		{name: "clear across seal", ops: []string{"p:a=1", "p:b=2", "s", "c", "p:c=3"}, get: "b", st: Deleted, all: "c=3", complete: true},
		{name: "clear in sealed, older hidden", ops: []string{"p:a=1", "s", "c", "p:b=2", "s", "p:c=3"}, get: "a", st: Deleted, all: "b=2,c=3", complete: true},
		{name: "three segments", ops: []string{"p:a=1", "p:b=1", "p:c=1", "s", "p:b=2", "r:c", "s", "p:d=3", "p:a=3"}, get: "c", st: Deleted, all: "a=3,b=2,d=3"},
		{name: "key tombstone shadows map", ops: []string{"p:a=1", "s", "d"}, get: "a", st: Deleted, all: "", complete: true},
		{name: "put after key tombstone", ops: []string{"p:a=1", "s", "d", "p:b=2"}, get: "a", st: Deleted, all: "b=2", complete: true},
		{name: "remove absent after clear is no-op", ops: []string{"c", "r:a"}, get: "a", st: Deleted, all: "", complete: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tb, _ := newTestTable(t, 1<<30, memory.SegmentSize16M, 0)
			m := "map"
			for _, o := range tc.ops {
				switch {
				case o == "s":
					must(t, tb.Seal())
				case o == "c":
					must(t, tb.MapClear(hashOf([]byte(m)), []byte(m)))
				case o == "d":
					must(t, tb.Delete(hashOf([]byte(m)), []byte(m)))
				case o[0] == 'p':
					kv := strings.SplitN(o[2:], "=", 2)
					must(t, mput(tb, m, kv[0], kv[1]))
				case o[0] == 'r':
					must(t, mrem(tb, m, o[2:]))
				}
			}
			if v, st := mget(tb, m, tc.get); v != tc.want || st != tc.st {
				t.Fatalf("MapGet(%q) = %q %v, want %q %v", tc.get, v, st, tc.want, tc.st)
			}
			if got := mall(t, tb, m); got != tc.all {
				t.Fatalf("iteration = %q, want %q", got, tc.all)
			}
			it := tb.MapIter(hashOf([]byte(m)), []byte(m))
			for it.Next() {
			}
			if it.Complete() != tc.complete {
				t.Fatalf("Complete() = %v, want %v", it.Complete(), tc.complete)
			}
			if got := mall(t, tb, "other"); got != "" {
				t.Fatalf("other map = %q", got)
			}
			must(t, tb.Verify())
		})
	}
}

// TestMapIterWrites removes or rewrites the current entry during iteration,
// across segments, and checks every entry is seen exactly once and the
// writes took effect.
func TestMapIterWrites(t *testing.T) {
	for _, mode := range []string{"remove", "put-smaller", "put-larger", "remove-every-other"} {
		t.Run("mode="+mode, func(t *testing.T) {
			tb, _ := newTestTable(t, 1<<30, memory.SegmentSize16M, 4096)
			const n = 300
			want := map[string]string{}
			for i := 0; i < n; i++ {
				k := fmt.Sprintf("k%03d", i)
				must(t, mput(tb, "m", k, "value-"+k))
				want[k] = "value-" + k
				if i%50 == 49 {
					must(t, tb.Seal())
				}
			}
			for i := 0; i < n; i += 7 { // older versions in older segments
				k := fmt.Sprintf("k%03d", i)
				must(t, mput(tb, "m", k, "v2-"+k))
				want[k] = "v2-" + k
			}
			if st := tb.Stats(); st.Segments < 4 {
				t.Fatalf("want several segments: %+v", st)
			}
			it := tb.MapIter(hashOf([]byte("m")), []byte("m"))
			seen := map[string]bool{}
			i := 0
			for it.Next() {
				k := string(it.UserKey())
				if seen[k] {
					t.Fatalf("%q yielded twice", k)
				}
				seen[k] = true
				if string(it.Value()) != want[k] {
					t.Fatalf("%q = %q, want %q", k, it.Value(), want[k])
				}
				switch mode {
				case "remove":
					must(t, mrem(tb, "m", k))
					delete(want, k)
				case "remove-every-other":
					if i%2 == 0 {
						must(t, mrem(tb, "m", k))
						delete(want, k)
					}
				case "put-smaller":
					must(t, mput(tb, "m", k, "s"))
					want[k] = "s"
				case "put-larger":
					v := strings.Repeat("L", 40) + k
					must(t, mput(tb, "m", k, v))
					want[k] = v
				}
				i++
			}
			if len(seen) != n {
				t.Fatalf("iterated %d entries, want %d", len(seen), n)
			}
			for i := 0; i < n; i++ {
				k := fmt.Sprintf("k%03d", i)
				v, st := mget(tb, "m", k)
				if w, ok := want[k]; ok != (st == Found) || v != w {
					t.Fatalf("after iteration %q = %q %v, want %q", k, v, st, w)
				}
			}
			var all []string
			for k, v := range want {
				all = append(all, k+"="+v)
			}
			sort.Strings(all)
			if got := mall(t, tb, "m"); got != strings.Join(all, ",") {
				t.Fatalf("second iteration differs")
			}
			must(t, tb.Verify())
		})
	}
}

func TestMapNoAlloc(t *testing.T) {
	tb, _ := newTestTable(t, 1<<30, memory.SegmentSize16M, 0)
	m := []byte("m")
	hm := hashOf(m)
	for i := 0; i < 20; i++ {
		k := []byte{byte('a' + i)}
		must(t, tb.MapPut(hm, m, hashOf(k), k, []byte("v")))
		if i%5 == 4 {
			must(t, tb.Seal())
		}
	}
	uk := []byte("c")
	hu := hashOf(uk)
	val := []byte("w")
	n := testing.AllocsPerRun(100, func() {
		it := tb.MapIter(hm, m)
		c := 0
		for it.Next() {
			c++
		}
		if c != 20 {
			panic(c)
		}
		if _, st := tb.MapGet(hm, m, hu, uk); st != Found {
			panic(st)
		}
		if err := tb.MapPut(hm, m, hu, uk, val); err != nil {
			panic(err)
		}
	})
	if n != 0 {
		t.Fatalf("map ops allocate %v per run", n)
	}
}
