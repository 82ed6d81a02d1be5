package lsm

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/internal/vfs"
	"github.com/strata-db/strata/lsm/sstable"
	"github.com/strata-db/strata/memory"
)

// benchKeys makes n value keys with 64-bit orders and their entries.
func benchEntries(rng *rand.Rand, n, valueSize int, seq *uint64) []base.Entry {
	es := make([]base.Entry, n)
	val := make([]byte, valueSize)
	for i := range es {
		k := rng.Uint64N(1 << 40)
		key := fmt.Appendf(nil, "key-%012d", k)
		*seq++
		es[i] = base.Entry{Order: orderOf(string(key), 64), Hash: k, Seq: *seq, Kind: base.KindValue, Key: key, Value: val}
	}
	slices.SortFunc(es, func(a, b base.Entry) int { return base.Compare(&a, &b) })
	return slices.CompactFunc(es, func(a, b base.Entry) bool { return a.Order == b.Order && string(a.Key) == string(b.Key) })
}

type benchDB struct {
	d    *DB
	keys []base.Entry // one entry per key present
}

// loadBench fills a DB with batches of `batch` keys until it holds total
// bytes of values, compacting as due after every install.
func loadBench(tb testing.TB, opts Options, total int64, batch, valueSize int) *benchDB {
	d, err := Open(opts)
	if err != nil {
		tb.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 1))
	var seq uint64
	bd := &benchDB{d: d}
	for written := int64(0); written < total; {
		es := benchEntries(rng, batch, valueSize, &seq)
		p, err := d.WriteL0(&sliceIter{es: es})
		if err != nil {
			tb.Fatal(err)
		}
		if err := d.InstallL0(p, seq); err != nil {
			tb.Fatal(err)
		}
		for i := range es {
			if i%16 == 0 {
				bd.keys = append(bd.keys, base.Entry{Order: es[i].Order, Key: es[i].Key})
			}
		}
		written += int64(len(es) * valueSize)
		for j := d.PickCompaction(); j != nil; j = d.PickCompaction() {
			if err := j.Run(context.Background()); err != nil {
				tb.Fatal(err)
			}
			if err := d.InstallCompaction(j); err != nil {
				tb.Fatal(err)
			}
		}
	}
	return bd
}

func populatedLevels(d *DB) int {
	n := 0
	for _, files := range d.current.levels {
		if len(files) > 0 {
			n++
		}
	}
	return n
}

// BenchmarkGet: point gets of present keys in DBs whose data spans about 1,
// 4 and 10 levels, through a block cache large enough for the data blocks.
func BenchmarkGet(b *testing.B) {
	for _, c := range []struct {
		levels    int
		numLevels int
		base      int64
		ratio     int
		total     int64
	}{
		{1, 2, 1 << 30, 10, 8 << 20},
		{4, 4, 1 << 20, 4, 8 << 20},
		{10, 11, 16 << 10, 2, 16 << 20},
	} {
		// Built once per configuration: b.Run calls the function several times.
		var bd *benchDB
		var cache *sstable.Cache
		b.Run(fmt.Sprintf("levels=%d/value=64B", c.levels), func(b *testing.B) {
			if bd == nil {
				budget := memory.NewBudget(1 << 30)
				var err error
				if cache, err = sstable.NewCache(budget, 128<<20, 0); err != nil {
					b.Fatal(err)
				}
				opts := Options{FS: vfs.NewMem(), Dir: "/db", Cache: cache, NumLevels: c.numLevels,
					BaseLevelBytes: c.base, LevelSizeRatio: c.ratio, TargetFileSize: min(256<<10, c.base)}
				bd = loadBench(b, opts, c.total, 8192, 64)
			}
			found := 0
			visit := func(e *base.Entry) bool { found++; return false }
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				k := &bd.keys[i%len(bd.keys)]
				if err := bd.d.Get(k.Order, k.Key, nil, visit); err != nil {
					b.Fatal(err)
				}
			}
			if found != b.N {
				b.Fatalf("found %d of %d", found, b.N)
			}
			b.ReportMetric(float64(populatedLevels(bd.d)), "levels")
			b.ReportMetric(float64(len(bd.d.current.levels[0])), "L0-files")
		})
		if bd != nil {
			bd.d.Close()
			cache.Close()
		}
	}
}

// TestGetAllocs pins zero allocations per Get on cached blocks.
func TestGetAllocs(t *testing.T) {
	budget := memory.NewBudget(64 << 20)
	cache, err := sstable.NewCache(budget, 16<<20, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer cache.Close()
	opts := Options{FS: vfs.NewMem(), Dir: "/db", Cache: cache, BaseLevelBytes: 256 << 10, TargetFileSize: 64 << 10}
	bd := loadBench(t, opts, 2<<20, 2048, 64)
	defer bd.d.Close()
	if populatedLevels(bd.d) < 2 {
		t.Fatalf("only %d levels populated", populatedLevels(bd.d))
	}
	visit := func(e *base.Entry) bool { return false }
	for _, k := range bd.keys { // warm the cache
		bd.d.Get(k.Order, k.Key, nil, visit)
	}
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		k := &bd.keys[i%len(bd.keys)]
		i++
		if err := bd.d.Get(k.Order, k.Key, nil, visit); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("Get allocates %.1f times per call", allocs)
	}
}

// BenchmarkWriteL0: throughput of writing (and syncing) one L0 file of
// 64-byte values, in bytes of keys and values per second.
func BenchmarkWriteL0(b *testing.B) {
	for _, fsName := range []string{"mem", "os"} {
		b.Run(fmt.Sprintf("fs=%s/batch=4MiB/value=64B", fsName), func(b *testing.B) {
			var fs vfs.FS = vfs.NewMem()
			dir := "/db"
			if fsName == "os" {
				fs, dir = vfs.Default(), b.TempDir()
			}
			d, err := Open(Options{FS: fs, Dir: dir})
			if err != nil {
				b.Fatal(err)
			}
			defer d.Close()
			var seq uint64
			es := benchEntries(rand.New(rand.NewPCG(2, 2)), 4<<20/80, 64, &seq)
			var bytes int64
			for i := range es {
				bytes += int64(len(es[i].Key) + len(es[i].Value))
			}
			b.SetBytes(bytes)
			b.ReportAllocs()
			for b.Loop() {
				p, err := d.WriteL0(&sliceIter{es: es})
				if err != nil {
					b.Fatal(err)
				}
				d.Discard(p)
			}
		})
	}
}

// BenchmarkCompaction: throughput of an L0 → L1 compaction of 4 overlapping
// 2 MiB L0 files onto an 8 MiB L1, in input bytes per second (Run only).
func BenchmarkCompaction(b *testing.B) {
	b.Run("l0=4x2MiB/l1=8MiB/value=64B", func(b *testing.B) {
		fs := vfs.NewMem()
		opts := Options{FS: fs, Dir: "/db", L0CompactionTrigger: 100, TargetFileSize: 2 << 20}
		d, err := Open(opts)
		if err != nil {
			b.Fatal(err)
		}
		defer d.Close()
		rng := rand.New(rand.NewPCG(3, 3))
		var seq uint64
		install := func(n int) {
			p, err := d.WriteL0(&sliceIter{es: benchEntries(rng, n, 64, &seq)})
			if err != nil {
				b.Fatal(err)
			}
			if err := d.InstallL0(p, seq); err != nil {
				b.Fatal(err)
			}
		}
		for range 4 {
			install(2 << 20 / 80)
		}
		j := d.CompactLevel(0)
		j.Run(context.Background())
		if err := d.InstallCompaction(j); err != nil {
			b.Fatal(err)
		}
		for range 4 {
			install(2 << 20 / 80)
		}
		b.ReportAllocs()
		var in int64
		for b.Loop() {
			j := d.CompactLevel(0)
			if err := j.Run(context.Background()); err != nil {
				b.Fatal(err)
			}
			in = j.Stats().BytesRead
			b.StopTimer()
			for _, t := range j.outputs {
				d.releaseTable(t, true)
			}
			j.outputs = nil
			j.err = errDiscard
			d.InstallCompaction(j)
			b.StartTimer()
		}
		b.SetBytes(in)
	})
}

var errDiscard = fmt.Errorf("benchmark: outputs discarded")

// BenchmarkLoad: sustained ingest through WriteL0 + InstallL0 with every due
// compaction run inline (one goroutine), in ingested bytes per second, with
// the write amplification it causes.
func BenchmarkLoad(b *testing.B) {
	b.Run("total=32MiB/batch=1MiB/value=64B", func(b *testing.B) {
		var m Metrics
		for b.Loop() {
			opts := Options{FS: vfs.NewMem(), Dir: "/db", BaseLevelBytes: 4 << 20, TargetFileSize: 1 << 20}
			bd := loadBench(b, opts, 32<<20, 1<<20/80, 64)
			m = bd.d.Metrics()
			bd.d.Close()
		}
		b.SetBytes(m.BytesIngested)
		b.ReportMetric(m.WriteAmplification, "write-amp")
		b.ReportMetric(float64(m.Compactions), "compactions")
	})
}
