//go:build !linux

package memory

// Fallback for non-Linux systems (development on macOS and the like): regions are ordinary
// Go heap slices from make. Rounding, zeroing and budget accounting behave as on Linux, but the
// memory lives on the Go heap (it counts toward GC pacing and is freed by the collector, not by
// munmap) and there is no huge-page advice. Production targets are linux/amd64 and linux/arm64.

func mapAnon(n int) ([]byte, error) { return make([]byte, n), nil }

func unmap(b []byte) error { return nil }

func adviseHuge(b []byte) {}
