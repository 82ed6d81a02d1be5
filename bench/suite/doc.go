// Package suite holds the side-by-side benchmarks of Strata and its peers
// (package peers): Flink's state micro-benchmarks, Gadget-style window
// workloads and YCSB-style mixes, all in one binary on the same keys.
// The benchmarks are in the _test files; this file and gen.go hold what they
// share and can be tested without running a benchmark.
//
// # Names
//
// Every benchmark name is a key=value path so that benchstat groups rows,
// with the implementation one level above the operation so that one loaded
// store serves all its operations:
//
//	BenchmarkFlinkValue/keys=500K/key=8B/impl=pebble/op=get
//	BenchmarkFlinkList/keys=500K/key=16B+ns8B/impl=strata/op=append
//	BenchmarkFlinkMap/keys=500K/key=8B/impl=badger/op=contains-miss
//	BenchmarkGadget/window=incremental/keys=1M/impl=gomap
//	BenchmarkYCSB/keys=1M/key=8B/value=8B/impl=swiss/dist=zipf0.99/mix=A
//	BenchmarkEqualMemory/budget=256MiB/state=value/keys=1M/key=16B+ns8B/value=100B/impl=pebble/op=get
//	BenchmarkLargerThanMemory/keys=6100K/value=100B/budget=64MiB/impl=strata/dist=uniform/mix=C
//	BenchmarkCheckpoint/state=256MiB/impl=pebble
//	BenchmarkRestore/state=256MiB/impl=strata/mode=scaleout
//	BenchmarkMemoryEfficiency/state=value/keys=1M/impl=strata
//	BenchmarkJob/job=flight/procs=2/impl=strata
//
// key= is the key shape of a point-op row (Shapes): 8B (an 8 B Long, no
// namespace) or 16B+ns8B (a windowed job's 16 B key in an 8 B namespace);
// every Flink, YCSB (1M keys) and EqualMemory row runs in both.
//
// # GOMAXPROCS
//
// cmd/results and cmd/gates run the suite with -cpu 1 (GOMAXPROCS=1 for the
// whole process): Strata's background workers and the peers' compactions
// share the one P with the benchmark's goroutine, so no write row is
// flattered by background work running free on a second core. With -cpu 1,2
// every leaf runs at both, the GOMAXPROCS=2 rows named with -2; a leaf's
// store is loaded once and serves both.
//
// Each leaf reports ns/op, B/op, allocs/op (b.ReportAllocs), ops/s and
// p99-ns (b.ReportMetric). p99-ns is measured on every 64th operation only,
// so that two clock reads per operation do not distort ns/op. The checkpoint
// and restore leaves report their own figures instead (checkpoint_test.go):
// an operation there is one checkpoint or one restore, and a leaf takes at
// least 20 (3) of them whatever b.N, so that percentiles have samples. A
// memory-efficiency leaf is one search for the smallest budget that keeps a
// state in memory and reports budget/state (memeff_test.go).
//
// # Invariants
//
//  1. A store is loaded once per (workload, implementation) on the first leaf
//     that runs (so -bench filters that skip it do not pay for it), shared
//     by its operation leaves in the order they are declared (reads before
//     writes that would change what the reads see), and closed before the
//     next implementation is loaded: at most one loaded store is alive.
//  2. The position in the key sequence carries over between the b.N rounds
//     and -count repeats of a leaf, so no round re-reads keys the previous
//     round just warmed.
//  3. Key sequences, values and event streams are generated before the
//     timer starts, from fixed seeds: every implementation sees the same
//     operations in the same order.
//  4. The op loop allocates nothing itself; allocs/op is the store's.
package suite
