//go:build !unix

package lsm

// fileLimit reports no limit where getrlimit(2) does not exist.
func fileLimit() (uint64, bool) { return 0, false }
