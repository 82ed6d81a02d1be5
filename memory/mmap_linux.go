//go:build linux

package memory

import "golang.org/x/sys/unix"

// mapAnon maps n bytes (a multiple of the page size) of private anonymous zeroed memory.
func mapAnon(n int) ([]byte, error) {
	return unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
}

// unmap unmaps a slice returned by mapAnon.
func unmap(b []byte) error { return unix.Munmap(b) }

// adviseHuge asks for transparent huge pages. Best effort: EINVAL (THP disabled or not built
// in) and any other error only cost TLB misses, so they are ignored.
func adviseHuge(b []byte) { _ = unix.Madvise(b, unix.MADV_HUGEPAGE) }
