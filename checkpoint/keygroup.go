package checkpoint

import "fmt"

// KeyGroupRange is an inclusive range [Start, End] of key groups, as Flink's KeyGroupRange.
// It is the one key-group range type of the module: the root package's strata.KeyGroupRange
// is an alias of it. A Store owns one KeyGroupRange out of its MaxParallelism key groups;
// manifests, changelog segments and object names record the range of what they hold.
//
// Key groups are ints in memory and 16-bit unsigned integers on disk: MaxParallelism is at
// most 32768 (Flink's UPPER_BOUND_MAX_PARALLELISM), so every valid key group fits. Encoders
// reject a range that does not fit (outside [0, MaxParallelism) where they know it) with their
// typed error rather than truncate it.
type KeyGroupRange struct {
	Start int // first key group, inclusive
	End   int // last key group, inclusive
}

// Contains reports whether keyGroup lies in [r.Start, r.End].
func (r KeyGroupRange) Contains(keyGroup int) bool {
	return keyGroup >= r.Start && keyGroup <= r.End
}

// NumberOfKeyGroups is End-Start+1 (0 for an empty range), as Flink's
// KeyGroupRange.getNumberOfKeyGroups.
func (r KeyGroupRange) NumberOfKeyGroups() int {
	if r.End < r.Start {
		return 0
	}
	return r.End - r.Start + 1
}

// String formats the range as Flink does: "KeyGroupRange{startKeyGroup=0, endKeyGroup=127}".
// Object names spell a range differently ("00000-00127"; see SharedName).
func (r KeyGroupRange) String() string {
	return fmt.Sprintf("KeyGroupRange{startKeyGroup=%d, endKeyGroup=%d}", r.Start, r.End)
}
