package strata

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-db/strata/checkpoint"
	"github.com/strata-db/strata/internal/checkpointfs"
	"github.com/strata-db/strata/internal/vfs"
)

// TestTTLNever: a TTL of TTLNever (Flink's Long.MAX_VALUE ms, beyond time.Duration's range)
// never expires, whatever the stamp and the clock, without overflow, in reads and in
// compactions; a TTL of the largest time.Duration (292 years) does expire, and other negative
// TTLs are refused.
func TestTTLNever(t *testing.T) {
	s := openTest(t, Options{MaxParallelism: 8})
	if _, err := NewValueState(s, ValueDescriptor[int64]{Name: "v", Codec: Int64, TTL: &TTLConfig{TTL: -2}}); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("TTL -2ns: %v, want ErrInvalidOptions", err)
	}
	for _, c := range []struct {
		name       string
		ttl        time.Duration
		stamp, now int64
		live       bool
	}{
		{"never/early stamp, late clock", TTLNever, 1, math.MaxInt64 - 1, true},
		{"never/late stamp", TTLNever, math.MaxInt64 - 10, math.MaxInt64 - 1, true},
		{"never/zero stamp", TTLNever, 0, math.MaxInt64 - 1, true},
		{"292 years/expires", time.Duration(math.MaxInt64 - 1), 1, math.MaxInt64 - 1, false},
		{"292 years/late stamp saturates", time.Duration(math.MaxInt64 - 1), math.MaxInt64 - 10, math.MaxInt64 - 1, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var now atomic.Int64
			now.Store(c.stamp)
			s := openTest(t, Options{MaxParallelism: 8, MemoryBudget: 64 << 20, SegmentSize: 4 << 20,
				Clock: now.Load})
			v := must(NewValueState(s, ValueDescriptor[int64]{Name: "v", Codec: Int64, TTL: &TTLConfig{TTL: c.ttl}}))
			m := must(NewMapState(s, MapDescriptor[int64, int64]{Name: "m", KeyCodec: Int64, ValueCodec: Int64,
				TTL: &TTLConfig{TTL: c.ttl}}))
			k := s.Key([]byte("k"))
			must(0, v.Put(k, 7))
			must(0, m.Put(k, 1, 8))
			now.Store(c.now)
			must(0, s.seal())
			must(0, s.WaitBackground()) // slices: a compaction's TTL filter judges them
			_, ok, err := v.Get(k)
			if err != nil || ok != c.live {
				t.Fatalf("value: live %v, %v; want live %v", ok, err, c.live)
			}
			_, ok, err = m.Get(k, 1)
			if err != nil || ok != c.live {
				t.Fatalf("map entry: live %v, %v; want live %v", ok, err, c.live)
			}
		})
	}
}

// TestCheckpointGCStoreClock: with Options.Clock set, checkpoint GC measures an unreachable
// object's age against the grace on the Store's clock — by how far it moved since Open, not
// its epoch: a clock that starts at 0 (Flink's ManualClock) and is driven an hour ahead sees
// the objects go; one that does not move keeps them for the grace, whatever the wall clock.
func TestCheckpointGCStoreClock(t *testing.T) {
	for _, c := range []struct {
		name    string
		advance time.Duration
		want    []uint64
	}{
		{"advanced past the grace", time.Hour, []uint64{2}},
		{"not advanced", 0, []uint64{1, 2}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			st := must(checkpointfs.NewDirStorage(vfs.Default(), t.TempDir()))
			var now atomic.Int64 // starts at 0, decades behind the storage's dates
			s := openTest(t, Options{MaxParallelism: 8, MemoryBudget: 64 << 20, SegmentSize: 4 << 20, Clock: now.Load,
				Checkpoint: CheckpointOptions{Storage: st, Owner: "o", Grace: 10 * time.Minute}})
			v := must(NewValueState(s, ValueDescriptor[int64]{Name: "v", Codec: Int64}))
			for id := uint64(1); id <= 2; id++ {
				must(0, v.Put(s.Key([]byte{byte(id)}), int64(id)))
				must(s.Checkpoint(ctx, id, nil))
				if id == 2 {
					now.Add(c.advance.Milliseconds()) // on the Store's clock only
				}
				must(0, s.NotifyCheckpointComplete(id))
			}
			must(0, s.WaitCheckpointGC())
			if ids := must(checkpoint.ListCheckpoints(ctx, st, "o")); !slices.Equal(ids, c.want) {
				t.Fatalf("checkpoints after GC: %v, want %v", ids, c.want)
			}
		})
	}
}

// refusingStorage fails every Put and PutReader while refuse is set (an object store's
// outage).
type refusingStorage struct {
	checkpoint.Storage
	refuse atomic.Bool
}

func (r *refusingStorage) Put(ctx context.Context, name string, data []byte) error {
	if r.refuse.Load() {
		return errors.New("storage outage (test)")
	}
	return r.Storage.Put(ctx, name, data)
}

func (r *refusingStorage) PutReader(ctx context.Context, name string, rd io.Reader, size int64) error {
	if r.refuse.Load() {
		return errors.New("storage outage (test)")
	}
	return r.Storage.PutReader(ctx, name, rd, size)
}

// TestStoreMaterialize: Store.Materialize takes a materialization now and returns when it is
// durable (Stats.Materializations) or failed (Stats.MaterializationFailures and
// LastMaterializationError, the error returned); it is refused with ErrChangelogOff without the
// changelog. Stats count the changelog's records and bytes appended, persisted (by a changelog
// checkpoint) and truncated (by the completion of a checkpoint based on a later
// materialization).
func TestStoreMaterialize(t *testing.T) {
	ctx := context.Background()
	off := openTest(t, Options{MaxParallelism: 8, MemoryBudget: 64 << 20, SegmentSize: 4 << 20})
	if err := off.Materialize(ctx); !errors.Is(err, ErrChangelogOff) {
		t.Fatalf("Materialize without the changelog: %v, want ErrChangelogOff", err)
	}

	st := &refusingStorage{Storage: must(checkpointfs.NewDirStorage(vfs.Default(), t.TempDir()))}
	s := openTest(t, Options{MaxParallelism: 8, MemoryBudget: 64 << 20, SegmentSize: 4 << 20,
		Checkpoint: CheckpointOptions{Storage: st, Owner: "o", Grace: checkpoint.NoGrace,
			Changelog: &ChangelogOptions{MaterializationInterval: -1, MaxMaterializationFailures: 100}}})
	v := must(NewValueState(s, ValueDescriptor[int64]{Name: "v", Codec: Int64}))
	put := func(from, n int) {
		for i := from; i < from+n; i++ {
			must(0, v.Put(s.Key(fmt.Appendf(nil, "k%d", i)), int64(i)))
		}
	}
	put(0, 100)
	if got := s.Stats(); got.Changelog.AppendedRecords != 100 || got.Changelog.AppendedBytes < 100*10 ||
		got.Changelog.PersistedRecords != 0 || got.Changelog.Materializations != 0 {
		t.Fatalf("after 100 puts: appended %d records (%d B), persisted %d, materializations %d",
			got.Changelog.AppendedRecords, got.Changelog.AppendedBytes, got.Changelog.PersistedRecords, got.Changelog.Materializations)
	}

	st.refuse.Store(true)
	err := s.Materialize(ctx)
	got := s.Stats()
	if err == nil || got.Changelog.MaterializationFailures != 1 || got.Changelog.LastMaterializationError == "" || got.Changelog.Materializations != 0 {
		t.Fatalf("materialization during an outage: %v; failures %d, last %q, durable %d",
			err, got.Changelog.MaterializationFailures, got.Changelog.LastMaterializationError, got.Changelog.Materializations)
	}
	st.refuse.Store(false)
	must(0, s.Materialize(ctx))
	if got := s.Stats(); got.Changelog.Materializations != 1 || got.Changelog.MaterializationFailures != 1 {
		t.Fatalf("after the outage: %d durable, %d failed materializations", got.Changelog.Materializations, got.Changelog.MaterializationFailures)
	}

	put(100, 50)
	// A changelog checkpoint: its persist stores every buffered record (the Writer's one
	// object), and its completion truncates the 100 logged before the materialization.
	must(s.Checkpoint(ctx, 1, nil))
	must(0, s.NotifyCheckpointComplete(1))
	got = s.Stats()
	if got.Changelog.AppendedRecords != 150 || got.Changelog.PersistedRecords != 150 || got.Changelog.PersistedBytes == 0 ||
		got.Changelog.TruncatedRecords != 100 {
		t.Fatalf("after checkpoint 1: appended %d, persisted %d (%d B), truncated %d; want 150, 150, >0, 100",
			got.Changelog.AppendedRecords, got.Changelog.PersistedRecords, got.Changelog.PersistedBytes, got.Changelog.TruncatedRecords)
	}
	must(0, s.Materialize(ctx))
	put(150, 10)
	must(s.Checkpoint(ctx, 2, nil))
	must(0, s.NotifyCheckpointComplete(2)) // based on the second materialization: the first's log goes
	got = s.Stats()
	if got.Changelog.Materializations != 2 || got.Changelog.AppendedRecords != 160 || got.Changelog.PersistedRecords != 160 ||
		got.Changelog.TruncatedRecords != 150 || got.Changelog.TruncatedBytes == 0 {
		t.Fatalf("after checkpoint 2: %d materializations, appended %d, persisted %d, truncated %d (%d B); want 2, 160, 160, 150, >0",
			got.Changelog.Materializations, got.Changelog.AppendedRecords, got.Changelog.PersistedRecords,
			got.Changelog.TruncatedRecords, got.Changelog.TruncatedBytes)
	}
}

// TestCompactAll: a full compaction moves every tier down — the FreshTable empty, one run per
// bucket, the LsmStore in its last level — and applies TTL compaction cleanup to everything,
// including data that background compactions never reach (a single run, an LSM file that is
// not due), which WaitBackground alone leaves in place.
func TestCompactAll(t *testing.T) {
	ctx := context.Background()
	var now atomic.Int64
	now.Store(1_000_000)
	s, err := open(t.TempDir(), Options{MaxParallelism: 8, MemoryBudget: 64 << 20, SegmentSize: 4 << 20,
		Clock: now.Load}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	v := must(NewValueState(s, ValueDescriptor[int64]{Name: "v", Codec: Int64,
		TTL: &TTLConfig{TTL: time.Second, Cleanup: TTLCleanup{NoSweep: true}}}))
	keep := must(NewValueState(s, ValueDescriptor[int64]{Name: "keep", Codec: Int64}))
	const n = 3000
	put := func(from int) {
		for i := from; i < from+n/3; i++ {
			k := s.Key(fmt.Appendf(nil, "k%d", i))
			must(0, v.Put(k, int64(i)))
			must(0, keep.Put(k, int64(i)))
		}
	}
	put(0) // → the LsmStore
	must(0, s.seal())
	must(0, s.WaitBackground())
	for i := 0; i < 100 && s.Stats().Slices.Count > 0 && must(s.Evict()); i++ {
		must(0, s.WaitBackground())
	}
	put(n / 3) // → slices
	must(0, s.seal())
	must(0, s.WaitBackground())
	put(2 * n / 3) // → the FreshTable
	now.Add(2000)  // every v expired
	must(0, s.WaitBackground())
	before := s.Stats()
	if before.LSM.Files == 0 || before.Slices.Count == 0 || before.Fresh.Records == 0 {
		t.Fatalf("the state is not in every tier: %d LSM files, %d slices, %d records", before.LSM.Files, before.Slices.Count, before.Fresh.Records)
	}
	if before.TTL.CompactionEntries >= n {
		t.Fatalf("background work alone cleaned %d of %d expired values: the test proves nothing", before.TTL.CompactionEntries, n)
	}
	must(0, s.CompactAll(ctx))
	st := s.Stats()
	if st.Fresh.Records != 0 || st.Slices.MaxChain > 1 || st.LSM.L0Files != 0 {
		t.Fatalf("after CompactAll: %d FreshTable records, chains of %d runs, %d L0 files", st.Fresh.Records, st.Slices.MaxChain, st.LSM.L0Files)
	}
	last := 0
	for l, b := range st.LSM.LevelBytes {
		if b > 0 {
			last = l
		}
	}
	for l, b := range st.LSM.LevelBytes[:last] {
		if b != 0 {
			t.Fatalf("after CompactAll: level %d holds %d bytes above the last level %d", l, b, last)
		}
	}
	if got := st.TTL.CompactionEntries; got < n {
		t.Fatalf("CompactAll's compactions removed %d expired values, want all %d", got, n)
	}
	for i := range n {
		k := s.Key(fmt.Appendf(nil, "k%d", i))
		if _, ok := must2(v.Get(k)); ok {
			t.Fatalf("expired value %d still read", i)
		}
		if x, ok := must2(keep.Get(k)); !ok || x != int64(i) {
			t.Fatalf("value %d without TTL: %d, %v", i, x, ok)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.CompactAll(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("CompactAll after Close: %v, want ErrClosed", err)
	}
}

func must2[A, B any](a A, b B, err error) (A, B) {
	if err != nil {
		panic(err)
	}
	return a, b
}

// TestStoreEvict: Evict starts an eviction of the coldest slices and reports it running until
// it is installed; called again after each WaitBackground it moves every slice into the
// LsmStore, with the state intact. With nothing to evict — no slices, a Store in memory only —
// it reports false and no error; on a closed Store ErrClosed.
func TestStoreEvict(t *testing.T) {
	const n = 2000
	for _, c := range []struct {
		name   string
		dir    bool // a directory: an LsmStore to evict to
		load   bool // slices to evict
		closed bool
		want   bool
		err    error
	}{
		{name: "slices", dir: true, load: true, want: true},
		{name: "no slices", dir: true},
		{name: "in memory", load: true},
		{name: "closed", dir: true, load: true, closed: true, err: ErrClosed},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := ""
			if c.dir {
				dir = t.TempDir()
			}
			s := must(open(dir, Options{MaxParallelism: 8, MemoryBudget: 64 << 20, SegmentSize: 4 << 20}, nil))
			defer s.Close()
			v := must(NewValueState(s, ValueDescriptor[int64]{Name: "v", Codec: Int64}))
			if c.load {
				for i := range n {
					must(0, v.Put(s.Key(fmt.Appendf(nil, "k%d", i)), int64(i)))
				}
				must(0, s.seal())
				must(0, s.WaitBackground())
				if s.Stats().Slices.Count == 0 {
					t.Fatal("no slices after the load: the case proves nothing")
				}
			}
			if c.closed {
				must(0, s.Close())
			}
			ok, err := s.Evict()
			if ok != c.want || !errors.Is(err, c.err) {
				t.Fatalf("Evict = %v, %v; want %v, %v", ok, err, c.want, c.err)
			}
			if c.closed {
				return
			}
			before := s.Stats()
			for i := 0; ok && i < 100; i++ {
				if again, err := s.Evict(); !again || err != nil { // in flight until installed
					t.Fatalf("Evict before the install = %v, %v; want true, nil", again, err)
				}
				must(0, s.WaitBackground())
				ok = must(s.Evict())
			}
			st := s.Stats()
			if c.want && (st.Slices.Count != 0 || st.Slices.Evictions == 0 || st.LSM.Files == 0) {
				t.Fatalf("after evicting: %d slices left, %d evictions, %d LSM files", st.Slices.Count, st.Slices.Evictions, st.LSM.Files)
			}
			if !c.want && (st.Slices.Count != before.Slices.Count || st.Slices.Evictions != 0) {
				t.Fatalf("nothing to evict, yet %d slices of %d left, %d evictions", st.Slices.Count, before.Slices.Count, st.Slices.Evictions)
			}
			if !c.load {
				return
			}
			for i := range n {
				if x, found, err := v.Get(s.Key(fmt.Appendf(nil, "k%d", i))); err != nil || !found || x != int64(i) {
					t.Fatalf("k%d = %d %v %v after Evict", i, x, found, err)
				}
			}
		})
	}
}

// TestStoreCheck: Check passes on a row cache filled by reads of the LsmStore and refreshed by
// writes, and on one that still holds a copy of a TTL value expired and cleaned up below it (a
// read never returns it); it has nothing to check in a Store in memory only, and fails with
// ErrClosed on a closed Store. (internal/engine's TestCheckRowCacheReads breaks a cache and
// sees Check's walk fail.)
func TestStoreCheck(t *testing.T) {
	const n = 300
	for _, c := range []struct {
		name        string
		dir, closed bool
		write       bool // refresh cached keys by writes
		expire      bool // expire every value and compact it away below the cache
		err         error
	}{
		{name: "cached", dir: true},
		{name: "written through", dir: true, write: true},
		{name: "expired below", dir: true, expire: true},
		{name: "in memory"},
		{name: "closed", dir: true, closed: true, err: ErrClosed},
	} {
		t.Run(c.name, func(t *testing.T) {
			var now atomic.Int64
			dir := ""
			if c.dir {
				dir = t.TempDir()
			}
			s := must(open(dir, Options{MaxParallelism: 8, MemoryBudget: 64 << 20, SegmentSize: 4 << 20,
				RowCacheSize: 64 << 10, Clock: now.Load}, nil))
			defer s.Close()
			ttl := &TTLConfig{TTL: time.Second, Cleanup: TTLCleanup{NoSweep: true}}
			v := must(NewValueState(s, ValueDescriptor[int64]{Name: "v", Codec: Int64, TTL: ttl}))
			key := func(i int) Key { return s.Key(fmt.Appendf(nil, "k%d", i)) }
			for i := range n {
				must(0, v.Put(key(i), int64(i)))
			}
			if c.dir {
				pushDown(t, s)
			}
			for i := range n {
				if _, _, err := v.Get(key(i)); err != nil {
					t.Fatal(err)
				}
			}
			st := s.Stats()
			if c.dir != (st.Caches.RowSets == 64 && st.Caches.RowEntries > 0) {
				t.Fatalf("row cache of %d sets, %d entries", st.Caches.RowSets, st.Caches.RowEntries)
			}
			if c.write {
				for i := range n {
					must(0, v.Put(key(i), int64(-i)))
				}
			}
			if c.expire {
				now.Add(2000)
				must(0, s.CompactAll(context.Background()))
				if got := s.Stats(); got.Caches.RowEntries != st.Caches.RowEntries || got.TTL.CompactionEntries == 0 {
					t.Fatalf("CompactAll: %d cache entries (was %d), %d expired values removed below: want the same, some",
						got.Caches.RowEntries, st.Caches.RowEntries, got.TTL.CompactionEntries)
				}
			}
			if c.closed {
				must(0, s.Close())
			}
			if err := s.Check(); !errors.Is(err, c.err) {
				t.Fatalf("Check = %v, want %v", err, c.err)
			}
		})
	}
}
