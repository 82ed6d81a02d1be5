package suite

import (
	"encoding/binary"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/strata-db/strata"
	"github.com/strata-db/strata/bench/peers"
	"github.com/strata-db/strata/memory"
)

// BenchmarkFlinkTTL: the TTL variants of Flink's state benchmarks (flink-benchmarks'
// ttl/TtlValueStateBenchmark, TtlListStateBenchmark, TtlMapStateBenchmark), Strata only — the
// peers have no TTL. The data, keys and visiting order are BenchmarkFlinkValue's, List's and
// Map's (500K keys); each op runs with the states configured without a TTL (ttl=off) and with
// one (ttl=on: 1 h, which no value reaches during the run, Flink's defaults otherwise, the
// default clock), in the same run:
//
//	BenchmarkFlinkTTL/state=value/ttl=off/impl=strata/op=get
//	BenchmarkFlinkTTL/state=value/ttl=on/impl=strata/op=get
//
// The target (issue "TTL …, Benchmarks"): ttl=on at most 15 % slower than ttl=off per op
// (Flink's heap TTL map add measured 8–12× slower than without TTL).
func BenchmarkFlinkTTL(b *testing.B) {
	n := flinkKeys
	d := flink(n)
	kinds := []struct {
		state string
		load  func(st peers.Store)
		ops   func(b *testing.B, l *lazyStore)
	}{
		{"value", func(st peers.Store) {
			for i := range n {
				st.ValuePut(d.key(int32(i)), d.value(i))
			}
		}, func(b *testing.B, l *lazyStore) {
			leaf(b, l, "op=get", func(st peers.Store, i int) {
				v, _ := st.ValueGet(d.key(d.setup[i%n]))
				sink += len(v)
			})
			leaf(b, l, "op=update", func(st peers.Store, i int) {
				st.ValuePut(d.key(d.setup[i%n]), d.value(i))
			})
		}},
		{"list", func(st peers.Store) {
			for i := range n {
				st.ListAdd(d.key(int32(i)), d.value(i))
			}
		}, func(b *testing.B, l *lazyStore) {
			leaf(b, l, "op=getAndIterate", func(st peers.Store, i int) {
				c, _ := st.ListIterate(d.key(d.setup[i%n]))
				sink += c
			})
			leaf(b, l, "op=append", func(st peers.Store, i int) {
				st.ListAdd(d.key(d.setup[i%n]), d.value(i))
			})
		}},
		{"map", func(st peers.Store) {
			for i := range n {
				k := d.key(int32(i))
				for u := range flinkMapKeys {
					st.MapPut(k, d.uk(u), d.value(i*flinkMapKeys+u))
				}
			}
		}, func(b *testing.B, l *lazyStore) {
			leaf(b, l, "op=get", func(st peers.Store, i int) {
				v, _ := st.MapGet(d.key(d.setup[i%n]), d.uk(i%flinkMapKeys))
				sink += len(v)
			})
			leaf(b, l, "op=put", func(st peers.Store, i int) {
				st.MapPut(d.key(d.setup[i%n]), d.uk(i%flinkMapKeys), d.value(i))
			})
		}},
	}
	for _, k := range kinds {
		b.Run("state="+k.state, func(b *testing.B) {
			for _, ttl := range []struct {
				name string
				ttl  time.Duration
			}{{"off", 0}, {"on", time.Hour}} {
				b.Run("ttl="+ttl.name, func(b *testing.B) {
					forImplsCfg(b, []string{"strata"}, peers.Config{Budget: *flagBudget, TTL: ttl.ttl}, k.load, k.ops)
				})
			}
		})
	}
}

// BenchmarkTimers: Flink's InternalTimerService under a steady load, Strata only (the peers
// have no timers). One op registers one event-time timer and advances the watermark by one
// millisecond with 1M or 10M timers pending: each op's timer is due between pending/2 and
// 3·pending/2 ms later, so about one timer fires per op and the number pending stays put.
// Keys are 1M distinct 8-byte keys (Store.Key per op, as a task does per record), namespaces
// 8-byte windows (Int64), in a Store in memory only with a 3 GiB budget.
//
//	BenchmarkTimers/pending=1M/impl=strata
//
// timers/s: timers fired per second of wall time (each registered once and fired once: a
// register + fire pair per timer); timers/cpu-s: the same per second of the process's CPU
// time (getrusage; background work included — one core's worth on a shared machine);
// B/timer: the budget's timer bytes (memory.PurposeTimers, outside the Go heap) per pending
// timer. Target (issue "TTL …, Benchmarks"): ≥ 1 M timers/s per core at 1M and 10M pending
// (Flink's timer benchmark runs about 250 K/s), memory inside the budget.
func BenchmarkTimers(b *testing.B) {
	for _, tc := range []struct {
		name    string
		pending int
	}{{"1M", 1_000_000}, {"10M", 10_000_000}} {
		b.Run("pending="+tc.name+"/impl=strata", func(b *testing.B) {
			s, err := strata.Open("", strata.Options{MaxParallelism: peers.MaxParallelism, MemoryBudget: 3 << 30, SegmentSize: 16 << 20})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ts, err := strata.NewTimerService(s, strata.TimerServiceDescriptor[int64]{Name: "windows", NamespaceCodec: strata.Int64})
			if err != nil {
				b.Fatal(err)
			}
			const nkeys = 1 << 20
			var kb [8]byte
			rng := rand.New(rand.NewPCG(1, 2))
			p := int64(tc.pending)
			register := func(now int64, i int) {
				binary.BigEndian.PutUint64(kb[:], uint64(i&(nkeys-1))*0x9e3779b97f4a7c15)
				t := now + p/2 + rng.Int64N(p)
				if err := ts.RegisterEventTimeTimer(s.Key(kb[:]), t/1000, t); err != nil {
					b.Fatal(err)
				}
			}
			start := time.Now()
			for i := range tc.pending {
				register(0, i)
			}
			b.Logf("%d timers registered in %v", tc.pending, time.Since(start).Round(time.Millisecond))
			fired := 0
			fire := func(strata.Timer[int64]) error { fired++; return nil }
			now := p / 2 // where the pending timers begin to be due
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
			pending := ts.NumEventTimeTimers()
			b.ReportMetric(float64(fired)/el.Seconds(), "timers/s")
			if cpu > 0 {
				b.ReportMetric(float64(fired)/cpu.Seconds(), "timers/cpu-s")
			}
			b.ReportMetric(float64(s.Budget().UsedBy(memory.PurposeTimers))/float64(pending), "B/timer")
			if pending < tc.pending*9/10 || pending > tc.pending*11/10 {
				b.Fatalf("%d timers pending after %d ops, want about %d", pending, b.N, tc.pending)
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
