package base

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// ent is shorthand for an entry of order 1: key "k" unless set.
func ent(kind Kind, seq uint64, uk, val string) Entry {
	e := Entry{Order: 1, Key: []byte("k"), Seq: seq, Kind: kind}
	if uk != "" {
		e.UserKey = []byte(uk)
	}
	if val != "" {
		e.Value = []byte(val)
	}
	return e
}

func withKey(e Entry, order uint64, key string) Entry {
	e.Order, e.Key = order, []byte(key)
	return e
}

func fmtEntries(es []Entry) string {
	var b strings.Builder
	for _, e := range es {
		fmt.Fprintf(&b, "(%d %s/%s %v@%d %q) ", e.Order, e.Key, e.UserKey, e.Kind, e.Seq, e.Value)
	}
	return b.String()
}

func sameEntries(a, b []Entry) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := &a[i], &b[i]
		if x.Order != y.Order || x.Seq != y.Seq || x.Kind != y.Kind || !bytes.Equal(x.Key, y.Key) ||
			!bytes.Equal(x.UserKey, y.UserKey) || !bytes.Equal(x.Value, y.Value) {
			return false
		}
	}
	return true
}

func TestCompare(t *testing.T) {
	e := func(order uint64, key, uk string, seq uint64) *Entry {
		return &Entry{Order: order, Key: []byte(key), UserKey: []byte(uk), Seq: seq}
	}
	for _, c := range []struct {
		name string
		a, b *Entry
		want int
	}{
		{"order first", e(1, "z", "z", 1), e(2, "a", "", 9), -1},
		{"order above", e(3, "a", "", 1), e(2, "z", "", 1), 1},
		{"key", e(1, "a", "z", 1), e(1, "b", "", 9), -1},
		{"key prefix", e(1, "a", "", 1), e(1, "ab", "", 9), -1},
		{"user key", e(1, "a", "a", 1), e(1, "a", "b", 9), -1},
		{"empty user key first", e(1, "a", "", 1), e(1, "a", "\x00", 9), -1},
		{"newer first", e(1, "a", "u", 9), e(1, "a", "u", 1), -1},
		{"older after", e(1, "a", "u", 1), e(1, "a", "u", 9), 1},
		{"same version", e(1, "a", "u", 5), e(1, "a", "u", 5), 0},
		{"order is unsigned", e(1<<63, "a", "", 1), e(1, "a", "", 1), 1},
	} {
		if got := Compare(c.a, c.b); got != c.want {
			t.Errorf("%s: Compare = %d, want %d", c.name, got, c.want)
		}
		if got := Compare(c.b, c.a); got != -c.want {
			t.Errorf("%s: Compare reversed = %d, want %d", c.name, got, -c.want)
		}
		wantKey := c.want
		if c.a.Order != c.b.Order || bytes.Equal(c.a.Key, c.b.Key) && bytes.Equal(c.a.UserKey, c.b.UserKey) {
			wantKey = 0
		}
		if c.a.Order == c.b.Order {
			if got := CompareKey(c.a.Key, c.a.UserKey, c.b.Key, c.b.UserKey); got != wantKey {
				t.Errorf("%s: CompareKey = %d, want %d", c.name, got, wantKey)
			}
		}
		if got, want := SameKey(c.a, c.b), c.a.Order == c.b.Order && wantKey == 0; got != want {
			t.Errorf("%s: SameKey = %v, want %v", c.name, got, want)
		}
	}
}

type sliceIter struct {
	es  []Entry
	i   int
	cur Entry
	err error
}

func (s *sliceIter) Next() bool {
	if s.i == len(s.es) {
		return false
	}
	s.cur = s.es[s.i] // a copy: the merge must not keep a pointer past Next
	s.i++
	return true
}
func (s *sliceIter) Entry() *Entry { return &s.cur }
func (s *sliceIter) Err() error {
	if s.i == len(s.es) {
		return s.err
	}
	return nil
}

func TestMergingIterMatchesSortedUnion(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	var m MergingIter
	for iter := 0; iter < 300; iter++ {
		nsrc := rng.IntN(6)
		srcs := make([]Iterator, nsrc)
		type tagged struct {
			e   Entry
			src int
		}
		var all []tagged
		for s := range srcs {
			var es []Entry
			for i := rng.IntN(40); i > 0; i-- {
				e := Entry{Order: uint64(rng.IntN(4)), Key: []byte{byte('a' + rng.IntN(3))}, Seq: uint64(rng.IntN(8)), Kind: KindValue}
				if rng.IntN(2) == 0 {
					e.UserKey = []byte{byte('a' + rng.IntN(2))}
				}
				es = append(es, e)
			}
			slices.SortFunc(es, func(a, b Entry) int { return Compare(&a, &b) })
			es = slices.CompactFunc(es, func(a, b Entry) bool { return Compare(&a, &b) == 0 })
			for _, e := range es {
				all = append(all, tagged{e, s})
			}
			srcs[s] = &sliceIter{es: es}
		}
		// Equal entries (one version in two sources) come lower source first.
		slices.SortStableFunc(all, func(a, b tagged) int {
			if c := Compare(&a.e, &b.e); c != 0 {
				return c
			}
			return a.src - b.src
		})
		m.Init(srcs)
		i := 0
		for m.Next() {
			if i == len(all) {
				t.Fatalf("iter %d: more than %d entries", iter, len(all))
			}
			if e := m.Entry(); Compare(e, &all[i].e) != 0 || m.Source() != all[i].src {
				t.Fatalf("iter %d entry %d: got %s from %d, want %s from %d", iter, i, fmtEntries([]Entry{*e}), m.Source(), fmtEntries([]Entry{all[i].e}), all[i].src)
			}
			i++
		}
		if i != len(all) || m.Err() != nil {
			t.Fatalf("iter %d: %d of %d entries, err %v", iter, i, len(all), m.Err())
		}
	}
}

func TestMergingIterStopsAtError(t *testing.T) {
	boom := errors.New("boom")
	a := &sliceIter{es: []Entry{{Order: 1}, {Order: 5}}}
	b := &sliceIter{es: []Entry{{Order: 2}}, err: boom}
	m := NewMergingIter(a, b)
	var got []uint64
	for m.Next() {
		got = append(got, m.Entry().Order)
	}
	if !errors.Is(m.Err(), boom) || !slices.Equal(got, []uint64{1, 2}) {
		t.Fatalf("got %v, err %v", got, m.Err())
	}
	if m.Next() {
		t.Fatal("Next after an error")
	}
	// An error before the first entry.
	m.Init([]Iterator{&sliceIter{err: boom}, &sliceIter{es: []Entry{{Order: 1}}}})
	if m.Next() || !errors.Is(m.Err(), boom) {
		t.Fatalf("first Next: err %v", m.Err())
	}
}
