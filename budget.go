package strata

import "github.com/strata-db/strata/memory"

// Budget is a hard limit, in bytes, on memory mapped outside the Go heap, shared by the stores
// given it through Options.SharedBudget (for example all stores of one task-manager slot).
// It is safe for concurrent use. See memory.Budget.
type Budget = memory.Budget

// NewBudget returns a Budget of limit bytes to share among stores through
// Options.SharedBudget. limit must be positive (NewBudget panics otherwise) and at least
// MinMemoryBudget(Options.SegmentSize) — a segment and its index — for Open to accept it.
// Stores never release it; it holds no resources of its own. Safe for concurrent use.
func NewBudget(limit int64) *Budget { return memory.NewBudget(limit) }
