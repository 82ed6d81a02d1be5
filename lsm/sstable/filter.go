package sstable

import "math/bits"

// filter is a blocked bloom filter over the distinct Orders of a file: each
// Order sets k bits inside one 64-byte line (one cache line per probe), as in
// RocksDB's FastLocalBloom. lines == 0 means the file is empty (nothing may be
// contained); a nil *filter means the file has none (everything may be).
type filter struct {
	bits  []byte // lines × 64 bytes
	lines uint32
	k     uint8
}

// mix64 is the splitmix64 finalizer: Orders of one file share their top bits,
// so they are mixed before picking a line and bits.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// filterK returns the number of probes for bitsPerKey (≈ bitsPerKey·ln 2),
// between 1 and 16.
func filterK(bitsPerKey int) uint8 {
	k := (bitsPerKey*69 + 50) / 100
	return uint8(min(max(k, 1), 16))
}

// filterLine returns the line of h and the start of its probe sequence.
func filterLine(h uint64, lines uint32) (uint32, uint32) {
	hi, _ := bits.Mul32(uint32(h>>32), lines)
	return hi, uint32(h)
}

// appendFilter appends the filter payload for the given Orders (distinct,
// any order) with bitsPerKey bits each: lines, then the filter footer.
func appendFilter(dst []byte, orders []uint64, bitsPerKey int) []byte {
	lines := uint32(0)
	if len(orders) > 0 {
		lines = uint32((len(orders)*bitsPerKey + 511) / 512)
	}
	k := filterK(bitsPerKey)
	base := len(dst)
	dst = append(dst, make([]byte, int(lines)*filterLineSize)...)
	f := dst[base:]
	for _, o := range orders {
		h := mix64(o)
		line, x := filterLine(h, lines)
		delta := x>>17 | x<<15
		l := f[int(line)*filterLineSize:]
		for i := uint8(0); i < k; i++ {
			bit := x & 511
			l[bit>>3] |= 1 << (bit & 7)
			x += delta
		}
	}
	dst = append(dst, k, 0, 0, 0)
	return le.AppendUint32(dst, lines)
}

// decodeFilter decodes a verified filter payload. Offsets in errors are
// relative to the payload's start.
func decodeFilter(p []byte) (*filter, error) {
	if len(p) < filterFooterSize {
		return nil, corrupt(nil, 0, "filter payload of %d bytes is shorter than its footer", len(p))
	}
	fo := len(p) - filterFooterSize
	k := p[fo]
	lines := le.Uint32(p[fo+4:])
	if p[fo+1]|p[fo+2]|p[fo+3] != 0 {
		return nil, corrupt(nil, int64(fo+1), "filter footer reserved bytes are not zero")
	}
	if k < 1 || k > 16 {
		return nil, corrupt(nil, int64(fo), "filter with %d probes", k)
	}
	if uint64(lines)*filterLineSize != uint64(fo) {
		return nil, corrupt(nil, int64(fo+4), "filter of %d lines in %d bytes", lines, fo)
	}
	return &filter{bits: p[:fo], lines: lines, k: k}, nil
}

// mayContain reports whether order may be in the filter's set: false means
// certainly not.
func (f *filter) mayContain(order uint64) bool {
	if f.lines == 0 {
		return false
	}
	line, x := filterLine(mix64(order), f.lines)
	delta := x>>17 | x<<15
	l := f.bits[int(line)*filterLineSize : int(line+1)*filterLineSize]
	for i := uint8(0); i < f.k; i++ {
		bit := x & 511
		if l[bit>>3]&(1<<(bit&7)) == 0 {
			return false
		}
		x += delta
	}
	return true
}
