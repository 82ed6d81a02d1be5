//go:build !arm64 || purego

package asm_arm64

// setKernels selects the portable kernels: there is no assembly in this build.
func setKernels(Implementation) { lowerBound = lowerBoundGo }
