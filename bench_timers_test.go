package strata

import (
	"encoding/binary"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/strata-db/strata/memory"
)

// BenchmarkTimers: one op registers one event-time timer and advances the watermark by one
// millisecond, with pending timers queued (1M or 10M: each op's timer is due between
// pending/2 and 3·pending/2 ms later, so about one timer fires per op and the number pending
// stays put). Keys are 1M distinct 8-byte keys over 128 key groups, namespaces 8-byte windows
// (Int64), in a Store in memory only. timers/s counts registrations and firings per second
// (each timer is registered once and fired once: register+fire pairs) of wall time;
// timers/cpu-s the same per second of the process's CPU time (getrusage: on a machine shared
// with other work, what one core does); B/timer is the budget's timer bytes per pending timer
// (memory.PurposeTimers, outside the Go heap). The 10M case needs about 2 GiB of budget and
// ten seconds of setup.
func BenchmarkTimers(b *testing.B) {
	for _, tc := range []struct {
		name    string
		pending int
	}{{"1M", 1_000_000}, {"10M", 10_000_000}} {
		b.Run("pending="+tc.name, func(b *testing.B) {
			s, err := Open("", Options{MemoryBudget: 3 << 30, SegmentSize: 16 << 20})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ts := must(NewTimerService(s, TimerServiceDescriptor[int64]{Name: "windows", NamespaceCodec: Int64}))
			const nkeys = 1 << 20
			var kb [8]byte
			rng := rand.New(rand.NewPCG(1, 2))
			p := int64(tc.pending)
			register := func(now int64, i int) {
				// The record's key: its bytes, then Store.Key (xxh3 and the key group), as a task
				// does per record (a table of a million prepared Keys would add a cache miss of
				// its own per op).
				binary.BigEndian.PutUint64(kb[:], uint64(i&(nkeys-1))*0x9e3779b97f4a7c15)
				ts0 := now + p/2 + rng.Int64N(p)
				if err := ts.RegisterEventTimeTimer(s.Key(kb[:]), ts0/1000, ts0); err != nil {
					b.Fatal(err)
				}
			}
			start := time.Now()
			for i := range tc.pending {
				register(0, i)
			}
			b.Logf("%d timers registered in %v", tc.pending, time.Since(start).Round(time.Millisecond))
			fired := 0
			fire := func(x Timer[int64]) error { fired++; return nil }
			// Start the watermark where the pending timers begin to be due.
			now := p / 2
			if err := ts.AdvanceWatermark(now, fire); err != nil {
				b.Fatal(err)
			}
			fired = 0
			b.ReportAllocs()
			i := tc.pending
			start = time.Now()
			cpu0 := processCPU()
			for b.Loop() {
				register(now, i)
				i++
				now++
				if err := ts.AdvanceWatermark(now, fire); err != nil {
					b.Fatal(err)
				}
			}
			el, cpu := time.Since(start), processCPU()-cpu0
			n := ts.NumEventTimeTimers()
			b.ReportMetric(float64(fired)/el.Seconds(), "timers/s")
			if cpu > 0 {
				b.ReportMetric(float64(fired)/cpu.Seconds(), "timers/cpu-s")
			}
			b.ReportMetric(float64(s.Budget().UsedBy(memory.PurposeTimers))/float64(n), "B/timer")
			if n < tc.pending*9/10 || n > tc.pending*11/10 {
				b.Fatalf("%d timers pending after %d ops, want about %d", n, b.N, tc.pending)
			}
		})
	}
}

// processCPU returns the user and system CPU time the process has used (0 where getrusage
// fails).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
