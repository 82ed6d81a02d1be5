package strata

import (
	"context"
	"math"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-db/strata/checkpoint"
	"github.com/strata-db/strata/internal/vfs"
)

// TestTTLNever: a TTL of TTLNever (Flink's Long.MAX_VALUE ms, beyond time.Duration's range)
// never expires, whatever the stamp and the clock, without overflow, in reads and in
// compactions; a TTL of the largest time.Duration (292 years) does expire.
func TestTTLNever(t *testing.T) {
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
// object's age (its Created time against the grace) on the Store's clock, not the wall clock —
// a test that drives the clock past the grace sees the objects go (Flink's tests drive a
// manual clock the same way).
func TestCheckpointGCStoreClock(t *testing.T) {
	ctx := context.Background()
	st := must(checkpoint.NewDirStorage(vfs.Default(), t.TempDir()))
	var now atomic.Int64
	now.Store(time.Now().UnixMilli())
	s := openTest(t, Options{MaxParallelism: 8, MemoryBudget: 64 << 20, SegmentSize: 4 << 20, Clock: now.Load,
		Checkpoint: CheckpointOptions{Storage: st, Owner: "o", Grace: 10 * time.Minute}})
	v := must(NewValueState(s, ValueDescriptor[int64]{Name: "v", Codec: Int64}))
	for id := uint64(1); id <= 2; id++ {
		must(0, v.Put(s.Key([]byte{byte(id)}), int64(id)))
		must(s.Checkpoint(ctx, id, nil))
		if id == 2 {
			now.Add(time.Hour.Milliseconds()) // past the grace on the Store's clock only
		}
		must(0, s.NotifyCheckpointComplete(id))
	}
	must(0, s.WaitCheckpointGC())
	ids := must(checkpoint.ListCheckpoints(ctx, st, "o"))
	if !slices.Equal(ids, []uint64{2}) {
		t.Fatalf("checkpoints after GC: %v, want [2] (checkpoint 1 is an hour old on the Store's clock)", ids)
	}
}
