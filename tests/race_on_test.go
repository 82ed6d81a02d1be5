//go:build race

package tests

// raceEnabled reports a -race build: the memory tests shrink or skip under it, since the race
// detector's shadow memory is not the store's.
const raceEnabled = true
