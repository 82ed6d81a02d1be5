package strata

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-db/strata/internal/base"
)

// ambiguousMap returns a Store with the hot tier, a map state with values of codec c, a key k
// and k in namespaces "a" and "ab": the map entries (a, "b") and (ab, "") have the same tier
// key bytes, since a namespace is the composite key's unframed tail.
func ambiguousMap[V any](t *testing.T, c Codec[V]) (*Store, *MapState[string, V], Key, Key, Key) {
	s := hotStore(t, 4<<20, false)
	m, err := NewMapState(s, MapDescriptor[string, V]{Name: "m", KeyCodec: String, ValueCodec: c})
	okT(t, err)
	k := s.Key([]byte("k"))
	return s, m, k, k.In([]byte("a")), k.In([]byte("ab"))
}

// TestHotBreakMapShortcutAmbiguousKey: a map entry's tier key is the composite key (whose
// namespace is its unframed tail) followed by the user key, so map entries (ns "a", uk "b")
// and (ns "ab", uk "") have the same tier key bytes; only their table hashes and composite key
// lengths differ. hotFind's last-entry shortcut compared the key bytes alone once the entry no
// longer stored its hash, so the second key found the first's entry (hotEntry.is compares the
// length too).
func TestHotBreakMapShortcutAmbiguousKey(t *testing.T) {
	_, m, _, a, ab := ambiguousMap(t, Int64)
	if err := m.Put(a, "b", 1); err != nil {
		t.Fatal(err)
	}
	// Read of a different map entry right after: the engine and the tier hold nothing for it.
	if v, ok, err := m.Get(ab, ""); err != nil || ok {
		t.Fatalf("Get(ns ab, uk \"\") = %v %v %v, want absent (only (ns a, uk b) was put)", v, ok, err)
	}
}

// TestHotBreakMapShortcutAmbiguousPut: the same through a write: the put of (ns "ab", uk "")
// lands in the entry of (ns "a", uk "b").
func TestHotBreakMapShortcutAmbiguousPut(t *testing.T) {
	s, m, _, a, ab := ambiguousMap(t, Int64)
	okT(t, m.Put(a, "b", 1))
	okT(t, m.Put(ab, "", 2))
	okT(t, s.syncHot())
	if v, ok, err := m.Get(a, "b"); err != nil || !ok || v != 1 {
		t.Errorf("Get(ns a, uk b) = %v %v %v, want 1", v, ok, err)
	}
	if v, ok, err := m.Get(ab, ""); err != nil || !ok || v != 2 {
		t.Errorf("Get(ns ab, uk \"\") = %v %v %v, want 2", v, ok, err)
	}
	okT(t, s.checkHot())
}

// TestHotBreakRandomModel: value, reducing (string concatenation: values grow from inline to
// heap), list and map states with keys around the inline bound (composite keys of 38–43 bytes)
// and values around the inline room, against Go maps, with a small tier under pressure
// (drops of the clean entries and of everything), write-backs, cuts and map iterations;
// checkHot after every step.
func TestHotBreakRandomModel(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		hotBreakRandom(t, seed, 3000, 400, 1)
		hotBreakRandom(t, seed, 20000, 60, 50)
		hotBreakRandom(t, seed, 20000, 3000, 100)
	}
}

// TestHotBreakMapShortcutStaleAfterRemove: the same shortcut in hotInvalidateIn: a
// MapIterator.Remove of (ns "ab", uk "") through Store.apply drops the entry of (ns "a", uk
// "b") (the last one found) instead of its own, whose clean entry then answers the removed
// value (H1).
func TestHotBreakMapShortcutStaleAfterRemove(t *testing.T) {
	s, m, k, a, ab := ambiguousMap(t, String)
	okT(t, m.Put(ab, "", "X"))
	okT(t, m.Put(k, "other", "Z")) // a lookup in between: the next put makes its own entry
	okT(t, m.Put(a, "b", "Y"))     // the last entry made
	it := m.Iterator(ab)           // writes the tier back: both entries clean
	if !it.Next() || it.Key() != "" {
		t.Fatalf("iterator: %v %q", it.Err(), it.Key())
	}
	okT(t, it.Remove())
	for it.Next() {
	}
	if err := s.checkHot(); err != nil {
		t.Errorf("checkHot after the iterator's Remove: %v", err)
	}
	if v, ok, err := m.Get(ab, ""); err != nil || ok {
		t.Errorf("Get(ns ab, uk \"\") after its Remove = %q %v %v, want absent", v, ok, err)
	}
}

// TestHotBreakLongMapKeyRead: a point read needs no size check, so a map's Get of a key whose
// composite key is longer than 65,535 bytes could make an entry (absent, none) whose klen, a
// uint16, wraps, so that hashOf (which recomputes the table hash from the user key after klen)
// gives a hash the entry is not filed under; hotInsert caches no such key.
func TestHotBreakLongMapKeyRead(t *testing.T) {
	s := hotStore(t, 4<<20, false)
	m, _ := NewMapState(s, MapDescriptor[string, int64]{Name: "m", KeyCodec: String, ValueCodec: Int64})
	big := s.Key(make([]byte, 70000))
	if v, ok, err := m.Get(big, "u"); ok {
		t.Fatalf("Get of a long key: %v %v %v", v, ok, err)
	}
	for i := range m.hot.tags {
		if e := m.hot.live(i); e != nil {
			if hx := m.hot.hashOf(e); hotTag(hx) != m.hot.tags[i] || m.hot.find(bytesOf(e.key()), int(e.klen), hx) != e {
				t.Fatalf("entry of %d key bytes (klen %d): tag %#x, hashOf %#x (checkHot: not found under its hash)", len(e.key()), e.klen, m.hot.tags[i], hx)
			}
		}
	}
}

// TestHotTierSmallBound: a bound below the charging quantum (hotQuantum) still caches: the
// tier charges the budget in steps of the bound itself (hotTier.step).
func TestHotTierSmallBound(t *testing.T) {
	s := hotStore(t, 64<<10, false)
	r, _ := NewReducingState(s, ReducingDescriptor[int64]{Name: "r", Codec: Int64, Reduce: func(a, b int64) int64 { return a + b }})
	for round := range 3 {
		for i := range 200 {
			if err := r.Add(s.Key(fmt.Appendf(nil, "key-%d", i)), int64(round+1)); err != nil {
				t.Fatal(err)
			}
		}
	}
	st := s.Stats().HotTier
	if st.Hits == 0 || st.Charged == 0 || st.Charged > 64<<10 {
		t.Fatalf("a 64 KiB tier: %+v, want hits and a charge within the bound", st)
	}
	if err := s.checkHot(); err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		if x, ok, err := r.Get(s.Key(fmt.Appendf(nil, "key-%d", i))); err != nil || !ok || x != 6 {
			t.Fatalf("key %d: %v %v %v", i, x, ok, err)
		}
	}
}

// TestHotBreakInlineBounds: keys of composite length 39–42 (inline up to 40) and values of
// every length around the inline room (52 − key, or 52 with the key on the heap), grown and
// shrunk in place, for value, list and map states, read back and checked after write-backs
// and clean drops.
func TestHotBreakInlineBounds(t *testing.T) {
	s := hotStore(t, 4<<20, false)
	v, _ := NewValueState(s, ValueDescriptor[[]byte]{Name: "v", Codec: Bytes})
	l, _ := NewListState(s, ListDescriptor[[]byte]{Name: "l", Codec: Bytes})
	m, _ := NewMapState(s, MapDescriptor[[]byte, []byte]{Name: "m", KeyCodec: Bytes, ValueCodec: Bytes})
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	pat := func(n int, c byte) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = c + byte(i%7)
		}
		return b
	}
	for kl := 34; kl <= 37; kl++ { // composite key kl+5
		k := s.Key(pat(kl, 'k'))
		room := 52 - (kl + 5)
		if kl+5 > 40 {
			room = 52
		}
		sizes := []int{0, 1, room - 1, room, room + 1, 0, room, 2 * room, room - 1, 0, 200, 3}
		for step, n := range sizes {
			x := pat(n, byte('a'+step))
			must(v.Put(k, x))
			if got, ok, err := v.Get(k); err != nil || !ok || string(got) != string(x) {
				t.Fatalf("key %d, step %d: value %q %v %v, want %q", kl, step, got, ok, err, x)
			}
			for _, uk := range [][]byte{nil, pat(1, 'u'), pat(40, 'u')} {
				must(m.Put(k, uk, x))
				if got, ok, err := m.Get(k, uk); err != nil || !ok || string(got) != string(x) {
					t.Fatalf("key %d, step %d, uk %d: map %q %v %v, want %q", kl, step, len(uk), got, ok, err, x)
				}
			}
			switch step % 4 {
			case 1:
				must(s.syncHot())
			case 2:
				s.hotDropClean()
			}
			must(s.checkHot())
		}
		// a list: appends filling the inline room exactly, a Get making it known, appends, an
		// Update, a Clear, appends again
		var want [][]byte
		for i := range 12 {
			x := pat(i%5, byte('A'+i))
			switch i {
			case 4:
				got := listAll(t, l, k)
				if !eqLists(got, want) {
					t.Fatalf("key %d: list %q, want %q", kl, got, want)
				}
			case 7:
				want = [][]byte{pat(room-1, 'z')}
				must(l.Update(k, want))
				continue
			case 9:
				want = nil
				must(l.Clear(k))
				continue
			}
			must(l.Add(k, x))
			want = append(want, x)
			if got := listAll(t, l, k); !eqLists(got, want) {
				t.Fatalf("key %d, append %d: list %q, want %q", kl, i, got, want)
			}
			if i%3 == 0 {
				must(s.syncHot())
			}
			must(s.checkHot())
		}
	}
}

func listAll(t *testing.T, l *ListState[[]byte], k Key) [][]byte {
	t.Helper()
	var out [][]byte
	it := l.Get(k)
	for it.Next() {
		out = append(out, append([]byte{}, it.Value()...))
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func eqLists(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if string(a[i]) != string(b[i]) {
			return false
		}
	}
	return true
}

// TestHotBreakTTLRandom: a reducing state (string concatenation) and a value state with a TTL
// (tables, H6) against a model with expiry, under a small tier with clean drops, write-backs,
// CompactAll (cleanup below) and a moving clock; checkHot after each step.
func TestHotBreakTTLRandom(t *testing.T) {
	ctx := context.Background()
	for seed := uint64(1); seed <= 3; seed++ {
		var now atomic.Int64
		now.Store(1_000_000)
		s := hotTTLStore(t, 512<<10, &now)
		ttl := &TTLConfig{TTL: time.Second}
		r, _ := NewReducingState(s, ReducingDescriptor[string]{Name: "r", Codec: String, Reduce: func(a, b string) string { return a + b }, TTL: ttl})
		v, _ := NewValueState(s, ValueDescriptor[string]{Name: "v", Codec: String, TTL: ttl})
		if r.hot == nil || v.hot == nil {
			t.Fatal("no tables")
		}
		type ent struct {
			x  string
			ts int64
		}
		mr, mv := map[string]ent{}, map[string]ent{}
		rng := rand.New(rand.NewPCG(seed, 3))
		live := func(m map[string]ent, k string) (string, bool) {
			e, ok := m[k]
			if !ok || base.Expired(e.ts, 1000, now.Load()) {
				return "", false
			}
			return e.x, true
		}
		for step := range 8000 {
			ki := rng.IntN(300)
			kn := fmt.Sprintf("key-%d-%s", ki, strings.Repeat("p", ki%37))
			k := s.Key([]byte(kn))
			x := strings.Repeat(string(rune('a'+rng.IntN(26))), rng.IntN(70))
			var err error
			switch rng.IntN(12) {
			case 0, 1, 2:
				err = r.Add(k, x)
				old, ok := live(mr, kn)
				if !ok {
					old = ""
				}
				mr[kn] = ent{old + x, now.Load()}
			case 3, 4:
				got, ok, e := r.Get(k)
				want, wok := live(mr, kn)
				if e != nil || ok != wok || got != want {
					t.Fatalf("seed %d step %d: r.Get(%q) = %q %v %v, want %q %v", seed, step, kn, got, ok, e, want, wok)
				}
			case 5:
				err = v.Put(k, x)
				mv[kn] = ent{x, now.Load()}
			case 6, 7:
				got, ok, e := v.Get(k)
				want, wok := live(mv, kn)
				if e != nil || ok != wok || got != want {
					t.Fatalf("seed %d step %d: v.Get(%q) = %q %v %v, want %q %v", seed, step, kn, got, ok, e, want, wok)
				}
			case 8:
				if rng.IntN(2) == 0 {
					err = r.Clear(k)
					delete(mr, kn)
				} else {
					err = v.Clear(k)
					delete(mv, kn)
				}
			case 9:
				now.Add(int64(rng.IntN(300)))
			case 10:
				if rng.IntN(20) == 0 {
					err = s.CompactAll(ctx)
				} else if rng.IntN(5) == 0 {
					err = s.syncHot()
				}
			case 11:
				if rng.IntN(10) == 0 {
					s.hotDropClean()
				}
			}
			if err != nil {
				t.Fatalf("seed %d step %d: %v", seed, step, err)
			}
			if err := s.checkHot(); err != nil {
				t.Fatalf("seed %d step %d: checkHot: %v", seed, step, err)
			}
		}
		t.Logf("seed %d: %+v", seed, s.Stats().HotTier)
	}
}

func hotBreakRandom(t *testing.T, seed uint64, steps, nkeys, syncEvery int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, seed*7))
	s := hotStore(t, 512<<10, false)
	v, _ := NewValueState(s, ValueDescriptor[string]{Name: "v", Codec: String})
	r, _ := NewReducingState(s, ReducingDescriptor[string]{Name: "r", Codec: String, Reduce: func(a, b string) string { return a + b }})
	l, _ := NewListState(s, ListDescriptor[string]{Name: "l", Codec: String})
	m, _ := NewMapState(s, MapDescriptor[string, string]{Name: "m", KeyCodec: String, ValueCodec: String})
	mv, mr := map[string]string{}, map[string]string{}
	ml := map[string][]string{}
	mm := map[string]map[string]string{}
	lens := []int{1, 8, 33, 34, 35, 36, 37, 50}
	keyName := func(i int) string {
		n := lens[i%len(lens)]
		b := fmt.Sprintf("%d-", i)
		return b + strings.Repeat("x", max(0, n-len(b)))
	}
	val := func() string {
		var n int
		switch rng.IntN(6) {
		case 0:
			n = 0
		case 1, 2:
			n = rng.IntN(20)
		case 3:
			n = 8 + rng.IntN(50)
		case 4:
			n = rng.IntN(120)
		default:
			n = 200 + rng.IntN(3000)
		}
		b := make([]byte, n)
		for i := range b {
			b[i] = byte('a' + rng.IntN(26))
		}
		return string(b)
	}
	ukeys := []string{"", "a", "bb", strings.Repeat("u", 5), strings.Repeat("w", 30)}
	fail := func(step int, f string, a ...any) {
		t.Helper()
		t.Fatalf("seed %d step %d: %s", seed, step, fmt.Sprintf(f, a...))
	}
	// wantGet checks a point read (what) of key k against the model's map m.
	wantGet := func(step int, what, k string, x string, ok bool, e error, m map[string]string) {
		t.Helper()
		if want, wok := m[k]; e != nil || ok != wok || x != want {
			fail(step, "%s(%q) = %q %v %v, want %q %v", what, k, x, ok, e, want, wok)
		}
	}
	for step := range steps {
		kn := keyName(rng.IntN(nkeys))
		k := s.Key([]byte(kn))
		var err error
		op := rng.IntN(24)
		if op >= 21 && rng.IntN(syncEvery) != 0 {
			op = 3
		}
		switch op {
		case 0, 1:
			x := val()
			err = v.Put(k, x)
			mv[kn] = x
		case 2:
			err = v.Clear(k)
			delete(mv, kn)
		case 3, 4:
			x, ok, e := v.Get(k)
			wantGet(step, "v.Get", kn, x, ok, e, mv)
		case 5, 6:
			x := val()
			if len(x) > 100 {
				x = x[:rng.IntN(20)]
			}
			err = r.Add(k, x)
			mr[kn] += x
		case 7:
			err = r.Clear(k)
			delete(mr, kn)
		case 8:
			x, ok, e := r.Get(k)
			wantGet(step, "r.Get", kn, x, ok, e, mr)
		case 9, 10:
			x := val()
			if len(x) > 200 {
				x = x[:rng.IntN(40)]
			}
			err = l.Add(k, x)
			ml[kn] = append(ml[kn], x)
		case 11:
			xs := []string{val(), val()}
			for i := range xs {
				if len(xs[i]) > 100 {
					xs[i] = xs[i][:5]
				}
			}
			if rng.IntN(3) == 0 {
				xs = nil
			}
			err = l.Update(k, xs)
			if len(xs) == 0 {
				delete(ml, kn)
			} else {
				ml[kn] = slices.Clone(xs)
			}
		case 12:
			err = l.Clear(k)
			delete(ml, kn)
		case 13, 14:
			var got []string
			it := l.Get(k)
			for it.Next() {
				got = append(got, it.Value())
			}
			if e := it.Err(); e != nil || !slices.Equal(got, ml[kn]) {
				fail(step, "l.Get(%q) = %q %v, want %q", kn, got, e, ml[kn])
			}
		case 15, 16:
			uk, x := ukeys[rng.IntN(len(ukeys))], val()
			err = m.Put(k, uk, x)
			if mm[kn] == nil {
				mm[kn] = map[string]string{}
			}
			mm[kn][uk] = x
		case 17:
			uk := ukeys[rng.IntN(len(ukeys))]
			err = m.Remove(k, uk)
			delete(mm[kn], uk)
		case 18, 19:
			uk := ukeys[rng.IntN(len(ukeys))]
			x, ok, e := m.Get(k, uk)
			wantGet(step, "m.Get("+kn+")", uk, x, ok, e, mm[kn])
		case 20:
			got := map[string]string{}
			seq, errf := m.Entries(k)
			for uk, x := range seq {
				got[uk] = x
			}
			if e := errf(); e != nil || len(got) != len(mm[kn]) {
				fail(step, "m.Entries(%q) = %v %v, want %v", kn, got, e, mm[kn])
			}
			for uk, x := range mm[kn] {
				if got[uk] != x {
					fail(step, "m.Entries(%q)[%q] = %q, want %q", kn, uk, got[uk], x)
				}
			}
		case 21:
			if rng.IntN(4) == 0 {
				err = m.Clear(k)
				delete(mm, kn)
			} else {
				s.hotDropClean()
			}
		case 22:
			if rng.IntN(10) == 0 {
				err = s.WaitBackground()
			} else {
				err = s.syncHot()
			}
		case 23:
			if rng.IntN(3) == 0 {
				err = s.hotDropAll()
			}
		}
		if err != nil {
			fail(step, "op error: %v", err)
		}
		if e := s.checkHot(); e != nil {
			fail(step, "checkHot: %v", e)
		}
	}
	st := s.Stats().HotTier
	t.Logf("seed %d: %+v", seed, st)
}
