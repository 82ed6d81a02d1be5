package asm_arm64

// Implementation names one family of kernels. It is reported in metrics and
// asserted by tests; part of no file format.
type Implementation string

const (
	// ImplGeneric is the portable Go twin of every kernel (amd64, other
	// architectures, and any build with the purego tag).
	ImplGeneric Implementation = "generic"
	// ImplNEON is the arm64 Advanced SIMD family (128-bit vectors).
	ImplNEON Implementation = "neon"
	// ImplSVE is the arm64 Scalable Vector Extension family, written
	// vector-length agnostic.
	ImplSVE Implementation = "sve"
)

// Features are the CPU facts the dispatch decision was made from.
type Features struct {
	// ASIMD reports Advanced SIMD (NEON); always true on arm64.
	ASIMD bool
	// SVE reports the Scalable Vector Extension (HWCAP bit 22).
	SVE bool
	// SVE2 reports SVE2, set only when both the SVE and SVE2 bits are.
	SVE2 bool
	// VectorBits is the SVE vector length in bits (128..2048), 0 without SVE.
	VectorBits int
}

var (
	features Features
	impl     = ImplGeneric
)

func init() {
	features = detect()
	impl = choose(features)
	setKernels(impl)
}

// CPU returns the features detected at start-up. Safe for concurrent use.
func CPU() Features { return features }

// Impl returns the kernel family chosen once at start-up for this CPU (and
// build tags). Safe for concurrent use.
func Impl() Implementation { return impl }
