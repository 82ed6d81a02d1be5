package slice

import "bytes"

// lowerBound returns the first index i with fps[i] >= x, or len(fps) if
// there is none; fps is sorted ascending. It is the hook the SIMD kernels
// plug into: search_arm64.go sets it to asm_arm64.LowerBound (same
// contract); elsewhere it stays lowerBoundGo, the pure-Go twin and the
// reference in tests.
var lowerBound = lowerBoundGo

// lowerBoundGo is a branch-free binary search: the loop runs
// ⌈log2(len)⌉ times whatever x is, and the compiler turns the conditional
// add into a conditional move, so no misprediction depends on the data.
func lowerBoundGo(fps []uint64, x uint64) int {
	n := len(fps)
	if n == 0 {
		return 0
	}
	base := 0
	for n > 1 {
		half := n >> 1
		if fps[base+half-1] < x {
			base += half
		}
		n -= half
	}
	if fps[base] < x {
		base++
	}
	return base
}

// seek returns the first entry of s at or after (order, key, uk) with the
// newest sequence number, i.e. the first index whose (order, key, userKey)
// is >= the target. Allocation-free.
func (s *Slice) seek(order uint64, key, uk []byte) int {
	lo := lowerBound(s.fps, order)
	if lo == s.count || s.fps[lo] != order {
		return lo
	}
	// [lo, hi) share the order hash: usually one entry, several for a map
	// or a list's operands or a hash collision.
	hi := lo + 1
	if hi < s.count && s.fps[hi] == order {
		if order == ^uint64(0) {
			hi = s.count
		} else {
			hi = lo + lowerBound(s.fps[lo:], order+1)
		}
	}
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		k, u := s.keyAt(m)
		c := bytes.Compare(k, key)
		if c == 0 {
			c = bytes.Compare(u, uk)
		}
		if c < 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// first returns the index of the first slice of the run whose order range
// may hold order (maxOrder >= order); callers stop at a slice whose
// minOrder > order.
func (r *run) first(order uint64) int {
	lo, hi := 0, len(r.slices)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if r.slices[m].maxOrder < order {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}
