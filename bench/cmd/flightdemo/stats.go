package main

import (
	"fmt"

	"github.com/strata-db/strata"
)

// statsLine formats the store's own accounting: records and bytes in the FreshTable's
// mmap'd segments and hash indices (outside the Go heap).
func statsLine(st strata.StoreStats) string {
	const mib = 1 << 20
	return fmt.Sprintf("%d records in %d segments: %d bytes used (%.1f MiB) of %d mapped (%.0f MiB), index %d bytes (%.1f MiB), budget used %.0f of %.0f MiB; "+
		"slices %.1f MiB; LsmStore %d files, %.0f MiB (%d flushes, %d evictions, %d compactions, write amplification %.2f); %d writes waited for memory, %d for L0",
		st.Records, st.Segments, st.DataBytes, float64(st.DataBytes)/mib, st.SegmentBytes, float64(st.SegmentBytes)/mib,
		st.IndexBytes, float64(st.IndexBytes)/mib, float64(st.BudgetUsed)/mib, float64(st.BudgetLimit)/mib,
		float64(st.SliceBytes)/mib, st.LSMFiles, float64(st.LSMBytes)/mib, st.Flushes, st.Evictions, st.LSMCompactions,
		st.WriteAmplification, st.BackpressureWaits, st.L0Stalls)
}
