package fresh

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/strata-db/strata/memory"
)

// modelState is the Go-map model of a Table: KV values, lists, maps; a
// missing KV/list/map entry with deleted[k] set is "Deleted".
type modelState struct {
	kv      map[string]string
	kvDel   map[string]bool
	lists   map[string][]string
	listDel map[string]bool
	maps    map[string]map[string]string
}

// TestModel drives a Table with random operations against a Go map model,
// with random Seal calls and small segments (many seals). Run with
// -seed=N to replay; the seed is printed.
func TestModel(t *testing.T) {
	seed := *seedFlag
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	t.Logf("seed %d (replay with -seed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 7))
	tb, _ := newTestTable(t, 8<<30, memory.SegmentSize16M, 16<<10)
	m := modelState{map[string]string{}, map[string]bool{}, map[string][]string{}, map[string]bool{}, map[string]map[string]string{}}
	val := func() string {
		n := rng.IntN(60)
		if rng.IntN(20) == 0 {
			n = rng.IntN(3000)
		}
		return strings.Repeat(string(rune('a'+rng.IntN(26))), n) + fmt.Sprint(rng.IntN(1000))
	}
	kvKey := func() string { return fmt.Sprintf("kv%d", rng.IntN(200)) }
	lKey := func() string { return fmt.Sprintf("list%d", rng.IntN(30)) }
	mKey := func() string { return fmt.Sprintf("map%d", rng.IntN(10)) }
	uKey := func() string { return fmt.Sprintf("u%d", rng.IntN(40)) }
	b := func(s string) []byte { return []byte(s) }
	ops := 20000
	if testing.Short() {
		ops = 3000
	}
	for i := 0; i < ops; i++ {
		var desc string
		switch p := rng.IntN(100); {
		case p < 1:
			desc = "seal"
			must(t, tb.Seal())
		case p < 15:
			k, v := kvKey(), val()
			desc = "put " + k
			must(t, tb.Put(hashOf(b(k)), b(k), b(v)))
			m.kv[k] = v
			delete(m.kvDel, k)
		case p < 20:
			k := kvKey()
			desc = "delete " + k
			must(t, tb.Delete(hashOf(b(k)), b(k)))
			delete(m.kv, k)
			m.kvDel[k] = true
		case p < 30:
			k := kvKey()
			desc = "get " + k
			v, st := tb.Get(hashOf(b(k)), b(k))
			if w, ok := m.kv[k]; ok != (st == Found) || string(v) != w || (!ok && m.kvDel[k] != (st == Deleted)) {
				t.Fatalf("op %d %s: got %q %v, model %q %v del=%v", i, desc, v, st, w, ok, m.kvDel[k])
			}
		case p < 42:
			k, v := lKey(), val()
			desc = "append " + k
			must(t, tb.ListAppend(hashOf(b(k)), b(k), b(v)))
			m.lists[k] = append(m.lists[k], v)
		case p < 46:
			k := lKey()
			var v string
			if rng.IntN(4) > 0 {
				v = val()
			}
			desc = "replace " + k
			must(t, tb.ListReplace(hashOf(b(k)), b(k), b(v)))
			if v == "" {
				delete(m.lists, k)
				m.listDel[k] = true
			} else {
				m.lists[k] = []string{v}
			}
		case p < 48:
			k := lKey()
			desc = "listdelete " + k
			must(t, tb.ListDelete(hashOf(b(k)), b(k)))
			delete(m.lists, k)
			m.listDel[k] = true
		case p < 55:
			k := lKey()
			desc = "listget " + k
			got, st, _ := tb.ListGet(hashOf(b(k)), b(k), nil)
			var gs []string
			for _, x := range got {
				gs = append(gs, string(x))
			}
			w := m.lists[k]
			// Batches are concatenable: appends in place join them.
			if strings.Join(gs, "") != strings.Join(w, "") || (len(w) > 0) != (st == Found) ||
				(len(w) == 0 && m.listDel[k] != (st == Deleted)) {
				t.Fatalf("op %d %s: got %q %v, model %q del=%v", i, desc, gs, st, w, m.listDel[k])
			}
		case p < 70:
			mk, uk, v := mKey(), uKey(), val()
			desc = "mapput " + mk + "/" + uk
			must(t, tb.MapPut(hashOf(b(mk)), b(mk), hashOf(b(uk)), b(uk), b(v)))
			if m.maps[mk] == nil {
				m.maps[mk] = map[string]string{}
			}
			m.maps[mk][uk] = v
		case p < 78:
			mk, uk := mKey(), uKey()
			desc = "mapremove " + mk + "/" + uk
			must(t, tb.MapRemove(hashOf(b(mk)), b(mk), hashOf(b(uk)), b(uk)))
			delete(m.maps[mk], uk)
		case p < 79:
			mk := mKey()
			desc = "mapclear " + mk
			must(t, tb.MapClear(hashOf(b(mk)), b(mk)))
			delete(m.maps, mk)
		case p < 90:
			mk, uk := mKey(), uKey()
			desc = "mapget " + mk + "/" + uk
			v, st := tb.MapGet(hashOf(b(mk)), b(mk), hashOf(b(uk)), b(uk))
			w, ok := m.maps[mk][uk]
			if ok != (st == Found) || string(v) != w {
				t.Fatalf("op %d %s: got %q %v, model %q %v", i, desc, v, st, w, ok)
			}
		default:
			mk := mKey()
			desc = "mapiter " + mk
			it := tb.MapIter(hashOf(b(mk)), b(mk))
			var got []string
			removeAt := rng.IntN(8)
			for it.Next() {
				uk := string(it.UserKey())
				got = append(got, uk+"="+string(it.Value()))
				if len(got) == removeAt { // write during iteration
					if rng.IntN(2) == 0 {
						must(t, tb.MapRemove(hashOf(b(mk)), b(mk), hashOf(b(uk)), b(uk)))
						delete(m.maps[mk], uk)
					} else {
						v := val()
						must(t, tb.MapPut(hashOf(b(mk)), b(mk), hashOf(b(uk)), b(uk), b(v)))
						m.maps[mk][uk] = v
						got[len(got)-1] = "" // value changed after it was read
					}
				}
			}
			var want []string
			for uk, v := range m.maps[mk] {
				want = append(want, uk+"="+v)
			}
			checkIter(t, i, desc, got, want)
		}
		if i%2000 == 0 {
			if err := tb.Verify(); err != nil {
				t.Fatalf("op %d %s: %v", i, desc, err)
			}
		}
	}
	must(t, tb.Verify())
	st := tb.Stats()
	t.Logf("stats %+v", st)
	if st.Segments < 10 {
		t.Fatalf("model test should seal many segments, got %+v", st)
	}
}

// checkIter compares an iteration (entries "k=v"; "" for an entry whose
// value was rewritten during iteration) with the model taken after it.
func checkIter(t *testing.T, i int, desc string, got, want []string) {
	t.Helper()
	wantKeys := map[string]string{}
	for _, w := range want {
		k, v, _ := strings.Cut(w, "=")
		wantKeys[k] = v
	}
	seen := map[string]bool{}
	n := 0
	for _, g := range got {
		if g == "" {
			n++
			continue
		}
		k, v, _ := strings.Cut(g, "=")
		if seen[k] {
			t.Fatalf("op %d %s: %q yielded twice", i, desc, k)
		}
		seen[k] = true
		if w, ok := wantKeys[k]; ok && w != v {
			t.Fatalf("op %d %s: %q = %q, model %q", i, desc, k, v, w)
		}
		if _, ok := wantKeys[k]; ok {
			n++
		}
	}
	if n != len(wantKeys) {
		sort.Strings(got)
		sort.Strings(want)
		t.Fatalf("op %d %s: iterated %q, model %q", i, desc, got, want)
	}
}

// TestBudgetExhausted fills a Table until the budget refuses a segment or
// an index: the error wraps memory.ErrMemoryBudget, nothing is written by
// the failed call, and everything written before stays readable.
func TestBudgetExhausted(t *testing.T) {
	tb, p := newTestTable(t, 2*memory.SegmentSize16M+64<<10, memory.SegmentSize16M, 0)
	v := bytes.Repeat([]byte("v"), 1000)
	var n int
	var err error
	for n = 0; ; n++ {
		k := []byte(fmt.Sprint("key", n))
		if err = tb.Put(hashOf(k), k, v); err != nil {
			break
		}
	}
	if !errors.Is(err, memory.ErrMemoryBudget) {
		t.Fatalf("after %d puts: %v", n, err)
	}
	seq := tb.Seq()
	if err := tb.ListAppend(1, []byte("l"), v); !errors.Is(err, memory.ErrMemoryBudget) {
		t.Fatalf("list append: %v", err)
	}
	if tb.Seq() != seq {
		t.Fatal("failed writes changed Seq")
	}
	for i := 0; i < n; i++ {
		k := []byte(fmt.Sprint("key", i))
		if got, st := tb.Get(hashOf(k), k); st != Found || !bytes.Equal(got, v) {
			t.Fatalf("key %d unreadable after budget error: %v", i, st)
		}
	}
	k := []byte("key0")
	must(t, tb.Put(hashOf(k), k, []byte("small"))) // in place still works
	must(t, tb.Verify())
	if u := p.Budget().Used(); u > p.Budget().Limit() {
		t.Fatalf("budget overshoot %d", u)
	}
}
