//go:build race

package strata

const raceEnabled = true

// raceScale scales a workload size for a -race run (about 10× slower): the CI's race step runs
// every test of the root package, so the large workloads run at a quarter there and at full size
// in the plain run.
func raceScale(n int) int { return max(n/4, 1) }
