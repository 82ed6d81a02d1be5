//go:build !arm64 || purego

package asm_arm64

func windowKernels() []windowKernel { return nil }

func matchKernels() map[string]func(uint64, byte) uint64 { return nil }

func lowerBounds() map[string]func([]uint64, uint64) int {
	return map[string]func([]uint64, uint64) int{"lowerBoundGo": lowerBoundGo}
}
