// Package jobopts holds the Strata options the bench's jobs (cmd/flightdemo, cmd/nexmark)
// derive the same way from their flags, so that the two jobs run the same configuration.
package jobopts

import "github.com/strata-db/strata"

// HotTierSize is strata.Options.HotTierSize for a job's -hot flag (bytes; -1: the default)
// and its memory budget in bytes (0: strata.DefaultMemoryBudget): the flag when it is 0 or
// more, else an eighth of the budget (the root doc.go's "Hot tier": its typical setting).
func HotTierSize(flag, budget int64) int64 {
	if flag >= 0 {
		return flag
	}
	if budget == 0 {
		budget = strata.DefaultMemoryBudget
	}
	return budget / 8
}
