//go:build arm64 && !purego

package asm_arm64

import (
	"github.com/klauspost/cpuid/v2"
	"golang.org/x/sys/cpu"
)

func detect() Features {
	f := Features{
		ASIMD: cpu.ARM64.HasASIMD,
		SVE:   cpu.ARM64.HasSVE,
	}
	f.SVE2 = f.SVE && cpu.ARM64.HasSVE2
	if f.SVE {
		// cpuid reads the vector length with RDVL; only safe when SVE is present.
		vl, _ := cpuid.CPU.SveLengths()
		f.VectorBits = int(vl)
	}
	return f
}

func choose(f Features) Implementation {
	switch {
	case f.SVE:
		return ImplSVE
	default:
		// ASIMD is mandatory on ARMv8-A.
		return ImplNEON
	}
}
