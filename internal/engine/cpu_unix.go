//go:build unix

package engine

import "golang.org/x/sys/unix"

// processCPU returns the CPU time (user + system, ns) of the whole process, or 0 if it
// cannot be read: one system call, read at Open and by Stats only.
func processCPU() int64 {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
