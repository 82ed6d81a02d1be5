package strata

import (
	"os"
	"strconv"
)

// STRATA_TEST_HOT_TIER=N runs the package's tests with the hot tier on at a budget's limit / N
// in every Store that leaves it off (hot.go): the model test and the semantic tests as tests
// of invariant H1. Expected failures with it (2026-12-05): tests that count the FreshTable's
// records or changelog records around reads (the tier writes back at cross-key reads),
// tests of the row cache's hits, tests on a budget too tight for the tier's quantum beside a
// segment, and tests that expect an iteration to work while a checkpoint storage outage or
// a full disk makes writes fail (with the tier the write-back a cross-key read needs fails:
// Options.HotTierSize).
func init() {
	if v := os.Getenv("STRATA_TEST_HOT_TIER"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			panic("STRATA_TEST_HOT_TIER: want a positive divisor, got " + v)
		}
		testHotTierDiv = n
	}
}
