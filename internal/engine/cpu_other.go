//go:build !unix

package engine

// processCPU is 0 where getrusage is not available: TaskCost.CPUNanos then stays 0.
func processCPU() int64 { return 0 }
