//go:build !linux

package scheduler

// threadCPU is 0 where the thread's CPU time is not read (see cpu_linux.go): Meters and
// ClassStats then report no CPU, only jobs and running time.
func threadCPU() int64 { return 0 }
