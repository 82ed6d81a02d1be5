//go:build !race

package changelog

// raceEnabled: see race_on_test.go.
const raceEnabled = false
