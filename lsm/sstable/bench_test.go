package sstable

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/internal/vfs"
)

// benchEntries returns n sorted value entries with 16-byte keys and
// valueSize-byte values.
func benchEntries(n, valueSize int) []ent {
	r := rand.New(rand.NewPCG(42, uint64(n)))
	es := make([]ent, n)
	for i := range es {
		k := make([]byte, 16)
		binary.BigEndian.PutUint64(k, r.Uint64())
		binary.BigEndian.PutUint64(k[8:], uint64(i))
		v := make([]byte, valueSize)
		for j := range v {
			v[j] = byte(r.Uint32())
		}
		es[i] = ent{Order: r.Uint64(), Hash: r.Uint64(), Seq: uint64(i + 1), Kind: base.KindValue, Key: k, Value: v}
	}
	slices.SortFunc(es, cmpEnt)
	// Lay keys and values out in sorted order in one arena, as an iterator
	// feeding a Writer would hold them, so the benchmarks measure the
	// sstable code rather than cache misses on scattered test data.
	arena := make([]byte, 0, n*(16+valueSize))
	for i := range es {
		k := len(arena)
		arena = append(append(arena, es[i].Key...), es[i].Value...)
		es[i].Key = arena[k : k+16 : k+16]
		es[i].Value = arena[k+16 : len(arena) : len(arena)]
	}
	return es
}

// benchFile writes es to a file in a temporary directory of the OS file
// system (so uncached reads are real pread(2) calls served by the page cache).
func benchFile(b *testing.B, es []ent) (vfs.FS, string, Meta) {
	fs := vfs.Default()
	name := filepath.Join(b.TempDir(), "bench.sst")
	m := writeFile(b, fs, name, es, WriterOptions{})
	return fs, name, m
}

const benchKeys = 200_000

// BenchmarkGet measures a point Get of a random present key with every
// block cached (cache=hit), with no cache (cache=none: a pread(2) served by
// the page cache plus a full block verification per Get), and of an absent
// Order (cache=absent: the filter answers). keys=10K fits in the CPU caches;
// keys=200K shows the memory misses of a working set larger than L2.
func BenchmarkGet(b *testing.B) {
	for _, cfg := range []struct{ keys, value int }{{10_000, 64}, {benchKeys, 64}, {benchKeys, 1024}} {
		es := benchEntries(cfg.keys, cfg.value)
		fs, name, m := benchFile(b, es)
		for _, mode := range []string{"hit", "none", "absent"} {
			b.Run(fmt.Sprintf("impl=strata/cache=%s/keys=%dK/value=%dB", mode, cfg.keys/1000, cfg.value), func(b *testing.B) {
				var c *Cache
				if mode != "none" {
					c = newCache(b, m.Size+m.Size/4, 0) // the whole file fits
				}
				r := openFile(b, fs, name, c, 1)
				defer r.Close()
				var sum int
				visit := func(e *base.Entry) bool { sum += len(e.Value); return true }
				if mode == "hit" { // warm every block
					for i := range es {
						r.Get(es[i].Order, es[i].Key, nil, visit)
					}
				}
				var warm CacheStats
				if c != nil {
					warm = c.Stats()
				}
				rnd := rand.New(rand.NewPCG(1, 1))
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					x := &es[rnd.IntN(len(es))]
					order := x.Order
					if mode == "absent" {
						order ^= 1
					}
					if err := r.Get(order, x.Key, nil, visit); err != nil {
						b.Fatal(err)
					}
				}
				if c != nil && mode == "hit" {
					st := c.Stats()
					hits, misses := st.Hits-warm.Hits, st.Misses-warm.Misses
					b.ReportMetric(float64(hits)/float64(hits+misses), "hit-ratio")
				}
			})
		}
	}
}

func BenchmarkIter(b *testing.B) {
	for _, vs := range []int{64, 1024} {
		es := benchEntries(benchKeys, vs)
		fs, name, m := benchFile(b, es)
		b.Run(fmt.Sprintf("impl=strata/keys=200K/value=%dB", vs), func(b *testing.B) {
			r := openFile(b, fs, name, nil, 1)
			defer r.Close()
			b.SetBytes(m.Size)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				it := r.NewIter()
				n := 0
				for it.Next() {
					n++
				}
				if it.Err() != nil || n != len(es) {
					b.Fatal(n, it.Err())
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(es)), "ns/entry")
		})
	}
}

// nullFile is a vfs.File that discards writes: the Writer's own cost.
type nullFile struct{ readOnly }

func (nullFile) Write(p []byte) (int, error) { return len(p), nil }

// BenchmarkWriter measures the Writer's throughput in file bytes per second,
// into a file that discards (file=null: encoding, CRC, filter and index
// only) and into an OS file (file=os: plus write(2) and one fsync).
func BenchmarkWriter(b *testing.B) {
	for _, vs := range []int{64, 1024} {
		es := benchEntries(benchKeys, vs)
		for _, file := range []string{"null", "os"} {
			b.Run(fmt.Sprintf("impl=strata/file=%s/keys=200K/value=%dB", file, vs), func(b *testing.B) {
				fs := vfs.Default()
				name := filepath.Join(b.TempDir(), "w.sst")
				m := writeFile(b, fs, name, es, WriterOptions{})
				b.SetBytes(m.Size)
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					var f vfs.File = nullFile{}
					if file == "os" {
						var err error
						if f, err = fs.Create(name); err != nil {
							b.Fatal(err)
						}
					}
					w := NewWriter(f, WriterOptions{})
					for j := range es {
						e := es[j].entry()
						if err := w.Add(e); err != nil {
							b.Fatal(err)
						}
					}
					if _, err := w.Finish(); err != nil {
						b.Fatal(err)
					}
					f.Close()
				}
			})
		}
	}
}
