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
