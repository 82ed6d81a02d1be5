package engine

import "golang.org/x/sys/unix"

// threadCPU returns the CPU time (user + system, ns) of the calling OS thread: benchmarks that
// lock their goroutine to a thread report it beside wall time, which a busy machine inflates.
func threadCPU() int64 {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_THREAD, &ru) != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
