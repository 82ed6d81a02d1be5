//go:build race

package engine

// raceEnabled reports a -race build: tests with large workloads run them smaller under it
// (about 10× slower).
const raceEnabled = true
