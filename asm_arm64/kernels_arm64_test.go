//go:build arm64 && !purego

package asm_arm64

// windowKernels lists the assembly scan kernels this CPU can run, each with
// its Go twin.
func windowKernels() []windowKernel {
	ks := []windowKernel{{"countLessNEON", countLessNEON, countLessGo}}
	if CPU().SVE {
		ks = append(ks,
			windowKernel{"countLessSVE", countLessSVE, countLessGo},
			windowKernel{"scanLowerBoundSVE", scanLowerBoundSVE, scanLowerBoundGo})
	}
	return ks
}

// matchKernels lists the assembly tag-match kernels (twin: MatchTag8).
func matchKernels() map[string]func(uint64, byte) uint64 {
	return map[string]func(uint64, byte) uint64{"matchTag8NEON": matchTag8NEON}
}

// lowerBounds lists every LowerBound implementation this CPU can run.
func lowerBounds() map[string]func([]uint64, uint64) int {
	m := map[string]func([]uint64, uint64) int{"lowerBoundGo": lowerBoundGo, "lowerBoundNEON": lowerBoundNEON}
	if CPU().SVE {
		m["lowerBoundSVE"] = lowerBoundSVE
	}
	return m
}
