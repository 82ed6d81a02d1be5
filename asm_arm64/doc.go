// Package asm_arm64 holds Strata's SIMD kernels for arm64 (NEON and
// vector-length-agnostic SVE) and the CPU-feature dispatch that picks them.
//
// # Status
//
// This package currently provides the dispatch decision only: which
// implementation family (SVE, NEON or the portable Go twin) the kernels use on
// the running CPU, and the SVE vector length. The kernels themselves — the
// FreshTable tag match or probe loop and the SliceTable fingerprint lower
// bound — arrive with the SliceTable work; until then fresh/ matches tags with
// portable SWAR Go code on every architecture.
//
// # Invariants
//
//  1. The implementation is chosen once, at package initialisation, and never
//     changes for the life of the process (Impl is a constant after init).
//  2. NEON (ASIMD) needs no check: it is mandatory on ARMv8-A.
//  3. SVE is used only when golang.org/x/sys/cpu reports HasSVE; SVE2 only when
//     both HasSVE and HasSVE2 are set (some pre-6.14 kernels set the SVE2
//     HWCAP2 bit on SME-only parts).
//  4. The build tag purego disables every kernel: Impl is ImplGeneric on all
//     architectures.
//  5. Kernels are vector-length agnostic: nothing may assume a particular
//     SVE vector length; VectorBits is reported for metrics and tests only.
//  6. Every kernel will have a pure-Go twin with the same signature that is
//     the reference in tests and the fallback on amd64.
//
// This package imports nothing of Strata's.
package asm_arm64
