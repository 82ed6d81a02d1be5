package suite

import (
	"flag"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strata-db/strata/bench/peers"
)

var (
	flagImpls  = flag.String("impls", "", "comma-separated implementations to run (default: all of peers.Names)")
	flagBig    = flag.Bool("big", false, "also run the 10M-key YCSB rows (slow: about 10 minutes of loading on 2 cores, 4 GiB budgets)")
	flagBudget = flag.Int64("budget", 1<<30, "memory budget in bytes for the default rows: Strata's MemoryBudget and the block cache of Pebble, Badger and goleveldb")
)

// sampleEvery is the stride of the latency samples (p99-ns).
const sampleEvery = 64

func impls() []string {
	if *flagImpls == "" {
		return peers.Names
	}
	var out []string
	for _, n := range strings.Split(*flagImpls, ",") {
		if slices.Contains(peers.Names, n) {
			out = append(out, n)
		}
	}
	return out
}

// lazyStore opens and loads one implementation's store on first use.
type lazyStore struct {
	impl string
	cfg  peers.Config
	load func(st peers.Store)
	// warm, when set, runs after loading (writes visible), outside the timer: reads that
	// fill the stores' caches before the first measured operation.
	warm func(st peers.Store)
	st   peers.Store
	pos  map[string]int // per-leaf position in the key sequence
}

func (l *lazyStore) get(b *testing.B) peers.Store {
	if l.st == nil {
		b.StopTimer()
		st, err := peers.Open(l.impl, l.cfg)
		if err != nil {
			b.Fatalf("open %s: %v", l.impl, err)
		}
		start := time.Now()
		st.Bulk(true)
		l.load(st)
		st.Bulk(false)
		b.Logf("loaded %s in %v", l.impl, time.Since(start).Round(time.Millisecond))
		if l.warm != nil {
			start = time.Now()
			l.warm(st)
			b.Logf("warmed %s in %v", l.impl, time.Since(start).Round(time.Millisecond))
		}
		if s, ok := st.(interface{ Stats() string }); ok {
			b.Logf("%s: %s", l.impl, s.Stats())
		}
		l.st = st
		l.pos = map[string]int{}
		runtime.GC()
		b.StartTimer()
	}
	return l.st
}

func (l *lazyStore) close(b *testing.B) {
	if l.st != nil {
		if s, ok := l.st.(interface{ Stats() string }); ok {
			b.Logf("%s at close: %s", l.impl, s.Stats())
		}
		if err := l.st.Close(); err != nil {
			b.Errorf("close %s: %v", l.impl, err)
		}
		l.st = nil
		runtime.GC()
	}
}

// forImpls runs body once per implementation under impl=<name>, with a lazy
// store loaded by load, closed when body returns.
func forImpls(b *testing.B, budget int64, load func(st peers.Store), body func(b *testing.B, l *lazyStore)) {
	forImplsCfg(b, impls(), peers.Config{Budget: budget}, load, body)
}

// forImplsCfg is forImpls over the implementations names, each opened with
// cfg.
func forImplsCfg(b *testing.B, names []string, cfg peers.Config, load func(st peers.Store), body func(b *testing.B, l *lazyStore)) {
	forImplsWarm(b, names, cfg, load, nil, body)
}

// forImplsWarm is forImplsCfg with a warm-up pass (lazyStore.warm) after each load.
func forImplsWarm(b *testing.B, names []string, cfg peers.Config, load, warm func(st peers.Store), body func(b *testing.B, l *lazyStore)) {
	for _, impl := range names {
		l := &lazyStore{impl: impl, cfg: cfg, load: load, warm: warm}
		b.Run("impl="+impl, func(b *testing.B) { body(b, l) })
		l.close(b)
	}
}

// leaf runs op for b.N operations; op gets the operation's position in the
// key sequence, which carries over between rounds of the leaf.
func leaf(b *testing.B, l *lazyStore, name string, op func(st peers.Store, i int)) {
	b.Run(name, func(b *testing.B) {
		st := l.get(b)
		measure(b, l.pos[name], func(i int) { op(st, i) })
		l.pos[name] += b.N
	})
}

// measure times b.N calls of op(base+i), reporting allocations, ops/s and
// the p99 latency of every sampleEvery-th operation.
func measure(b *testing.B, base int, op func(i int)) {
	b.ReportAllocs()
	lat := make([]int64, 0, b.N/sampleEvery+1)
	b.ResetTimer()
	for i := range b.N {
		if i%sampleEvery == 0 {
			t0 := time.Now()
			op(base + i)
			lat = append(lat, int64(time.Since(t0)))
			continue
		}
		op(base + i)
	}
	b.StopTimer()
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(float64(b.N)/s, "ops/s")
	}
	b.ReportMetric(float64(Percentile(lat, 0.99)), "p99-ns")
}

// sink keeps results alive so that reads are not optimised away.
var sink int
