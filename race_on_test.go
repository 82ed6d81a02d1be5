//go:build race

package strata

const raceEnabled = true

// raceScale scales a workload size for a -race run (about 10× slower): the CI's race step runs
// every test of the root package, so the large workloads run at a quarter there and at full size
// in the plain run.
func raceScale(n int) int { return max(n/4, 1) }

// raceSample keeps every other case of a fault sweep under -race (the first, the third, …):
// the race step samples the sweeps whose cases repeat one code path at other fault points, and
// the test command's plain step runs them whole (scripts/test.sh).
func raceSample[T any](cases []T) []T {
	var out []T
	for i := 0; i < len(cases); i += 2 {
		out = append(out, cases[i])
	}
	return out
}
