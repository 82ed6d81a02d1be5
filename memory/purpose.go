package memory

import "strconv"

// Purpose names what a mapping is used for. A Budget accounts its bytes per Purpose (see
// Budget.UsedBy and Budget.Stats) so that metrics can tell FreshTable data from indices, slices and
// the block cache. Purposes are not persisted; the values may change between versions.
type Purpose uint8

// Accounting purposes. NumPurposes is the number of valid purposes, not a purpose itself.
const (
	PurposeFreshData     Purpose = iota // FreshTable data segments (from a Pool)
	PurposeFreshIndex                   // FreshTable hash indices (Budget.Map)
	PurposeSlice                        // SliceTable slices (Budget.Map)
	PurposeBlockCache                   // LSM block cache and row cache (Budget.Map)
	PurposeOther                        // anything else
	PurposeChangelog                    // changelog (DSTL) buffers on the Go heap (Budget.Charge)
	PurposeOperatorState                // operator and broadcast state on the Go heap (Budget.Charge)
	PurposeTimers                       // timer queues: per key group heaps, sets and arenas (Budget.Map)
	PurposeHotTier                      // the Store's hot tier: cached and dirty state on the Go heap (Budget.Charge)
	NumPurposes                         // number of valid purposes; not a valid Purpose
)

var purposeNames = [NumPurposes]string{
	PurposeFreshData:     "fresh-data",
	PurposeFreshIndex:    "fresh-index",
	PurposeSlice:         "slice",
	PurposeBlockCache:    "block-cache",
	PurposeOther:         "other",
	PurposeChangelog:     "changelog",
	PurposeOperatorState: "operator-state",
	PurposeTimers:        "timers",
	PurposeHotTier:       "hot-tier",
}

// String returns the purpose's metric label ("fresh-data", "fresh-index", "slice",
// "block-cache", "other", "changelog", "operator-state", "timers", "hot-tier"), or "purpose(N)" for an invalid value.
func (p Purpose) String() string {
	if p < NumPurposes {
		return purposeNames[p]
	}
	return "purpose(" + strconv.Itoa(int(p)) + ")"
}

// valid reports whether p is one of the accounting purposes.
func (p Purpose) valid() bool { return p < NumPurposes }

// usesReserve reports whether mappings for p may take the budget's reserve (see
// Budget.AddReserve): every purpose except the writers' (FreshTable data and index, the
// changelog buffer, which grows with every write as the FreshTable does, and operator state
// and timers, which the task's writes grow and no background work frees, and the hot tier,
// which the task's reads and writes grow).
func (p Purpose) usesReserve() bool {
	return p != PurposeFreshData && p != PurposeFreshIndex && p != PurposeChangelog && p != PurposeOperatorState &&
		p != PurposeTimers && p != PurposeHotTier
}
