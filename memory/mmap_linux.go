//go:build linux

package memory

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

const (
	mmapProt  = unix.PROT_READ | unix.PROT_WRITE
	mmapFlags = unix.MAP_PRIVATE | unix.MAP_ANONYMOUS
)

// mapAnon maps n bytes (a multiple of the page size) of private anonymous zeroed memory.
//
// A mapping of at least hugePageSize bytes starts on a hugePageSize boundary, so that
// transparent huge pages can back all of it: the kernel only places a huge page on an aligned
// 2 MiB range, and kernels before 6.7 do not align anonymous mappings themselves. We map
// hugePageSize extra bytes of address space (no memory: untouched pages cost nothing) and unmap
// the unaligned head and the tail:
//
//	p                 a = p rounded up to 2 MiB              a+n           p+n+2MiB
//	|--- head ---|---------------- region (n bytes) ----------|--- tail ---|
//	   unmapped                    returned                      unmapped
//
// head + tail == hugePageSize. The budget only ever accounts n (invariant 4).
func mapAnon(n int) ([]byte, error) {
	if n < hugePageSize {
		p, err := unix.MmapPtr(-1, 0, nil, uintptr(n), mmapProt, mmapFlags)
		if err != nil {
			return nil, err
		}
		return unsafe.Slice((*byte)(p), n), nil
	}
	span := uintptr(n) + hugePageSize
	p, err := unix.MmapPtr(-1, 0, nil, span, mmapProt, mmapFlags)
	if err != nil {
		return nil, err
	}
	head := (hugePageSize - uintptr(p)%hugePageSize) % hugePageSize
	tail := hugePageSize - head
	if head > 0 {
		if err := unix.MunmapPtr(p, head); err != nil {
			_ = unix.MunmapPtr(p, span)
			return nil, err
		}
	}
	if err := unix.MunmapPtr(unsafe.Add(p, head+uintptr(n)), tail); err != nil {
		_ = unix.MunmapPtr(unsafe.Add(p, head), uintptr(n)+tail)
		return nil, err
	}
	return unsafe.Slice((*byte)(unsafe.Add(p, head)), n), nil
}

// unmap unmaps a slice returned by mapAnon.
func unmap(b []byte) error {
	return unix.MunmapPtr(unsafe.Pointer(unsafe.SliceData(b)), uintptr(len(b)))
}

// adviseHuge asks for transparent huge pages. Best effort: EINVAL (THP disabled or not built
// in) and any other error only cost TLB misses, so they are ignored.
func adviseHuge(b []byte) { _ = unix.Madvise(b, unix.MADV_HUGEPAGE) }
