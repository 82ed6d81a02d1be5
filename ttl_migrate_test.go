package strata

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-db/strata/internal/checkpointfs"
	"github.com/strata-db/strata/internal/engine"
	"github.com/strata-db/strata/internal/vfs"
)

// migrateStates are the five kinds of state of TestTTLMigrateCrash on one Store, all with one
// TTLConfig (nil: none).
type migrateStates struct {
	val *ValueState[string]
	lst *ListState[string]
	mp  *MapState[string, string]
	red *ReducingState[int64]
	agg *AggregatingState[int64, avgAcc, string]
}

func registerMigrateStates(s *Store, c *TTLConfig) (*migrateStates, error) {
	var m migrateStates
	var err error
	if m.val, err = NewValueState(s, ValueDescriptor[string]{Name: "val", Codec: String, TTL: c}); err != nil {
		return nil, err
	}
	if m.lst, err = NewListState(s, ListDescriptor[string]{Name: "lst", Codec: String, TTL: c}); err != nil {
		return nil, err
	}
	if m.mp, err = NewMapState(s, MapDescriptor[string, string]{Name: "mp", KeyCodec: String, ValueCodec: String, TTL: c}); err != nil {
		return nil, err
	}
	if m.red, err = NewReducingState(s, ReducingDescriptor[int64]{Name: "red", Codec: Int64, TTL: c,
		Reduce: func(a, b int64) int64 { return a + b }}); err != nil {
		return nil, err
	}
	m.agg, err = NewAggregatingState(s, AggregatingDescriptor[int64, avgAcc, string]{Name: "agg", AccCodec: avgCodec{}, TTL: c,
		CreateAccumulator: func() avgAcc { return avgAcc{} },
		Add:               func(in int64, a avgAcc) avgAcc { return avgAcc{a.sum + in, a.n + 1} },
		GetResult:         func(a avgAcc) string { return fmt.Sprintf("%d/%d", a.sum, a.n) },
		Merge:             func(a, b avgAcc) avgAcc { return avgAcc{a.sum + b.sum, a.n + b.n} }})
	return &m, err
}

// put writes key i of every state.
func (m *migrateStates) put(s *Store, i int) error {
	k := s.Key(fmt.Appendf(nil, "key-%d", i))
	return firstErr(
		m.val.Put(k, fmt.Sprint("v", i)),
		m.lst.AddAll(k, []string{fmt.Sprint("a", i), fmt.Sprint("b", i)}),
		m.mp.Put(k, "u", fmt.Sprint("m", i)),
		m.mp.Put(k, "w", fmt.Sprint("n", i)),
		m.red.Add(k, int64(i)),
		m.red.Add(k, 1),
		m.agg.Add(k, int64(i)),
	)
}

// want is what read returns of key i when it is present.
func migrateWant(i int) string {
	return fmt.Sprintf("v%d|a%d b%d|m%d n%d|%d|%d/1", i, i, i, i, i, i+1, i)
}

// read returns the state of key i across the five states ("" where absent).
func (m *migrateStates) read(s *Store, i int) (string, error) {
	k := s.Key(fmt.Appendf(nil, "key-%d", i))
	var parts [5]string
	v, ok, err := m.val.Get(k)
	if err != nil {
		return "", err
	}
	if ok {
		parts[0] = v
	}
	var xs []string
	it := m.lst.Get(k)
	for it.Next() {
		xs = append(xs, it.Value())
	}
	if err := it.Err(); err != nil {
		return "", err
	}
	parts[1] = strings.Join(xs, " ")
	xs = xs[:0]
	for _, u := range []string{"u", "w"} {
		v, ok, err := m.mp.Get(k, u)
		if err != nil {
			return "", err
		}
		if ok {
			xs = append(xs, v)
		}
	}
	parts[2] = strings.Join(xs, " ")
	r, ok, err := m.red.Get(k)
	if err != nil {
		return "", err
	}
	if ok {
		parts[3] = fmt.Sprint(r)
	}
	a, ok, err := m.agg.Get(k)
	if err != nil {
		return "", err
	}
	if ok {
		parts[4] = a
	}
	if parts == [5]string{} {
		return "", nil
	}
	return strings.Join(parts[:], "|"), nil
}

// TestTTLMigrateCrash: a Store persisted with five states (one of each kind) without a TTL
// (with one), its entries in the LsmStore, is opened with them registered with a TTL
// (without), which migrates every entry, and closed; a crash at every file-system write of
// that session leaves a directory whose Open with the new TTL flag migrates again (or finds
// the migration persisted) — either way every value reads as before, and, turned on, each
// expires exactly TTL after the migration, which runs at the same clock in both sessions.
func TestTTLMigrateCrash(t *testing.T) {
	keys := ttlBatch + 100 // more than one batch of the migration's scan
	if testing.Short() {
		keys = 60
	}
	ttl := &TTLConfig{TTL: 100 * time.Millisecond, Cleanup: TTLCleanup{NoCompaction: true}}
	for _, on := range []bool{true, false} {
		from, to := (*TTLConfig)(nil), ttl
		if !on {
			from, to = ttl, nil
		}
		t.Run(fmt.Sprintf("on=%v", on), func(t *testing.T) {
			var now atomic.Int64
			openAt := func(fs vfs.FS, ts int64) *Store {
				opts, adjust := lsmModelOptions(fs)
				opts.Clock = now.Load
				now.Store(ts)
				return must(open("/db", opts, adjust))
			}
			// run persists the old shape, then migrates in a second session that crashes at
			// its write crash (0: none); it returns the second session's writes.
			run := func(fault *vfs.FaultFS, crash int64) int64 {
				s := openAt(fault, 0)
				m := must(registerMigrateStates(s, from))
				for i := range keys {
					must(0, m.put(s, i))
				}
				must(0, s.Close())
				before := fault.Count(vfs.WriteOps)
				fault.CrashAt(crash)
				// At 1000 every value stored with a TTL has expired: turned off, it is visible again.
				opts, adjust := lsmModelOptions(fault)
				opts.Clock = now.Load
				now.Store(1000)
				s, err := open("/db", opts, adjust)
				if err == nil {
					if _, err = registerMigrateStates(s, to); err == nil {
						err = s.Close()
					}
					if err != nil && !s.closed {
						s.Discard()
					}
				}
				if err != nil && !fault.Crashed() {
					t.Fatal(err)
				}
				return fault.Count(vfs.WriteOps) - before
			}
			writes := run(vfs.NewFaultFS(vfs.NewMem()), 0)
			for n := int64(1); n <= writes+1; n++ {
				mem := vfs.NewMem()
				run(vfs.NewFaultFS(mem), n)
				s := openAt(mem.CrashClone(), 1000)
				m, err := registerMigrateStates(s, to)
				if err != nil {
					t.Fatalf("crash at write %d of %d: register: %v", n, writes, err)
				}
				for j, ts := range []int64{1099, 1100, 1 << 40} {
					now.Store(ts)
					for i := range keys {
						got, err := m.read(s, i)
						want := migrateWant(i)
						if on && j > 0 {
							want = ""
						}
						if err != nil || got != want {
							t.Fatalf("crash at write %d of %d: key %d at %d: %q, %v; want %q", n, writes, i, ts, got, err, want)
						}
					}
				}
				must(0, s.Close())
			}
			t.Logf("%d crash points checked", writes+1)
		})
	}
}

// TestTTLMigrateAliases: two Stores that registered the five states under different ids
// (one registered another state first) are checkpointed and restored into one (a scale-in:
// the restored Store keeps state id aliases, persist.go), whose registration with the other
// TTL flag migrates the data of both parts, each under its own ids; a reopen finds the new
// flag and the aliases persisted.
func TestTTLMigrateAliases(t *testing.T) {
	ttl := &TTLConfig{TTL: 100 * time.Millisecond, Cleanup: TTLCleanup{NoCompaction: true}}
	for _, on := range []bool{true, false} {
		from, to := (*TTLConfig)(nil), ttl
		if !on {
			from, to = ttl, nil
		}
		t.Run(fmt.Sprintf("on=%v", on), func(t *testing.T) {
			ctx := context.Background()
			fsys := vfs.NewMem()
			e := &idsEnv{t: t, fs: fsys, st: must(checkpointfs.NewDirStorage(fsys, "/ck")), now: new(atomic.Int64)}
			const n = 400
			a, b := KeyGroupRange{Start: 0, End: 63}, KeyGroupRange{Start: 64, End: 127}
			var hs []CheckpointHandle
			for i, kg := range []KeyGroupRange{a, b} {
				s := must(Open(e.dir(), e.opts(kg, fmt.Sprint("part", i))))
				if i == 0 { // shifts the ids of part 0's states by one
					must(NewValueState(s, ValueDescriptor[string]{Name: "pad", Codec: String}))
				}
				m := must(registerMigrateStates(s, from))
				for j := range n {
					if kg.Contains(s.Key(fmt.Appendf(nil, "key-%d", j)).KeyGroup()) {
						must(0, m.put(s, j))
					}
				}
				must(0, s.seal())
				must(0, s.WaitBackground())
				hs = append(hs, must(s.Checkpoint(ctx, 1, nil)))
				must(0, s.Close())
			}
			all := KeyGroupRange{Start: 0, End: 127}
			dir := e.dir()
			e.now.Store(1000)
			s := must(Restore(dir, e.opts(all, "c"), e.st, hs...))
			if len(s.aliases) == 0 {
				t.Fatal("the scale-in has no state id aliases")
			}
			m := must(registerMigrateStates(s, to))
			check := func(what string, ts int64, present bool) {
				t.Helper()
				e.now.Store(ts)
				for j := range n {
					got, err := m.read(s, j)
					want := ""
					if present {
						want = migrateWant(j)
					}
					if err != nil || got != want {
						t.Fatalf("%s: key %d at %d: %q, %v; want %q", what, j, ts, got, err, want)
					}
				}
			}
			check("migrated", 1099, true)
			must(0, s.Close())
			e.now.Store(1050)
			s = must(Open(dir, e.opts(all, "c")))
			if len(s.aliases) == 0 {
				t.Fatal("the aliases were not persisted")
			}
			m = must(registerMigrateStates(s, to))
			check("reopened", 1099, true)
			check("reopened", 1100, !on)
			must(0, s.Close())
		})
	}
}

// TestTTLMigrateFailure: a migration that fails part way (here a stored TTL value too short
// to hold a timestamp, planted below the API) discards the Store with an error matching the
// cause and ErrClosed; the directory keeps its persist point, whose state is stored with its
// TTL and unmigrated, every good value intact.
func TestTTLMigrateFailure(t *testing.T) {
	var now atomic.Int64
	fsys := vfs.NewMem()
	opts := Options{MaxParallelism: 16, MemoryBudget: 64 << 20, SegmentSize: 16 << 20, BackgroundWorkers: 1, Clock: now.Load}
	opts.fs = fsys
	ttl := &TTLConfig{TTL: time.Hour}
	s := must(Open("/db", opts))
	v := must(NewValueState(s, ValueDescriptor[string]{Name: "v", Codec: String, TTL: ttl}))
	const n = 200
	for i := range n {
		must(0, v.Put(s.Key(fmt.Appendf(nil, "key-%d", i)), fmt.Sprint("v", i)))
	}
	key, h := s.compose(s.Key([]byte("bad")), v.id)
	must(0, s.apply(engine.OpPut, key, h, nil, []byte("short")))
	must(0, s.Close())

	s = must(Open("/db", opts))
	_, err := NewValueState(s, ValueDescriptor[string]{Name: "v", Codec: String})
	if !errors.Is(err, ErrCorruption) || !errors.Is(err, ErrClosed) || !s.closed {
		t.Fatalf("a failed migration: %v (closed %v), want ErrCorruption and ErrClosed, the Store discarded", err, s.closed)
	}
	s = must(Open("/db", opts))
	if p := s.persisted["v"]; !p.TTL {
		t.Fatal("the failed migration's flag was persisted")
	}
	v = must(NewValueState(s, ValueDescriptor[string]{Name: "v", Codec: String, TTL: ttl}))
	for i := range n {
		got, ok, err := v.Get(s.Key(fmt.Appendf(nil, "key-%d", i)))
		if err != nil || !ok || got != fmt.Sprint("v", i) {
			t.Fatalf("key %d after the failed migration: %q %v %v", i, got, ok, err)
		}
	}
	must(0, s.Close())
}

// BenchmarkTTLMigrate: the registration of a value state of keys values (16-byte values,
// after Close and Open: in the LsmStore) with the other TTL flag, which rewrites every value;
// directions alternate. Reports ns per migrated value.
func BenchmarkTTLMigrate(b *testing.B) {
	for _, keys := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("kind=value/keys=%d", keys), func(b *testing.B) {
			dir := b.TempDir()
			opts := Options{MaxParallelism: 128, MemoryBudget: 256 << 20, SegmentSize: 16 << 20}
			ttl := &TTLConfig{TTL: time.Hour}
			s := must(Open(dir, opts))
			v := must(NewValueState(s, ValueDescriptor[string]{Name: "v", Codec: String}))
			for i := range keys {
				must(0, v.Put(s.Key(fmt.Appendf(nil, "key-%08d", i)), fmt.Sprintf("value-%010d", i)))
			}
			must(0, s.Close())
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				s = must(Open(dir, opts))
				c := ttl
				if i%2 == 1 {
					c = nil
				}
				b.StartTimer()
				must(NewValueState(s, ValueDescriptor[string]{Name: "v", Codec: String, TTL: c}))
				b.StopTimer()
				must(0, s.Close())
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(keys), "ns/value")
		})
	}
}
