//go:build !race

package strata

const raceEnabled = false

// raceScale scales a workload size for a -race run (see race_on_test.go); without -race it is n.
func raceScale(n int) int { return n }

// raceSample returns cases (see race_on_test.go); without -race a fault sweep runs whole.
func raceSample[T any](cases []T) []T { return cases }
