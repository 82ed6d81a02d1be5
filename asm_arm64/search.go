package asm_arm64

import "math/bits"

// Window is the number of fingerprints the vector kernels scan after the
// binary search has narrowed the candidates: LowerBound on arm64 halves the
// range while it holds more than Window keys (about log2(n/Window) steps),
// then one kernel call counts the window (64 keys = 512 bytes = 8 cache
// lines). The generic implementation ignores it and searches to the end.
// Chosen from the notes' amd64 figures (a scalar scan of 64 keys costs more
// than the six binary-search steps it replaces, so only a vector scan pays);
// to be tuned on Kunpeng 920 / 920B hardware.
const Window = 64

// lowerBound is the LowerBound implementation chosen once at init
// (lowerBoundGo, lowerBoundNEON or lowerBoundSVE).
var lowerBound = lowerBoundGo

// LowerBound returns the first index i with fps[i] >= x, or len(fps) if
// every element is smaller. fps must be sorted ascending (unsigned); it is a
// SliceTable fingerprint array of up to a few thousand entries. Allocates
// nothing; safe for concurrent use (fps is only read).
func LowerBound(fps []uint64, x uint64) int { return lowerBound(fps, x) }

// EqualRange returns the half-open range [lo, hi) of the elements of the
// ascending fps equal to x; lo == hi == LowerBound(fps, x) if x is absent.
// Duplicate fingerprints are expected to be rare: the common single match
// costs one LowerBound and one extra compare.
func EqualRange(fps []uint64, x uint64) (lo, hi int) {
	lo = lowerBound(fps, x)
	if lo == len(fps) || fps[lo] != x {
		return lo, lo
	}
	hi = lo + 1
	if hi == len(fps) || fps[hi] != x {
		return lo, hi
	}
	if x == ^uint64(0) { // nothing is greater: the run reaches the end
		return lo, len(fps)
	}
	return lo, hi + lowerBound(fps[hi:], x+1)
}

// lowerBoundGo is the portable LowerBound: a branch-free binary search, so
// it costs the same log2(n)+1 steps whatever the data and mispredicts
// nothing. The step is arithmetic (lessMask), not `if fps[mid] < x { base =
// mid }`: the compiler deliberately keeps that a branch because base feeds a
// load address (cmd/compile branchelim, golang/go#26306).
//
// Invariant: the answer lies in [base, base+n].
func lowerBoundGo(fps []uint64, x uint64) int {
	base, n := 0, len(fps)
	for n > 1 {
		half := n >> 1
		base += half & lessMask(fps[base+half], x)
		n -= half
	}
	if n == 1 && fps[base] < x {
		base++
	}
	return base
}

// lessMask returns -1 (all ones) if v < x (unsigned) and 0 otherwise,
// without a branch: the borrow of v - x (SUB+SBB on amd64, SUBS+NGC-style on
// arm64).
func lessMask(v, x uint64) int {
	_, borrow := bits.Sub64(v, x, 0)
	return -int(borrow)
}

// narrow is the first part of the vector LowerBounds: the same branch-free
// halving as lowerBoundGo, stopped once at most Window candidates remain.
// The answer lies in [base, base+n], so it is base + (number of
// fps[base:base+n] below x).
func narrow(fps []uint64, x uint64) (base, n int) {
	base, n = 0, len(fps)
	for n > Window {
		half := n >> 1
		base += half & lessMask(fps[base+half], x)
		n -= half
	}
	return base, n
}

// countLessGo is the twin of the counting kernels (countLessNEON,
// countLessSVE): the number of elements below x, in any order. For an
// ascending fps it equals the lower bound.
func countLessGo(fps []uint64, x uint64) int {
	c := 0
	for _, v := range fps {
		if v < x {
			c++
		}
	}
	return c
}

// scanLowerBoundGo is the twin of the early-exit scanning kernel
// (scanLowerBoundSVE): the first i with fps[i] >= x, len(fps) if none, in
// any order.
func scanLowerBoundGo(fps []uint64, x uint64) int {
	for i, v := range fps {
		if v >= x {
			return i
		}
	}
	return len(fps)
}
