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
//	BenchmarkFlinkValue/keys=500K/impl=pebble/op=get
//	BenchmarkFlinkList/keys=500K/impl=strata/op=append
//	BenchmarkFlinkMap/keys=500K/impl=badger/op=contains-miss
//	BenchmarkGadget/window=incremental/keys=1M/impl=gomap
//	BenchmarkYCSB/keys=1M/value=8B/impl=swiss/dist=zipf0.99/mix=A
//	BenchmarkLargerThanMemory/keys=6100K/value=100B/budget=64MiB/impl=strata/dist=uniform/mix=C
//	BenchmarkCheckpoint/state=256MiB/impl=pebble
//	BenchmarkRestore/state=256MiB/impl=strata/mode=scaleout
//	BenchmarkMemoryEfficiency/state=value/keys=1M/impl=strata
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
