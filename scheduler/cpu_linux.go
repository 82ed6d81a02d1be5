package scheduler

import "golang.org/x/sys/unix"

// threadCPU returns the CPU time (user + system, ns) of the calling OS thread, or 0 if the
// clock cannot be read. Meaningful only on a goroutine locked to its thread (the workers:
// doc.go, invariant 11). One vDSO or system call: read once before and once after a task,
// never per state operation.
func threadCPU() int64 {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return ts.Nano()
}
