//go:build unix

package lsm

import "syscall"

// fileLimit returns the process's soft limit on open file descriptors
// (getrlimit(2) RLIMIT_NOFILE), and false if it cannot be read.
func fileLimit() (uint64, bool) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0, false
	}
	return r.Cur, true
}
