package slice

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/strata-db/strata/internal/base"
)

var sliceSizes = []int{16 << 10, 20 << 10, 32 << 10}

// BenchmarkLowerBound: the fingerprint search on arrays of the lengths a
// slice holds (entries of ~64 bytes: 256 in 16 KiB, 512 in 32 KiB) and
// longer, against slices.BinarySearch.
func BenchmarkLowerBound(b *testing.B) {
	for _, n := range []int{64, 256, 320, 512, 4096} {
		r := rand.New(rand.NewPCG(1, uint64(n)))
		fps := make([]uint64, n)
		for i := range fps {
			fps[i] = r.Uint64()
		}
		slices.Sort(fps)
		probes := make([]uint64, 1<<16)
		for i := range probes {
			probes[i] = fps[r.IntN(n)]
		}
		b.Run(fmt.Sprintf("impl=strata-go/n=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			s := 0
			for i := 0; b.Loop(); i++ {
				s += lowerBound(fps, probes[i&(1<<16-1)])
			}
			sink = s
		})
		b.Run(fmt.Sprintf("impl=slices.BinarySearch/n=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			s := 0
			for i := 0; b.Loop(); i++ {
				j, _ := slices.BinarySearch(fps, probes[i&(1<<16-1)])
				s += j
			}
			sink = s
		})
	}
}

var sink int

// benchKeys returns n value entries with 20-byte keys and 16-byte values,
// spread over order hashes, in a random order.
func benchKeys(n int) []base.Entry {
	r := rand.New(rand.NewPCG(7, 7))
	es := make([]base.Entry, n)
	for i := range es {
		k := make([]byte, 20)
		binary.BigEndian.PutUint64(k[4:], uint64(i))
		o := r.Uint64()
		es[i] = base.Entry{Order: o, Hash: o, Seq: uint64(i + 1), Kind: base.KindValue, Key: k, Value: k[4:]}
	}
	return es
}

// installRuns installs es as chain runs (es[i] goes to run i%chain),
// oldest first, so each bucket's chain is chain runs long.
func installRuns(b *testing.B, t *Table, es []base.Entry, chain int) {
	for c := 0; c < chain; c++ {
		var part []base.Entry
		for i := c; i < len(es); i += chain {
			part = append(part, es[i])
		}
		for i := range part {
			part[i].Seq = uint64(c*len(es) + i + 1)
		}
		sortEntries(part)
		out, err := t.Build(context.Background(), iterOf(part...))
		if err != nil {
			b.Fatal(err)
		}
		if err := t.Install(out); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGet: latency of a hit served from slices with the key in any
// run of chains of 1, 4 and 16 runs (256K keys over 64 buckets, so even
// at 16 runs a bucket's run fills a 16 KiB slice), and of a miss (every
// run searched), for each slice size.
func BenchmarkGet(b *testing.B) {
	const keys = 1 << 18
	es := benchKeys(keys)
	for _, size := range sliceSizes {
		for _, chain := range []int{1, 4, 16} {
			e := newEnv(b, size, Options{BucketBits: 6})
			installRuns(b, e.t, slices.Clone(es), chain)
			probe := make([]int, 4096)
			r := rand.New(rand.NewPCG(1, 2))
			for i := range probe {
				probe[i] = r.IntN(keys)
			}
			b.Run(fmt.Sprintf("impl=strata/slice=%dKiB/chain=%d/op=hit", size>>10, chain), func(b *testing.B) {
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					x := &es[probe[i&4095]]
					if _, st := e.t.Get(x.Order, x.Key); st != Found {
						b.Fatal("miss")
					}
				}
			})
			b.Run(fmt.Sprintf("impl=strata/slice=%dKiB/chain=%d/op=miss", size>>10, chain), func(b *testing.B) {
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					x := &es[probe[i&4095]]
					if _, st := e.t.Get(x.Order+1, x.Key); st != Absent {
						b.Fatal("hit")
					}
				}
			})
			_ = e.t.Close() // keep one table's memory at a time
		}
	}
	m := make(map[string][]byte, keys)
	for _, x := range es {
		m[string(x.Key)] = x.Value
	}
	b.Run("impl=gomap/op=hit", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if _, ok := m[string(es[i&(keys-1)].Key)]; !ok {
				b.Fatal("miss")
			}
		}
	})
}

// BenchmarkBuild: transform throughput, MiB/s of entry bytes (key, value
// and the 36 bytes of order, hash, seq, kind, lengths) into slices, for a
// transform of 256K entries (a 16 MiB segment's worth) into 64 buckets;
// mem-B/entry is the block memory per entry, fill included.
func BenchmarkBuild(b *testing.B) {
	es := benchKeys(1 << 18)
	sortEntries(es)
	var bytes int64
	for _, x := range es {
		bytes += int64(len(x.Key)+len(x.Value)) + 36
	}
	for _, size := range sliceSizes {
		b.Run(fmt.Sprintf("slice=%dKiB/entries=256K", size>>10), func(b *testing.B) {
			e := newEnv(b, size, Options{BucketBits: 6})
			b.ReportAllocs()
			b.SetBytes(bytes)
			var mem int
			for b.Loop() {
				out, err := e.t.Build(context.Background(), iterOf(es...))
				if err != nil {
					b.Fatal(err)
				}
				mem = 0
				for _, s := range out {
					mem += s.mem
				}
				e.t.Release(out)
			}
			b.ReportMetric(float64(mem)/float64(len(es)), "mem-B/entry")
		})
	}
}

// BenchmarkCompaction: merging a chain of 4 runs (64K keys, each key
// written in two runs) into one.
func BenchmarkCompaction(b *testing.B) {
	es := benchKeys(1 << 16)
	for _, size := range sliceSizes {
		b.Run(fmt.Sprintf("slice=%dKiB/runs=4", size>>10), func(b *testing.B) {
			e := newEnv(b, size, Options{BucketBits: -1, CompactionThreshold: 3})
			twice := append(slices.Clone(es), es...)
			installRuns(b, e.t, twice, 4)
			var in int64
			for b.Loop() {
				job, ok := e.t.PickCompaction()
				if !ok {
					b.Fatal("no compaction")
				}
				if err := job.Run(context.Background()); err != nil {
					b.Fatal(err)
				}
				in = job.InputBytes()
				if err := e.t.CancelCompaction(job); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(in)
		})
	}
}

// BenchmarkCompactionMap: merging a chain of 4 runs of map entries (4K
// keys of 16 user keys each, each run holding 4 user keys of every key)
// into one: the map state's shape, where most records of a slice refer
// back to their key (kindKeyRef).
func BenchmarkCompactionMap(b *testing.B) {
	r := rand.New(rand.NewPCG(7, 7))
	const keys, perKey = 1 << 12, 16
	es := make([]base.Entry, 0, keys*perKey)
	for i := range keys {
		k := make([]byte, 20)
		binary.BigEndian.PutUint64(k[4:], uint64(i))
		o := r.Uint64()
		for u := range perKey {
			uk := binary.BigEndian.AppendUint32(nil, uint32(u))
			es = append(es, base.Entry{Order: o, Hash: o, UserHash: base.HashUserKey(uk), Kind: base.KindMapEntry,
				Key: k, UserKey: uk, Value: k[4:]})
		}
	}
	for _, size := range sliceSizes {
		b.Run(fmt.Sprintf("slice=%dKiB/runs=4", size>>10), func(b *testing.B) {
			e := newEnv(b, size, Options{BucketBits: -1, CompactionThreshold: 3})
			installRuns(b, e.t, slices.Clone(es), 4)
			var in int64
			for b.Loop() {
				job, ok := e.t.PickCompaction()
				if !ok {
					b.Fatal("no compaction")
				}
				if err := job.Run(context.Background()); err != nil {
					b.Fatal(err)
				}
				in = job.InputBytes()
				if err := e.t.CancelCompaction(job); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(in)
		})
	}
}
