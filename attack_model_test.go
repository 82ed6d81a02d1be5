package strata

// A model-style random workload on a real directory with a small budget (16 MiB segments,
// 64 or 128 MiB budget) and state several times the budget, with reopen steps (Close + Open:
// every acknowledged write must survive), read-your-write checks at random and a check of
// every slot at the end. Duration: STRATA_ATTACK_MODEL_DURATION (default 10s, 4s with -short);
// seeds: STRATA_ATTACK_MODEL_SEEDS (comma-separated, default two time-based seeds). Runs the
// seeds in parallel.

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestAttackModelRealDir(t *testing.T) {
	dur := 10 * time.Second
	if testing.Short() {
		dur = 4 * time.Second
	}
	if d, err := time.ParseDuration(os.Getenv("STRATA_ATTACK_MODEL_DURATION")); err == nil {
		dur = d
	}
	var seeds []uint64
	for _, f := range strings.Split(os.Getenv("STRATA_ATTACK_MODEL_SEEDS"), ",") {
		if v, err := strconv.ParseUint(strings.TrimSpace(f), 10, 64); err == nil {
			seeds = append(seeds, v)
		}
	}
	if len(seeds) == 0 {
		now := uint64(time.Now().UnixNano())
		seeds = []uint64{now, now + 1}
	}
	for _, seed := range seeds {
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) {
			t.Parallel()
			attackModelRun(t, seed, dur)
		})
	}
}

func attackModelRun(t *testing.T, seed uint64, dur time.Duration) {
	t.Logf("seed %d (replay: STRATA_ATTACK_MODEL_SEEDS=%d STRATA_ATTACK_MODEL_DURATION=%v)", seed, seed, dur)
	rng := rand.New(rand.NewPCG(seed, 99))
	budget := int64(64 << 20)
	if seed%2 == 1 {
		budget = 128 << 20
	}
	w := awWorkload{slots: 3 * int32(20_000+rng.IntN(80_000)), maxVal: 200 + rng.IntN(2000)}
	opts := Options{MaxParallelism: 1 << (7 + rng.IntN(4)), MemoryBudget: budget, SegmentSize: 16 << 20,
		BackgroundWorkers: 1 + rng.IntN(3)}
	if rng.IntN(3) == 0 {
		opts.BlockCacheSize = -1
	}
	dir := filepath.Join(t.TempDir(), "db")
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.Close() }()
	st, err := registerAW(s)
	if err != nil {
		t.Fatal(err)
	}
	m := newAWModel()
	ops, reopens, checks := 0, 0, 0
	var maxLSM int64
	var total StoreStats
	add := func(x StoreStats) {
		total.Evictions += x.Evictions
		total.Flushes += x.Flushes
		total.LSMCompactions += x.LSMCompactions
		total.BackpressureWaits += x.BackpressureWaits
		total.Transforms += x.Transforms
		total.Compactions += x.Compactions
	}
	nextReopen := 50_000 + rng.IntN(400_000)
	deadline := time.Now().Add(dur)
	for time.Now().Before(deadline) {
		for range 1000 {
			if err := w.step(rng, m, st); err != nil {
				t.Fatalf("seed %d op %d: %v", seed, ops, err)
			}
			ops++
			if rng.IntN(8) == 0 {
				checks++
				if err := st.checkSlot(m, rng.Int32N(w.slots)); err != nil {
					t.Fatalf("seed %d op %d: %v", seed, ops, err)
				}
			}
		}
		if ops >= nextReopen {
			nextReopen = ops + 50_000 + rng.IntN(400_000)
			reopens++
			maxLSM = max(maxLSM, s.Stats().LSMBytes)
			add(s.Stats())
			if err := s.Close(); err != nil {
				t.Fatalf("seed %d op %d: close: %v", seed, ops, err)
			}
			if s, err = Open(dir, opts); err != nil {
				t.Fatalf("seed %d op %d: reopen: %v", seed, ops, err)
			}
			if st, err = registerAW(s); err != nil {
				t.Fatal(err)
			}
			for range 5000 {
				if err := st.checkSlot(m, rng.Int32N(w.slots)); err != nil {
					t.Fatalf("seed %d op %d after reopen %d: %v", seed, ops, reopens, err)
				}
			}
		}
	}
	stats := s.Stats()
	maxLSM = max(maxLSM, stats.LSMBytes)
	add(stats)
	if err := st.checkAll(w, m); err != nil {
		t.Fatalf("seed %d final check: %v", seed, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(dir, opts); err != nil {
		t.Fatal(err)
	}
	if st, err = registerAW(s); err != nil {
		t.Fatal(err)
	}
	if err := st.checkAll(w, m); err != nil {
		t.Fatalf("seed %d final check after reopen: %v", seed, err)
	}
	t.Logf("seed %d: budget %d MiB, %d slots, values <= %d B, maxP %d: %d ops, %d reopens, %d spot checks; max LSM %d MiB; transforms %d compactions %d evictions %d flushes %d LSM compactions %d backpressure waits %d",
		seed, budget>>20, w.slots, w.maxVal, opts.MaxParallelism, ops, reopens, checks, maxLSM>>20,
		total.Transforms, total.Compactions, total.Evictions, total.Flushes, total.LSMCompactions, total.BackpressureWaits)
}
