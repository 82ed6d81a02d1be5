//go:build !race

package slice

const raceEnabled = false
