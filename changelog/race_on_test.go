//go:build race

package changelog

// raceEnabled: the race detector allocates on its own, so allocation counts are not compared
// under it (TestSpareAcrossOverlappingPersist runs in the test command's plain step).
const raceEnabled = true
