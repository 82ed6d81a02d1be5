package strata

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"testing"
)

// BenchmarkTimers measures the timer hot paths through the typed API, with pending= timers of
// one service spread over 64Ki keys (8-byte keys, Int64 namespaces, every key group of the
// default 128): op=register registers a new event-time timer after the pending ones (a set
// probe and an append) and deletes it again; op=delete deletes a pending one and registers it
// again (both keep the pending count, so no op pays for a queue's growth); op=fire registers one timer and advances the watermark past the
// oldest pending one, which fires (a pop, a sift and the callback). One op is one such step.
// Names: BenchmarkTimers/op=…/pending=N. Run at GOMAXPROCS=1 (-cpu 1) to compare old and new
// code with benchstat: the timer operations start no background work. Metric: cpu-ns/op, the
// benchmark thread's CPU time per op (Linux; 0 elsewhere), which a loaded machine disturbs
// less than the wall time (time spent waiting for a core is not counted).
func BenchmarkTimers(b *testing.B) {
	for _, op := range []string{"register", "delete", "fire"} {
		for _, pending := range []int{1_000, 100_000} {
			b.Run(fmt.Sprintf("op=%s/pending=%s", op, countName(pending)), func(b *testing.B) {
				benchTimers(b, op, pending)
			})
		}
	}
}

func benchTimers(b *testing.B, op string, pending int) {
	s, err := Open("", Options{MemoryBudget: 256 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ts, err := NewTimerService(s, TimerServiceDescriptor[int64]{Name: "t", NamespaceCodec: Int64})
	if err != nil {
		b.Fatal(err)
	}
	const nkeys = 1 << 16
	keys := make([]Key, nkeys)
	var kb [8]byte
	for i := range keys {
		binary.BigEndian.PutUint64(kb[:], uint64(i)*0x9e3779b97f4a7c15)
		keys[i] = s.Key(kb[:])
	}
	// Timer i: key i mod nkeys, namespace i / nkeys, timestamp i — unique per i.
	reg := func(i int) {
		if err := ts.RegisterEventTimeTimer(keys[i&(nkeys-1)], int64(i/nkeys), int64(i)); err != nil {
			b.Fatal(err)
		}
	}
	for i := range pending {
		reg(i)
	}
	var sum int64
	fire := func(x Timer[int64]) error { sum += x.Timestamp; return nil }
	runtime.LockOSThread() // threadCPU measures this thread
	defer runtime.UnlockOSThread()
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := threadCPU()
	switch op {
	case "register":
		for i := range b.N {
			reg(pending + i)
			j := pending + i
			if err := ts.DeleteEventTimeTimer(keys[j&(nkeys-1)], int64(j/nkeys), int64(j)); err != nil {
				b.Fatal(err)
			}
		}
	case "delete":
		for i := range b.N {
			j := i % pending
			if err := ts.DeleteEventTimeTimer(keys[j&(nkeys-1)], int64(j/nkeys), int64(j)); err != nil {
				b.Fatal(err)
			}
			reg(j)
		}
	case "fire":
		for i := range b.N {
			reg(pending + i)
			if err := ts.AdvanceWatermark(int64(i), fire); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(threadCPU()-cpu0)/float64(b.N), "cpu-ns/op")
	if op == "fire" && ts.NumEventTimeTimers() != pending {
		b.Fatalf("%d timers pending, want %d", ts.NumEventTimeTimers(), pending)
	}
}
