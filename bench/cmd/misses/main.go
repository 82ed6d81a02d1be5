// Command misses counts the cache misses of one point read, for issue 14's "point reads at the
// physical limit": it loads a state in memory (Strata with its default options and a 1 GiB
// budget, or a flat Go map[string][]byte keyed by key + namespace [+ user key], the reference),
// then reads every key once in a shuffled order inside the function reads, which
// scripts/misses.sh runs under valgrind's callgrind with a simulated cache hierarchy and
// --dump-before=main.reads, so that the reads are counted apart from the loading. Misses per read = the
// last-level data misses (DLmr + DLmw, the ones that go to DRAM) ÷ the reads; one dependent
// DRAM miss costs about 163 ns on the 2-vCPU EPYC VM of the benchmarks.
//
// Usage: misses -impl strata|gomap -state value|map -value N -key 8B|16B+ns8B -keys N
//
// The keys are the bench suite's shapes (suite.Keyer): key=8B is an 8-byte big-endian Long,
// key=16B+ns8B a 16-byte key in an 8-byte window namespace. For -state map each key holds 10
// user keys (8-byte Longs 0..9) and a read is one map get.
package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/strata-db/strata"
)

var sink int

func main() {
	impl := flag.String("impl", "strata", "strata or gomap")
	state := flag.String("state", "value", "value or map")
	vsize := flag.Int("value", 100, "value size in bytes")
	shape := flag.String("key", "16B+ns8B", "key shape: 8B or 16B+ns8B")
	keys := flag.Int("keys", 1_000_000, "keys")
	flag.Parse()
	uks := 1
	if *state == "map" {
		uks = 10
	}
	wide := *shape == "16B+ns8B"
	ns := binary.BigEndian.AppendUint64(nil, 1_700_000_000_000)
	key := func(dst []byte, id int) []byte {
		if !wide {
			return binary.BigEndian.AppendUint64(dst, uint64(id))
		}
		dst = binary.BigEndian.AppendUint64(dst, uint64(id)*0x9e3779b97f4a7c15)
		return binary.BigEndian.AppendUint64(dst, uint64(id))
	}
	val := make([]byte, *vsize)
	order := rand.New(rand.NewPCG(1, 2)).Perm(*keys * uks)

	var get func(id, u int) int
	switch *impl {
	case "gomap":
		m := make(map[string][]byte)
		var kb []byte
		flat := func(id, u int) []byte {
			kb = key(kb[:0], id)
			if wide {
				kb = append(kb, ns...)
			}
			if *state == "map" {
				kb = binary.BigEndian.AppendUint64(kb, uint64(u))
			}
			return kb
		}
		for id := range *keys {
			for u := range uks {
				m[string(flat(id, u))] = append([]byte(nil), val...)
			}
		}
		get = func(id, u int) int { return len(m[string(flat(id, u))]) }
	case "strata":
		s, err := strata.Open("", strata.Options{MemoryBudget: 1 << 30})
		check(err)
		defer s.Close()
		var kb []byte
		sk := func(id int) strata.Key {
			kb = key(kb[:0], id)
			k := s.Key(kb)
			if wide {
				k = k.In(ns)
			}
			return k
		}
		var ub [8]byte
		uk := func(u int) []byte { binary.BigEndian.PutUint64(ub[:], uint64(u)); return ub[:] }
		if *state == "map" {
			m, err := strata.NewMapState(s, strata.MapDescriptor[[]byte, []byte]{Name: "m", KeyCodec: strata.Bytes, ValueCodec: strata.Bytes})
			check(err)
			for id := range *keys {
				for u := range uks {
					check(m.Put(sk(id), uk(u), val))
				}
			}
			get = func(id, u int) int {
				v, _, err := m.Get(sk(id), uk(u))
				check(err)
				return len(v)
			}
		} else {
			v, err := strata.NewValueState(s, strata.ValueDescriptor[[]byte]{Name: "v", Codec: strata.Bytes})
			check(err)
			for id := range *keys {
				check(v.Put(sk(id), val))
			}
			get = func(id, _ int) int {
				x, _, err := v.Get(sk(id))
				check(err)
				return len(x)
			}
		}
		check(s.WaitBackground())
		st := s.Stats()
		fmt.Fprintf(os.Stderr, "strata: %d segments, %d slices, %d LSM files, %d evictions\n",
			st.Fresh.Segments, st.Slices.Count, st.LSM.Files, st.Slices.Evictions)
		if st.LSM.Files != 0 {
			log.Fatal("the state is not all in memory")
		}
	default:
		log.Fatalf("unknown -impl %q", *impl)
	}
	// No collection and no stack growth inside reads, and one read before it.
	runtime.GC()
	debug.SetGCPercent(-1)
	sink += get(0, 0)
	start := time.Now()
	n := reads(get, order, uks)
	// Natively (not under valgrind) this is the read's wall time, for a quick A/B; the bench
	// suite's rows are the measured figures.
	fmt.Printf("reads %d\n%.1f ns/read\n", n, float64(time.Since(start).Nanoseconds())/float64(n))
	os.Exit(0) // no Close: the part after reads that callgrind counts is reads alone
}

// reads is the measured phase: one get per entry, in a shuffled order. callgrind dumps its
// counters when reads is entered and at exit, right after it (scripts/misses.sh).
//
//go:noinline
func reads(get func(id, u int) int, order []int, uks int) int {
	for _, o := range order {
		sink += get(o/uks, o%uks)
	}
	return len(order)
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
