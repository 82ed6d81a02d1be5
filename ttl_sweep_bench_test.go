package strata

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkTTLSweep measures the TTL sweep's cost against what expired and what lives: a
// Store holds live values (TTL of an hour) written and transformed into slices first, then
// dead values (TTL of 100 ms, same value size) in a run of their own in each bucket's chain;
// the clock passes the dead values' expiry and one op is WaitBackground, in which the sweep
// rewrites the runs holding expired data. The setup (a new Store per op) is not timed. If
// the cost follows what expired, ns/reclaimed-entry stays flat as live= grows, and
// swept-B/live-B falls. Names: BenchmarkTTLSweep/live=N/dead=M. Metrics: ns/reclaimed-entry
// (the jobs' running time, Stats.TTLSweepNanos, per entry removed), read-B/reclaimed-entry
// (slice bytes the sweep read per entry removed), swept-B/live-B (bytes the sweep read over
// the bytes of live slices).
func BenchmarkTTLSweep(b *testing.B) {
	for _, live := range []int{100_000, 1_000_000} {
		for _, dead := range []int{10_000, 100_000} {
			b.Run(fmt.Sprintf("live=%s/dead=%s", countName(live), countName(dead)), func(b *testing.B) {
				benchTTLSweep(b, live, dead)
			})
		}
	}
}

func countName(n int) string {
	if n >= 1_000_000 {
		return fmt.Sprintf("%dM", n/1_000_000)
	}
	return fmt.Sprintf("%dK", n/1000)
}

func benchTTLSweep(b *testing.B, live, dead int) {
	b.ReportAllocs()
	var nanos, entries, read, liveBytes int64
	for range b.N {
		b.StopTimer()
		var now atomic.Int64
		s, err := Open(b.TempDir(), Options{MaxParallelism: 128, MemoryBudget: 512 << 20, SegmentSize: 16 << 20,
			BackgroundWorkers: 1, Clock: now.Load})
		if err != nil {
			b.Fatal(err)
		}
		long := must(NewValueState(s, ValueDescriptor[uint64]{Name: "long", Codec: Uint64, TTL: &TTLConfig{TTL: time.Hour}}))
		short := must(NewValueState(s, ValueDescriptor[uint64]{Name: "short", Codec: Uint64, TTL: &TTLConfig{TTL: 100 * time.Millisecond}}))
		var kb [16]byte
		key := func(i int, tag byte) Key {
			binary.BigEndian.PutUint64(kb[:], uint64(i))
			kb[8] = tag
			return s.Key(kb[:])
		}
		for i := range live {
			if err := long.Put(key(i, 'l'), uint64(i)); err != nil {
				b.Fatal(err)
			}
		}
		must(0, s.seal())
		must(0, s.WaitBackground())
		for i := range dead {
			if err := short.Put(key(i, 'd'), uint64(i)); err != nil {
				b.Fatal(err)
			}
		}
		must(0, s.seal())
		must(0, s.WaitBackground())
		before := s.Stats()
		liveBytes += before.Slices.Bytes
		now.Store(150)
		b.StartTimer()
		if err := s.WaitBackground(); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		st := s.Stats()
		if st.TTL.SweepEntries-before.TTL.SweepEntries != int64(dead) {
			b.Fatalf("the sweep removed %d entries, want %d", st.TTL.SweepEntries-before.TTL.SweepEntries, dead)
		}
		nanos += st.TTL.SweepNanos - before.TTL.SweepNanos
		entries += st.TTL.SweepEntries - before.TTL.SweepEntries
		read += st.TTL.SweepReadBytes - before.TTL.SweepReadBytes
		must(0, s.Close())
		b.StartTimer()
	}
	b.ReportMetric(float64(nanos)/float64(entries), "ns/reclaimed-entry")
	b.ReportMetric(float64(read)/float64(entries), "read-B/reclaimed-entry")
	b.ReportMetric(float64(read)/float64(liveBytes), "swept-B/live-B")
}
