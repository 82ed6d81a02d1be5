package slice

import "unsafe"

// The miss filter (doc.go, "Miss filter"): a split-block bloom filter over
// a slice's order hashes, kept in the slice's block after its bytes. Each
// order hash sets one bit in each of the eight 64-bit words of one 64-byte
// line, so a query loads one cache line and tests eight bits; the line and
// the bits come from a 64-bit mix of the order hash (order hashes share
// their top bits within a bucket, so they are not used raw).
const (
	filterBitsPerKey = 10 // about 1 % false positives (split-block bloom, 8 bits per key set)
	filterLineBytes  = 64
	filterLineWords  = filterLineBytes / 8
)

// filterSalts are the odd multipliers of the split-block bloom filter of
// Apache Parquet's specification (SBBF), one per word of a line.
var filterSalts = [filterLineWords]uint32{
	0x47b6137b, 0x44974d91, 0x8824ad5b, 0xa2b7289d,
	0x705495c7, 0x2df1424b, 0x9efc4947, 0x5c6bfb31,
}

// filterLines returns the number of 64-byte lines of the filter of a slice
// of n entries: filterBitsPerKey bits per entry, rounded up to whole lines.
func filterLines(n int) int {
	return (n*filterBitsPerKey + filterLineBytes*8 - 1) / (filterLineBytes * 8)
}

// filterOffset returns where the filter of a slice of size bytes starts in
// its block: the next line boundary after the slice's bytes.
func filterOffset(size int) int {
	return (size + filterLineBytes - 1) &^ (filterLineBytes - 1)
}

// filterExtent returns the bytes of the block that a slice of size bytes
// and n entries uses with its filter.
func filterExtent(size, n int) int {
	return filterOffset(size) + filterLines(n)*filterLineBytes
}

// mix64 is a 64-bit finalizer (murmur3's fmix64): every output bit depends
// on every input bit.
func mix64(k uint64) uint64 {
	k ^= k >> 33
	k *= 0xff51afd7ed558ccd
	k ^= k >> 33
	k *= 0xc4ceb9fe1a85ec53
	k ^= k >> 33
	return k
}

// filterLine returns the index of the first word of h's line in a filter
// of lines lines (h = mix64(order)).
func filterLine(h uint64, lines int) int {
	return int((h>>32)*uint64(lines)>>32) * filterLineWords
}

// buildFilter writes the filter of fps into f (filterLines(len(fps)) lines,
// zeroed here first).
func buildFilter(f []uint64, fps []uint64) {
	clear(f)
	lines := len(f) / filterLineWords
	for _, order := range fps {
		h := mix64(order)
		w := f[filterLine(h, lines):][:filterLineWords]
		x := uint32(h)
		for i, salt := range filterSalts {
			w[i] |= 1 << ((x * salt) >> 26)
		}
	}
}

// filterView returns the filter of a slice of n entries whose bytes are
// buf, read in place after them in buf's block (cap(buf) reaches the
// block's end); nil when the block has no room for it.
func filterView(buf []byte, n int) []uint64 {
	off, lines := filterOffset(len(buf)), filterLines(n)
	if n == 0 || off+lines*filterLineBytes > cap(buf) {
		return nil
	}
	b := buf[off : off+lines*filterLineBytes : off+lines*filterLineBytes]
	return unsafe.Slice((*uint64)(unsafe.Pointer(&b[0])), lines*filterLineWords)
}

// mayHold reports whether s may hold an entry with order hash order: false
// only when its filter says it holds none. A slice without a filter (a
// decoded slice, an oversized one) may hold anything. One cache line.
func (s *Slice) mayHold(order uint64) bool {
	f := s.filter
	if len(f) == 0 {
		return true
	}
	h := mix64(order)
	w := f[filterLine(h, len(f)/filterLineWords):][:filterLineWords]
	x := uint32(h)
	b := w[0] >> ((x * filterSalts[0]) >> 26)
	b &= w[1] >> ((x * filterSalts[1]) >> 26)
	b &= w[2] >> ((x * filterSalts[2]) >> 26)
	b &= w[3] >> ((x * filterSalts[3]) >> 26)
	b &= w[4] >> ((x * filterSalts[4]) >> 26)
	b &= w[5] >> ((x * filterSalts[5]) >> 26)
	b &= w[6] >> ((x * filterSalts[6]) >> 26)
	b &= w[7] >> ((x * filterSalts[7]) >> 26)
	return b&1 != 0
}
