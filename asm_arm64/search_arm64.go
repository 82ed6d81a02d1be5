//go:build arm64 && !purego

package asm_arm64

// setKernels points the dispatch variables at the kernels of impl. Called
// once, from init.
func setKernels(impl Implementation) {
	switch impl {
	case ImplSVE:
		lowerBound = lowerBoundSVE
	case ImplNEON:
		lowerBound = lowerBoundNEON
	default:
		lowerBound = lowerBoundGo
	}
}

// lowerBoundNEON is LowerBound with a branch-free NEON count of the last
// Window candidates.
func lowerBoundNEON(fps []uint64, x uint64) int {
	base, n := narrow(fps, x)
	return base + countLessNEON(fps[base:base+n], x)
}

// lowerBoundSVE is LowerBound with an early-exit, vector-length-agnostic
// SVE scan of the last Window candidates.
func lowerBoundSVE(fps []uint64, x uint64) int {
	base, n := narrow(fps, x)
	return base + scanLowerBoundSVE(fps[base:base+n], x)
}

// countLessNEON returns the number of elements of fps below x (unsigned),
// in any order: 4 keys per iteration with two 2-lane VCMHI, scalar tail.
// Twin: countLessGo. neon_arm64.s.
//
//go:noescape
func countLessNEON(fps []uint64, x uint64) int

// countLessSVE is countLessNEON for SVE (VL/64 keys per compare, branch-free
// full-width accumulator). Twin: countLessGo. Not dispatched: kept to compare
// with scanLowerBoundSVE on hardware. sve_arm64.s.
//
//go:noescape
func countLessSVE(fps []uint64, x uint64) int

// scanLowerBoundSVE returns the first i with fps[i] >= x (unsigned), len(fps)
// if none, in any order; exits at the first vector holding a hit. Twin:
// scanLowerBoundGo. sve_arm64.s.
//
//go:noescape
func scanLowerBoundSVE(fps []uint64, x uint64) int

// matchTag8NEON is MatchTag8 in NEON (VCMEQ on 8 bytes). Not dispatched: an
// ABI0 call cannot beat the inlined SWAR MatchTag8 (see doc.go); kept so the
// call cost can be measured on arm64 hardware (BenchmarkMatchTag8).
// neon_arm64.s.
//
//go:noescape
func matchTag8NEON(ctrl uint64, tag byte) uint64
