package slice

import (
	"bytes"
	"math/bits"
)

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
	lo, hi := s.orderRange(order)
	return s.seekIn(lo, hi, key, uk)
}

// orderRange returns [lo, hi), the entries of s whose order hash is order
// (lo == hi at the insertion point when there is none): usually one entry,
// several for a map or a list's operands or a hash collision.
func (s *Slice) orderRange(order uint64) (lo, hi int) {
	lo = s.lowerBoundFP(order)
	if lo == s.count || s.fps[lo] != order {
		return lo, lo
	}
	hi = lo + 1
	if hi < s.count && s.fps[hi] == order {
		// Gallop from lo: the range is short (a map's entries, a list's
		// operands), and its end is in the cache lines lo brought in.
		step := 2
		for lo+step < s.count && s.fps[lo+step] == order {
			hi = lo + step + 1
			step <<= 1
		}
		end := min(lo+step, s.count)
		if order == ^uint64(0) {
			hi = end // nothing sorts above: [hi, end) all equal order
		} else {
			hi += lowerBound(s.fps[hi:end], order+1)
		}
	}
	return lo, hi
}

// lowerBoundFP is lowerBound(s.fps, order), found by interpolation: order
// hashes are uniform within a slice's [minOrder, maxOrder] (a bucket lies in
// a key group, and a key group's order hashes are uniform), so the rank of
// order is within a few standard deviations (√n / 2) of its interpolated
// position. It checks the two ends of a window around that position (two
// independent loads, one cache-miss latency) and searches inside it: about
// three dependent misses instead of log2 of the array's cache lines. When
// the window does not bracket order (skewed data) it searches the side
// that does, so the result is always exact.
func (s *Slice) lowerBoundFP(order uint64) int {
	n := s.count
	if n <= 64 {
		return lowerBound(s.fps, order)
	}
	if order <= s.minOrder {
		return 0
	}
	if order > s.maxOrder {
		return n
	}
	// 0 < order-minOrder <= span: the quotient is < n and Div64 cannot
	// overflow (hi < span).
	span := s.maxOrder - s.minOrder
	ph, pl := bits.Mul64(order-s.minOrder, uint64(n))
	g, _ := bits.Div64(ph, pl, span)
	w := 8 + n>>4
	lo, hi := max(int(g)-w, 0), min(int(g)+w, n)
	if lo > 0 && s.fps[lo-1] >= order {
		return lowerBound(s.fps[:lo], order)
	}
	if hi < n && s.fps[hi-1] < order {
		return hi + lowerBound(s.fps[hi:], order)
	}
	return lo + lowerBound(s.fps[lo:hi], order)
}

// seekIn returns the first index in [lo, hi) whose (key, userKey) is >=
// (key, uk), or hi; the entries in [lo, hi) share one order hash and are
// sorted by (key, userKey, newest first). Allocation-free.
func (s *Slice) seekIn(lo, hi int, key, uk []byte) int {
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
