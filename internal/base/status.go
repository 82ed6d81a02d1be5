package base

// Status is the outcome of a point lookup in one tier (fresh.Table,
// slice.Table) or of a point read resolved by a Resolver. The values are
// the ones fresh and slice have always returned (Absent 0, Found 1,
// Deleted 2); the root package adds a status of its own above them (0xff,
// a failed read of the lower tier), so new values must stay below it. Not
// part of any format.
type Status uint8

const (
	// Absent: the tier holds nothing for the key; older tiers may.
	Absent Status = 0
	// Found: the value (or list, or map entry) is returned.
	Found Status = 1
	// Deleted: a tombstone (or a cleared map) shadows older data; older
	// tiers must not be consulted.
	Deleted Status = 2
)

// String returns the status name, for tests and errors.
func (s Status) String() string {
	switch s {
	case Absent:
		return "absent"
	case Found:
		return "found"
	case Deleted:
		return "deleted"
	}
	return "status(?)"
}
