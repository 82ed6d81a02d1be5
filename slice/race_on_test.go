//go:build race

package slice

const raceEnabled = true
