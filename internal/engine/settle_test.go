package engine

import (
	"bytes"
	"testing"
	"time"

	"github.com/strata-db/strata/memory"
)

// TestBackpressureSeesFinishedJob: a write refused for memory while the job that frees it has
// set its done flag but not yet bumped ready (finished) waits for that job instead of failing.
// The window is widened (finishedGap, ownerGap): install, and run after a submission, wait
// until a job in flight has set its done flag, which bumps ready 20 ms later; a budget of one
// 4 MiB segment and a half makes every roll wait for the flush of the segment before it, so
// each roll meets the window.
// Before unsettled, the waits looked at ready alone, took the finished flush for no work at all
// and failed the write with ErrMemoryBudget at once (the Kafka runner's TestBeyondStateBudget
// under -race, 2 in 25 runs; CI of 2026-12-04).
func TestBackpressureSeesFinishedJob(t *testing.T) {
	doneSet := make(chan struct{}, 1)
	finishedGap = func() {
		select {
		case doneSet <- struct{}{}:
		default:
		}
		time.Sleep(20 * time.Millisecond)
	}
	ownerGap = func() { // let a job in flight set its done flag after install looked or run submitted it
		select {
		case <-doneSet:
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Cleanup(func() { finishedGap, ownerGap = nil, nil })
	e := openTest(t, Options{Dir: t.TempDir(), Budget: memory.NewBudget(6 << 20), SegmentSize: 4 << 20})
	v := bytes.Repeat([]byte{7}, 8<<10)
	const n = 2000 // 16 MiB of values: four segments' worth, through a budget of one and a half
	for i := uint64(0); i < n; i++ {
		k, h := testKey(1, u64(i))
		if err := e.Apply(opPut(k, h, v)); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
	if err := e.Drain(); err != nil {
		t.Fatal(err)
	}
	for i := uint64(0); i < n; i += 97 {
		k, h := testKey(1, u64(i))
		if got, st := e.Get(h, k); st != found || !bytes.Equal(got, v) {
			t.Fatalf("get %d: status %v, %d bytes", i, st, len(got))
		}
	}
}
