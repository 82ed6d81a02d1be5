package strata

import "golang.org/x/sys/unix"

// threadCPU returns the CPU time (ns) of the calling OS thread: benchmarks that lock their
// goroutine to a thread report it beside wall time, which a busy machine inflates.
func threadCPU() int64 {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return ts.Nano()
}

// processCPU returns the user and system CPU time of the process in nanoseconds (every
// thread: the background work of a Store too).
func processCPU() int64 {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
