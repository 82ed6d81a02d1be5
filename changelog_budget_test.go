package strata

import (
	"context"
	"encoding/binary"
	"path/filepath"
	"testing"
	"time"

	"github.com/strata-db/strata/checkpoint"
)

// TestChangelogFullBudget: with the changelog on and state far beyond a small budget, a
// changelog append refused for memory while the tiers fill the budget must wait for the
// background work that frees it (as the FreshTable write does), not stop the Store: persisting
// the changelog buffer alone frees nothing when the budget is full of the tiers. Found by
// bench/cmd/flightdemo with -changelog under a 64 MiB budget (sticky "changelog append
// failed: ... memory budget exhausted"). With materializations every 50 ms, a FreshTable
// segment refused while a materialization pins memory must wait for it likewise (its pins
// count as background work in flight, and their release as memory given back).
func TestChangelogFullBudget(t *testing.T) {
	for _, tc := range []struct {
		name     string
		interval time.Duration
	}{{"materializations=none", -1}, {"materializations=50ms", 50 * time.Millisecond}} {
		t.Run(tc.name, func(t *testing.T) { testChangelogFullBudget(t, tc.interval) })
	}
}

func testChangelogFullBudget(t *testing.T, interval time.Duration) {
	dir := t.TempDir()
	st, err := checkpoint.NewDirStorage(filepath.Join(dir, "ck"))
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{MemoryBudget: 64 << 20, SegmentSize: 16 << 20, BackpressureTimeout: 5 * time.Second,
		Checkpoint: CheckpointOptions{Storage: st, Grace: checkpoint.NoGrace,
			Changelog: &ChangelogOptions{MaterializationInterval: interval}}}
	s, err := Open(filepath.Join(dir, "store"), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	v, err := NewValueState(s, ValueDescriptor[[]byte]{Name: "v", Codec: Bytes})
	if err != nil {
		t.Fatal(err)
	}
	// Live state of 2.5× the budget without -race, 0.75× with it (a quarter of the writes)
	// plus the superseded versions and the log: enough for evictions and backpressure.
	val := make([]byte, 1000)
	var kb [8]byte
	n := raceScale(320_000)
	if testing.Short() { // still 1.9× the budget live (the emulated arm64 run is -short)
		n /= 2
	}
	ctx := context.Background()
	var p *PendingCheckpoint
	id := uint64(0)
	for i := range n {
		binary.BigEndian.PutUint64(kb[:], uint64(i%(n/2+n/4)))
		binary.LittleEndian.PutUint64(val, uint64(i))
		if err := v.Put(s.Key(kb[:]), val); err != nil {
			t.Fatalf("write %d: %v (changelog %+v)", i, err, s.ChangelogStats())
		}
		if i%20_000 == 0 {
			if p != nil {
				if _, err := p.Wait(ctx); err != nil {
					t.Fatal(err)
				}
				if err := s.NotifyCheckpointComplete(id); err != nil {
					t.Fatal(err)
				}
			}
			id++
			if p, err = s.StartCheckpoint(id, nil); err != nil {
				t.Fatalf("checkpoint %d: %v", id, err)
			}
		}
	}
	if _, err := p.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Slices.Evictions == 0 || st.Stalls.BackpressureWaits == 0 {
		t.Errorf("the state did not outgrow the budget (evictions %d, backpressure waits %d): the test tests nothing",
			st.Slices.Evictions, st.Stalls.BackpressureWaits)
	}
}
