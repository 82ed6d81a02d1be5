package strata

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-db/strata/checkpoint"
)

// TestCheckpointStorageBoundShrink: with the changelog on, checkpoint storage stays within
// SpaceAmplificationCap (1.5) × the live state while the state shrinks — deletes, or TTL
// expiry with no write touching the expired keys — because the cap compares the log and the
// last materialization with the live state (ChangelogStats.LiveStateBytes, the tiers' bytes),
// not with the state when it was last materialized. Storage is every file under the
// checkpoint directory once the garbage-collection grace has passed and the last checkpoints
// collected what they no longer list (a Store at rest, as in TestCheckpointStorageBound; the
// worst materialization and log over live after a round is logged: within a round the log
// may outgrow the cap while a materialization uploads, since one runs at a time).
func TestCheckpointStorageBoundShrink(t *testing.T) {
	for _, mode := range []string{"deletes", "ttl"} {
		t.Run("shrink="+mode, func(t *testing.T) { testCheckpointStorageShrink(t, mode == "ttl") })
	}
}

func testCheckpointStorageShrink(t *testing.T, ttl bool) {
	ctx := context.Background()
	const grace = time.Minute // of Options.Clock: the run's end passes it once
	dir := t.TempDir()
	ckDir := filepath.Join(dir, "ck")
	st := must(checkpoint.NewDirStorage(ckDir))
	var now atomic.Int64
	now.Store(time.Now().UnixMilli())
	opts := Options{MaxParallelism: 128, MemoryBudget: 64 << 20, Clock: now.Load,
		Checkpoint: CheckpointOptions{Storage: st, Grace: grace,
			Changelog: &ChangelogOptions{MaterializationInterval: -1, SpaceAmplificationCap: 1.5}}}
	s := must(Open(filepath.Join(dir, "store"), opts))
	defer s.Close()
	d := ValueDescriptor[[]byte]{Name: "v", Codec: Bytes}
	if ttl {
		d.TTL = &TTLConfig{TTL: 20 * time.Minute, Cleanup: TTLCleanup{ReclaimWithin: 2 * time.Minute}} // ten rounds; the sweep reclaims within one
	}
	v := must(NewValueState(s, d))
	// hot keys are written again in turn (each every 8 rounds: 16 minutes); the others are
	// written once, then deleted in the first 5 rounds or left to expire (at round 10).
	const keys, hot, valLen, rounds = 40_000, 5_000, 200, 15
	rng := rand.New(rand.NewPCG(3, 4))
	val := make([]byte, valLen)
	var kb [8]byte
	key := func(i int) Key {
		binary.BigEndian.PutUint64(kb[:], uint64(i))
		return s.Key(kb[:])
	}
	for i := range keys {
		binary.LittleEndian.PutUint64(val, rng.Uint64())
		must(0, v.Put(key(i), val))
	}
	worst := 0.0
	const perRound = (keys - hot) / 5
	for id := uint64(1); id <= rounds; id++ {
		if !ttl && id <= 5 {
			for i := hot + int(id-1)*perRound; i < hot+int(id)*perRound; i++ {
				must(0, v.Clear(key(i)))
			}
		}
		for i := int(id % 8); i < hot; i += 8 {
			binary.LittleEndian.PutUint64(val, rng.Uint64())
			must(0, v.Put(key(i), val))
		}
		now.Add(time.Minute.Milliseconds())
		p := must(s.StartCheckpoint(id, nil))
		must(p.Wait(ctx))
		must(0, s.NotifyCheckpointComplete(id))
		now.Add(time.Minute.Milliseconds())
		must(0, s.WaitBackground())
		cs := s.ChangelogStats()
		if r := float64(cs.MaterializedBytes+cs.LogBytes) / float64(cs.LiveStateBytes); r > worst && cs.MaterializedBytes > 0 {
			worst = r
		}
	}
	// The run ends: one more checkpoint sees the state as the writes left it, and a
	// materialization the cap starts there ends and is listed by the next one; then the
	// clock passes the grace, and the last checkpoints' collections delete what is unlisted,
	// once the Store is at rest.
	next := checkpointAtRest(t, s, uint64(rounds+1), 2)
	now.Add((grace + time.Minute).Milliseconds())
	checkpointAtRest(t, s, next, 2)
	stored, _ := storedBytes(ckDir)
	cs := s.ChangelogStats()
	ratio := float64(stored) / float64(cs.LiveStateBytes)
	t.Logf("%d rounds, %d keys of %d left: storage %d bytes, live %d bytes: %.2f× (worst materialization + log over live after a round: %.2f×; %+v)",
		rounds, hot, keys, stored, cs.LiveStateBytes, ratio, worst, cs)
	if ratio > 1.5 {
		t.Fatalf("checkpoint storage %.2f× the live state after the grace (cap 1.5×)", ratio)
	}
}
