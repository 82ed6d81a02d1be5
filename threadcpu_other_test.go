//go:build !linux

package strata

// threadCPU is 0 where the thread's CPU time is not available (see threadcpu_linux_test.go).
func threadCPU() int64 { return 0 }

func processCPU() int64 { return 0 }
