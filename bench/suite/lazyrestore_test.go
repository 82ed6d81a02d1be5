package suite

import (
	"context"
	"flag"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/strata-db/strata"
	"github.com/strata-db/strata/checkpoint"
)

// Lazy restore (issue 24, item 3): how soon a restored Store answers and how fast it reads in
// its first seconds, with CheckpointOptions.LazyRestore against a full restore, from the
// checkpoint of the Restore rows (256 MiB of value state; 1 GiB and 4 GiB with -big).
//
//	BenchmarkLazyRestore/state=256MiB/impl=strata/storage=dir/restore=lazy
//
// storage=dir is the local DirStorage (a full restore hard-links and checks every table's
// CRC32C; a lazy one hard-links and checks in the background); storage=s3sim wraps it in a
// storage that is not a DirStorage (so nothing is linked) and that answers each Get and
// GetRange after 20 ms plus 10 ns per byte (100 MB/s), an object store's first-byte latency
// and one stream's bandwidth; with -s3 a third storage is the S3 rows' server (s3_test.go:
// versitygw from STRATA_S3_BENCH_ENDPOINT, else gofakes3 in-process). Each round restores into a new directory, then one goroutine
// reads uniformly random keys for -lazywindow; restores run alone, as after a failure, with
// the Store's default block cache.
//
// Metrics (medians over max(b.N, -lazyrounds) rounds): restore-ms (Restore's return),
// first-read-ms (the first Get's return, counted from the Restore call), reads/s-first-s (the
// first second after Restore returned), reads/s-last-s (the window's last second) and, for
// lazy restores, local-ms (until every table is local and verified, from the Restore call;
// the window's end when it is not done by then). x-full-last is reads/s-first-s over the
// full restore's reads/s-last-s on the same storage (the issue's "≥ 50 % of steady state at
// once"). s-to-90pct is the end, in seconds after Restore returned, of the first second whose
// reads reach 90 % of steady state — the full restore's median second over the last half of
// its window, on the same storage — (-lazywindow + 1 s if none does: the issue's "≥ 90 %
// within 60 s"); the log gives each round's reads per second, the throughput curve.

var (
	flagLazyRounds = flag.Int("lazyrounds", 2, "restores per BenchmarkLazyRestore leaf (at least; b.N if larger)")
	flagLazyWindow = flag.Duration("lazywindow", 10*time.Second, "how long each BenchmarkLazyRestore round reads after its restore")
)

// slowStorage adds an object store's latency and bandwidth to Get and GetRange.
type slowStorage struct {
	checkpoint.Storage
	latency time.Duration
	perByte time.Duration
}

func (s slowStorage) wait(ctx context.Context, n int) error {
	t := time.NewTimer(s.latency + time.Duration(n)*s.perByte)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s slowStorage) Get(ctx context.Context, name string) ([]byte, error) {
	b, err := s.Storage.Get(ctx, name)
	if werr := s.wait(ctx, len(b)); err == nil {
		err = werr
	}
	return b, err
}

func (s slowStorage) GetRange(ctx context.Context, name string, off, n int64) ([]byte, error) {
	b, err := s.Storage.GetRange(ctx, name, off, n)
	if werr := s.wait(ctx, len(b)); err == nil {
		err = werr
	}
	return b, err
}

var lazyFullLast = map[string]float64{} // reads/s-last-s of restore=full, by state and storage

// lazyFullSteady is the steady state of restore=full, by state and storage: the median second
// of the last half of its window (a median over the rounds), what s-to-90pct compares with.
var lazyFullSteady = map[string]float64{}

func BenchmarkLazyRestore(b *testing.B) {
	for _, c := range ckSizes {
		b.Run("state="+c.label, func(b *testing.B) {
			ckSkipBig(b, c)
			if !slices.Contains(impls(), "strata") {
				b.Skip("strata is not among -impls (LazyRestore has no peer row)")
			}
			b.Run("impl=strata", func(b *testing.B) {
				storages := []string{"dir", "s3sim"}
				if *flagS3 {
					storages = append(storages, s3Server())
				}
				for _, storage := range storages {
					b.Run("storage="+storage, func(b *testing.B) {
						for _, mode := range []string{"full", "lazy"} {
							b.Run("restore="+mode, func(b *testing.B) {
								st := ckStrata(b, c)
								if storage != "dir" && storage != "s3sim" {
									st = ckStrataOn(b, c, storage) // the S3 rows' state (s3_test.go)
								}
								st.closeStore(b)
								var s checkpoint.Storage = st.storage
								if storage == "s3sim" {
									s = slowStorage{Storage: st.storage, latency: 20 * time.Millisecond, perByte: 10 * time.Nanosecond}
								}
								benchLazyRestore(b, st, s, mode == "lazy", c.label+"/"+storage)
							})
						}
					})
				}
			})
		})
	}
}

func benchLazyRestore(b *testing.B, st *ckStrataState, storage checkpoint.Storage, lazy bool, row string) {
	b.ReportAllocs()
	rounds := max(b.N, *flagLazyRounds)
	n := st.size.keys()
	var restoreNs, firstNs, localNs []int64
	var firstS, lastS, to90, steadyS []float64
	var last strata.Stats
	b.ResetTimer()
	for r := range rounds {
		ckRestores++
		dir := ckDir(b, "lazy-restore-"+itoa(ckRestores))
		o := ckOptions(st.storage, nil)
		o.Checkpoint.LazyRestore = lazy
		t0 := time.Now()
		s, err := strata.Restore(dir, o, storage, st.last)
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		v, err := strata.NewValueState(s, strata.ValueDescriptor[[]byte]{Name: "value", Codec: strata.Bytes})
		if err != nil {
			b.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(uint64(r), 47))
		var kb [ckKeySize]byte
		var reads [64]int // per second since t1
		first := time.Duration(0)
		done := time.Duration(0)
		total := 0
		for {
			id := int32(rng.IntN(n))
			val, ok, err := v.Get(s.Key(ckKey(&kb, id)))
			if err != nil || !ok || len(val) != ckValueSize {
				b.Fatalf("read after restore of key %d: %d bytes, found %v, %v", id, len(val), ok, err)
			}
			sink += len(val)
			now := time.Now()
			if first == 0 {
				first = now.Sub(t0)
			}
			since := now.Sub(t1)
			if since >= *flagLazyWindow {
				break
			}
			reads[min(int(since/time.Second), len(reads)-1)]++
			total++
			if lazy && done == 0 && total%256 == 0 && s.Stats().LazyRestore.Done {
				done = now.Sub(t0)
			}
		}
		b.StopTimer()
		last = s.Stats()
		if lazy && done == 0 {
			if last.LazyRestore.Done {
				done = time.Since(t0)
			} else {
				done = *flagLazyWindow + t1.Sub(t0)
			}
		}
		secs := max(int(*flagLazyWindow/time.Second), 1)
		restoreNs = append(restoreNs, int64(t1.Sub(t0)))
		firstNs = append(firstNs, int64(first))
		localNs = append(localNs, int64(done))
		firstS = append(firstS, float64(reads[0]))
		lastS = append(lastS, float64(reads[min(secs, len(reads))-1]))
		// The curve: reads per second of the window, and the end of the first second at 90 %
		// of steady state (the full restore's median second over the last half of its window,
		// on this storage; a full row's own), the window plus one if none reached it.
		curve := reads[:min(secs, len(reads))]
		steady := lazyFullSteady[row]
		if !lazy {
			half := make([]float64, 0, len(curve))
			for _, n := range curve[len(curve)/2:] {
				half = append(half, float64(n))
			}
			steady = median(half)
			steadyS = append(steadyS, steady)
		}
		at := float64(secs + 1)
		for i, n := range curve {
			if float64(n) >= 0.9*steady {
				at = float64(i + 1)
				break
			}
		}
		to90 = append(to90, at)
		b.Logf("%s lazy=%v round %d: reads per second %v (steady %.0f)", row, lazy, r, curve, steady)
		discard(b, s, dir)
		b.StartTimer()
	}
	b.ReportMetric(ms(Percentile(restoreNs, 0.5)), "restore-ms")
	b.ReportMetric(ms(Percentile(firstNs, 0.5)), "first-read-ms")
	fs, ls := median(firstS), median(lastS)
	b.ReportMetric(fs, "reads/s-first-s")
	b.ReportMetric(median(to90), "s-to-90pct")
	b.ReportMetric(ls, "reads/s-last-s")
	if lazy {
		b.ReportMetric(ms(Percentile(localNs, 0.5)), "local-ms")
		if full := lazyFullLast[row]; full > 0 {
			b.ReportMetric(fs/full, "x-full-last")
		}
	} else {
		lazyFullLast[row] = ls
		lazyFullSteady[row] = median(steadyS)
		b.ReportMetric(fs/ls, "x-full-last")
	}
	b.Logf("%s lazy=%v: %+v", row, lazy, last.LazyRestore)
}

func median(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	return v[len(v)/2]
}

func itoa(i int) string {
	var b [20]byte
	n := len(b)
	for {
		n--
		b[n] = byte('0' + i%10)
		i /= 10
		if i == 0 {
			return string(b[n:])
		}
	}
}
