package strata

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"
)

// batchTierFixture fills f.v with keys whose newest versions lie in every tier — values and
// tombstones in the LsmStore, the slices, a sealed segment and the active segment — and keys
// never written, and returns the model: key index → value (absent: not in the map).
func batchTierFixture(f *keysFixture) map[int]int64 {
	model := map[int]int64{}
	put := func(lo, hi int, mul int64) {
		for i := lo; i < hi; i++ {
			if i%7 == 3 {
				f.ok(f.v.Clear(f.key(batchKey(i), "ns")))
				delete(model, i)
				continue
			}
			f.ok(f.v.Put(f.key(batchKey(i), "ns"), int64(i)*mul))
			model[i] = int64(i) * mul
		}
	}
	put(0, 400, 1)
	f.pushDown()
	put(300, 600, 2) // rewrites and deletes over the LsmStore's versions
	f.slices()
	put(550, 800, 3)
	f.seal()
	put(750, 1000, 5)
	if st := f.s.Stats(); st.LSM.Files == 0 || st.Slices.Count == 0 || st.Fresh.Segments == 0 {
		f.t.Fatalf("the fixture does not span the tiers: %d LSM files, %d slices, %d segments",
			st.LSM.Files, st.Slices.Count, st.Fresh.Segments)
	}
	return model
}

func batchKey(i int) string { return fmt.Sprintf("key-%05d", i) }

// TestBatchEveryTier: GetBatch returns what Get returns for every key, found, absent and
// deleted, in every tier, for batches of every length around the chunk size, with repeated
// keys, in random order, and after PutBatch over all the tiers.
func TestBatchEveryTier(t *testing.T) {
	f := newKeysFixture(t)
	model := batchTierFixture(f)
	rng := rand.New(rand.NewPCG(1, 2))
	const universe = 1100 // 1000..1099 were never written
	check := func(when string, n int) {
		t.Helper()
		idx := make([]int, n)
		keys := make([]Key, n)
		for i := range idx {
			if i > 0 && rng.IntN(5) == 0 {
				idx[i] = idx[rng.IntN(i)] // a repeated key
			} else {
				idx[i] = rng.IntN(universe)
			}
			keys[i] = f.key(batchKey(idx[i]), "ns")
		}
		vals, ok := make([]int64, n+3), make([]bool, n+3)
		vals[n], ok[n] = 42, true // beyond len(keys): untouched
		if err := f.v.GetBatch(keys, vals, ok); err != nil {
			t.Fatalf("%s: GetBatch of %d: %v", when, n, err)
		}
		for i, k := range keys {
			x, hit, err := f.v.Get(k)
			if err != nil {
				t.Fatal(err)
			}
			want, wok := model[idx[i]]
			if vals[i] != x || ok[i] != hit || hit != wok || x != want {
				t.Fatalf("%s: batch of %d, key %d (%s): GetBatch %d %v, Get %d %v, model %d %v",
					when, n, i, batchKey(idx[i]), vals[i], ok[i], x, hit, want, wok)
			}
		}
		if vals[n] != 42 || !ok[n] {
			t.Fatalf("%s: GetBatch wrote beyond len(keys)", when)
		}
	}
	for _, n := range []int{0, 1, 2, 7, BatchChunk - 1, BatchChunk, BatchChunk + 1, 3*BatchChunk + 5, 500} {
		check(fmt.Sprint("tiers/n=", n), n)
	}

	// PutBatch over every tier, with repeated keys (the last value wins), then reads again.
	for round := range 3 {
		n := 1 + rng.IntN(200)
		keys, vals, idx := make([]Key, n), make([]int64, n), make([]int, n)
		for i := range keys {
			idx[i] = rng.IntN(universe)
			if i == n-1 {
				idx[i] = idx[0] // a repeat at the far end, across chunks when n > BatchChunk
			}
			keys[i], vals[i] = f.key(batchKey(idx[i]), "ns"), int64(round*10000+i)
			model[idx[i]] = vals[i] // in order: the last value of a key wins
		}
		f.ok(f.v.PutBatch(keys, vals))
		for _, n := range []int{1, BatchChunk, 100} {
			check(fmt.Sprintf("put round %d/n=%d", round, n), n)
		}
	}
	f.pushDown()
	check("after push-down", 300)
	f.reopen()
	check("after reopen", 300)
}

// TestBatchBytesAliasing: values of an aliasing codec (Bytes) from one GetBatch are all intact
// together (each key its own bytes, also for the copies of the LsmStore's values), until the
// next write.
func TestBatchBytesAliasing(t *testing.T) {
	f := newKeysFixture(t)
	v := must(NewValueState(f.s, ValueDescriptor[[]byte]{Name: "b", Codec: Bytes}))
	val := func(i int) []byte { return fmt.Appendf(nil, "value-%d-%0*d", i, i%50, 0) }
	for i := range 300 {
		f.ok(v.Put(f.key(batchKey(i), ""), val(i)))
		if i == 150 {
			f.pushDown()
		}
	}
	keys := make([]Key, 300)
	for i := range keys {
		keys[i] = f.key(batchKey(299-i), "")
	}
	vals, ok := make([][]byte, 300), make([]bool, 300)
	f.ok(v.GetBatch(keys, vals, ok))
	for i := range keys {
		if !ok[i] || string(vals[i]) != string(val(299-i)) {
			t.Fatalf("key %d: %q %v, want %q", 299-i, vals[i], ok[i], val(299-i))
		}
	}
}

// TestBatchTTL: on a TTL state GetBatch and PutBatch follow the single calls (Flink's
// TtlValueState): expired values read as absent, TTLOnReadAndWrite renews on read,
// TTLReturnExpiredIfNotCleanedUp returns an expired value once.
func TestBatchTTL(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  TTLConfig
	}{
		{"create-and-write", TTLConfig{TTL: 100 * time.Millisecond}},
		{"read-and-write", TTLConfig{TTL: 100 * time.Millisecond, UpdateType: TTLOnReadAndWrite}},
		{"return-expired", TTLConfig{TTL: 100 * time.Millisecond, Visibility: TTLReturnExpiredIfNotCleanedUp}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var now atomic.Int64
			// Two Stores driven alike, one by batches, one by single calls.
			sb, ss := openTest(t, Options{Clock: now.Load}), openTest(t, Options{Clock: now.Load})
			cfg := tc.cfg
			vb := must(NewValueState(sb, ValueDescriptor[int64]{Name: "v", Codec: Int64, TTL: &cfg}))
			vs := must(NewValueState(ss, ValueDescriptor[int64]{Name: "v", Codec: Int64, TTL: &cfg}))
			kb, ks := make([]Key, 40), make([]Key, 40)
			vals := make([]int64, 40)
			for i := range kb {
				kb[i], ks[i] = sb.Key([]byte(batchKey(i%30))), ss.Key([]byte(batchKey(i%30)))
				vals[i] = int64(i)
			}
			must(0, vb.PutBatch(kb[:20], vals[:20]))
			for i := range 20 {
				must(0, vs.Put(ks[i], vals[i]))
			}
			gb, ob := make([]int64, 40), make([]bool, 40)
			for _, at := range []int64{50, 120, 130, 200, 260} {
				now.Store(at)
				if at == 130 {
					must(0, vb.PutBatch(kb[10:30], vals[10:30]))
					for i := 10; i < 30; i++ {
						must(0, vs.Put(ks[i], vals[i]))
					}
					continue
				}
				must(0, vb.GetBatch(kb, gb, ob))
				for i := range ks {
					x, hit, err := vs.Get(ks[i])
					if err != nil || gb[i] != x || ob[i] != hit {
						t.Fatalf("t=%d key %d: GetBatch %d %v, Get %d %v %v", at, i, gb[i], ob[i], x, hit, err)
					}
				}
			}
		})
	}
}

// TestBatchErrors: a refused key stops a batch there with a *BatchError naming it; what came
// before is done (read or written), what comes after is not; refused shapes do nothing.
func TestBatchErrors(t *testing.T) {
	kg := &KeyGroupRange{Start: 0, End: 63}
	s := openTest(t, Options{MaxParallelism: 128, KeyGroups: kg})
	v := must(NewValueState(s, ValueDescriptor[int64]{Name: "v", Codec: Int64}))
	var in, out []Key
	for i := 0; len(in) < 80 || len(out) < 2; i++ {
		k := s.Key([]byte(batchKey(i)))
		if kg.Contains(k.KeyGroup()) {
			in = append(in, k)
		} else {
			out = append(out, k)
		}
	}
	for i, k := range in {
		must(0, v.Put(k, int64(i)+1))
	}
	for _, bad := range []int{0, 5, BatchChunk, BatchChunk + 3, 79} {
		t.Run(fmt.Sprint("out-of-range-at=", bad), func(t *testing.T) {
			keys := append([]Key(nil), in...)
			keys[bad] = out[0]
			vals, ok := make([]int64, len(keys)), make([]bool, len(keys))
			for i := range vals {
				vals[i], ok[i] = -1, true
			}
			err := v.GetBatch(keys, vals, ok)
			var be *BatchError
			if !errors.As(err, &be) || be.Index != bad || !errors.Is(err, ErrKeyGroupOutOfRange) {
				t.Fatalf("GetBatch: %v, want a BatchError at %d of ErrKeyGroupOutOfRange", err, bad)
			}
			for i := range keys {
				if wv, wok := int64(i)+1, true; i >= bad {
					wv, wok = 0, false
					if vals[i] != wv || ok[i] != wok {
						t.Fatalf("key %d after the error: %d %v, want zero", i, vals[i], ok[i])
					}
				} else if vals[i] != wv || ok[i] != wok {
					t.Fatalf("key %d before the error: %d %v, want %d", i, vals[i], ok[i], wv)
				}
			}
			put := make([]int64, len(keys))
			for i := range put {
				put[i] = 1000 + int64(bad)
			}
			err = v.PutBatch(keys, put)
			if !errors.As(err, &be) || be.Index != bad || !errors.Is(err, ErrKeyGroupOutOfRange) {
				t.Fatalf("PutBatch: %v, want a BatchError at %d of ErrKeyGroupOutOfRange", err, bad)
			}
			for i, k := range keys {
				if i == bad {
					continue
				}
				x, _, _ := v.Get(k)
				if want := 1000 + int64(bad); i < bad && x != want || i > bad && x == want {
					t.Fatalf("key %d after PutBatch refused at %d: %d", i, bad, x)
				}
			}
			for i, k := range in { // restore
				must(0, v.Put(k, int64(i)+1))
			}
		})
	}
	if err := v.GetBatch(in, make([]int64, 3), make([]bool, len(in))); !errors.Is(err, ErrBatchLength) {
		t.Fatalf("GetBatch with short vals: %v", err)
	}
	if err := v.GetBatch(in, make([]int64, len(in)), nil); !errors.Is(err, ErrBatchLength) {
		t.Fatalf("GetBatch with short ok: %v", err)
	}
	if err := v.PutBatch(in, make([]int64, len(in)-1)); !errors.Is(err, ErrBatchLength) {
		t.Fatalf("PutBatch with short vals: %v", err)
	}
	if x, _, _ := v.Get(in[0]); x != 1 {
		t.Fatalf("a refused PutBatch wrote: %d", x)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	vals, ok := make([]int64, len(in)), make([]bool, len(in))
	var be *BatchError
	if err := v.GetBatch(in, vals, ok); !errors.As(err, &be) || be.Index != 0 || !errors.Is(err, ErrClosed) {
		t.Fatalf("GetBatch on a closed Store: %v", err)
	}
	if err := v.PutBatch(in, vals); !errors.As(err, &be) || be.Index != 0 || !errors.Is(err, ErrClosed) {
		t.Fatalf("PutBatch on a closed Store: %v", err)
	}
	if err := v.GetBatch(nil, nil, nil); err != nil {
		t.Fatalf("empty GetBatch on a closed Store: %v", err)
	}
}

// TestBatchDecodeError: a value the codec refuses stops GetBatch at its key.
func TestBatchDecodeError(t *testing.T) {
	s := openTest(t, Options{})
	raw := must(NewValueState(s, ValueDescriptor[[]byte]{Name: "v", Codec: Bytes}))
	for i := range 10 {
		b := []byte("12345678")
		if i == 6 {
			b = b[:3] // not an Int64
		}
		must(0, raw.Put(s.Key([]byte(batchKey(i))), b))
	}
	// The same state read with an Int64 codec through a second Store view is not possible;
	// read it through a ValueState of the same id with another codec instead.
	v := &ValueState[int64]{stateBase: raw.stateBase, codec: Int64}
	keys := make([]Key, 10)
	for i := range keys {
		keys[i] = s.Key([]byte(batchKey(i)))
	}
	vals, ok := make([]int64, 10), make([]bool, 10)
	err := v.GetBatch(keys, vals, ok)
	var be *BatchError
	if !errors.As(err, &be) || be.Index != 6 || !errors.Is(err, ErrCorruption) {
		t.Fatalf("GetBatch: %v, want a BatchError at 6 of ErrCorruption", err)
	}
	if !ok[5] || ok[6] || ok[7] || vals[7] != 0 {
		t.Fatalf("results around the error: %v %v", ok, vals)
	}
}

// TestAllocsBatch pins 0 allocations per GetBatch and PutBatch of 64 keys (two chunks), found
// and absent, once the Store's batch scratch exists.
func TestAllocsBatch(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own; allocations are pinned in normal builds")
	}
	s := openTest(t, Options{})
	v := must(NewValueState(s, ValueDescriptor[int64]{Name: "v", Codec: Int64}))
	keys, vals, ok := make([]Key, 64), make([]int64, 64), make([]bool, 64)
	for i := range keys {
		keys[i] = s.Key([]byte(batchKey(i)))
		if i%2 == 0 {
			must(0, v.Put(keys[i], int64(i)))
		}
	}
	for name, fn := range map[string]func(){
		"GetBatch": func() { _ = v.GetBatch(keys, vals, ok) },
		"PutBatch": func() { _ = v.PutBatch(keys[:32], vals[:32]) },
	} {
		if a := testing.AllocsPerRun(200, fn); a != 0 {
			t.Errorf("%s: %v allocs/op, want 0", name, a)
		}
	}
}

// TestMapBatchEveryTier: MapState.GetBatch returns what Get returns for every (key, user key)
// pair — entries put, removed, maps cleared, never written — in every tier, for batches of
// every length around the chunk size, with repeated pairs; and on a TTL map.
func TestMapBatchEveryTier(t *testing.T) {
	f := newKeysFixture(t)
	put := func(lo, hi int, mul int64) {
		for i := lo; i < hi; i++ {
			k := f.key(batchKey(i), "ns")
			switch i % 9 {
			case 4:
				f.ok(f.m.Clear(k))
			case 5:
				f.ok(f.m.Remove(k, int64(i%4)))
			default:
				for uk := range int64(4) {
					f.ok(f.m.Put(k, uk+int64(i%3), int64(i)*mul+uk))
				}
			}
		}
	}
	put(0, 300, 1)
	f.pushDown()
	put(200, 450, 2)
	f.slices()
	put(400, 600, 3)
	f.seal()
	put(550, 700, 5)
	if st := f.s.Stats(); st.LSM.Files == 0 || st.Slices.Count == 0 {
		t.Fatalf("the fixture does not span the tiers: %d LSM files, %d slices", st.LSM.Files, st.Slices.Count)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{0, 1, 9, BatchChunk, BatchChunk + 1, 3*BatchChunk + 7, 400} {
		keys, uks := make([]Key, n), make([]int64, n)
		for i := range keys {
			if i > 0 && rng.IntN(5) == 0 {
				j := rng.IntN(i)
				keys[i], uks[i] = keys[j], uks[j]
				continue
			}
			keys[i], uks[i] = f.key(batchKey(rng.IntN(750)), "ns"), rng.Int64N(7)
		}
		vals, ok := make([]int64, n), make([]bool, n)
		if err := f.m.GetBatch(keys, uks, vals, ok); err != nil {
			t.Fatalf("GetBatch of %d: %v", n, err)
		}
		hits := 0
		for i := range keys {
			x, hit, err := f.m.Get(keys[i], uks[i])
			if err != nil || vals[i] != x || ok[i] != hit {
				t.Fatalf("batch of %d, pair %d (%s, %d): GetBatch %d %v, Get %d %v %v", n, i, keys[i].Bytes(), uks[i], vals[i], ok[i], x, hit, err)
			}
			if hit {
				hits++
			}
		}
		if n >= 100 && (hits == 0 || hits == n) {
			t.Fatalf("batch of %d: %d found: the pairs do not mix found and absent", n, hits)
		}
	}
	var be *BatchError
	kg := f.key("x", "")
	if err := f.m.GetBatch([]Key{kg, {}}, []int64{1, 2}, make([]int64, 2), make([]bool, 2)); !errors.As(err, &be) || be.Index != 1 || !errors.Is(err, ErrKeyGroupOutOfRange) {
		t.Fatalf("GetBatch with the zero Key at 1: %v", err)
	}
	if err := f.m.GetBatch([]Key{kg}, nil, make([]int64, 1), make([]bool, 1)); !errors.Is(err, ErrBatchLength) {
		t.Fatalf("GetBatch with short uks: %v", err)
	}

	var now atomic.Int64
	s := openTest(t, Options{Clock: now.Load})
	tm := must(NewMapState(s, MapDescriptor[int64, int64]{Name: "m", KeyCodec: Int64, ValueCodec: Int64,
		TTL: &TTLConfig{TTL: 100 * time.Millisecond}}))
	k := s.Key([]byte("k"))
	must(0, tm.Put(k, 1, 10))
	now.Store(60)
	must(0, tm.Put(k, 2, 20))
	now.Store(130) // uk 1 expired, uk 2 alive
	vals, ok := make([]int64, 3), make([]bool, 3)
	must(0, tm.GetBatch([]Key{k, k, k}, []int64{1, 2, 3}, vals, ok))
	if ok[0] || !ok[1] || vals[1] != 20 || ok[2] {
		t.Fatalf("TTL map GetBatch: %v %v", vals, ok)
	}
}

// TestAllocsMapBatch pins 0 allocations per MapState.GetBatch of 64 pairs.
func TestAllocsMapBatch(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own; allocations are pinned in normal builds")
	}
	s := openTest(t, Options{})
	m := must(NewMapState(s, MapDescriptor[int64, int64]{Name: "m", KeyCodec: Int64, ValueCodec: Int64}))
	keys, uks, vals, ok := make([]Key, 64), make([]int64, 64), make([]int64, 64), make([]bool, 64)
	for i := range keys {
		keys[i], uks[i] = s.Key([]byte(batchKey(i/2))), int64(i%3)
		must(0, m.Put(keys[i], uks[i], int64(i)))
	}
	if a := testing.AllocsPerRun(200, func() { _ = m.GetBatch(keys, uks, vals, ok) }); a != 0 {
		t.Errorf("MapState.GetBatch: %v allocs/op, want 0", a)
	}
}
