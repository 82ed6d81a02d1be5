//go:build !race

package strata

const raceEnabled = false

// raceScale scales a workload size for a -race run (see race_on_test.go); without -race it is n.
func raceScale(n int) int { return n }
