package strata

import (
	"os"
	"strconv"
)

// STRATA_TEST_HOT_TIER=N runs the package's tests with the hot tier on at a budget's limit / N
// in every Store that leaves it off (hot.go): the whole suite as a test of invariant H1.
func init() {
	if v := os.Getenv("STRATA_TEST_HOT_TIER"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			panic("STRATA_TEST_HOT_TIER: want a positive divisor, got " + v)
		}
		testHotTierDiv = n
	}
}
