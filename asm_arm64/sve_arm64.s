//go:build arm64 && !purego && go1.27 && goexperiment.simd

// SVE kernels: mnemonic source of truth, vector-length agnostic (no
// assumption about VL: WHILELO builds the tail predicate, INCP steps by the
// active lane count). Builds only with Go 1.27 and GOEXPERIMENT=simd; every
// other build uses sve_words_arm64.s, generated from this file by
// internal/tools/sve2word. Leaf, NOSPLIT|NOFRAME, ABI0. Every Z/P register
// read is written first in the same call; nothing lives across calls
// (preemption and signal safety: ../shared/notes/arm64-simd.md §7).
// Go operand order: sources first, destination last. WHILE*/CMP* set the
// flags like PTEST: BEQ = no active lane true, BNE = some lane true.

#include "textflag.h"

// func scanLowerBoundSVE(fps []uint64, x uint64) int
//
// R0 = &fps[0], R1 = len, R2 = x, R3 = i, Z0 = x in every lane,
// P0 = lanes i..min(i+VL/64, len), P1 = lanes with fps >= x,
// P2 = lanes before the first hit.
TEXT ·scanLowerBoundSVE(SB), NOSPLIT|NOFRAME, $0-40
	MOVD	fps_base+0(FP), R0
	MOVD	fps_len+8(FP), R1
	MOVD	x+24(FP), R2
	MOVD	$0, R3
	ZDUP	R2, Z0.D
	PWHILELO	R1, R3, P0.D // P0[j] = i+j < len
scan:
	BEQ	none
	ZLD1D	(R3<<3)(R0), P0.Z, [Z1.D]
	ZCMPHS	Z0.D, Z1.D, P0.Z, P1.D // P1 = fps[i+j] >= x
	BNE	found
	PINCP	P0.D, R3
	PWHILELO	R1, R3, P0.D
	B	scan
found:
	PBRKB	P1.B, P0.Z, P2.B
	PCNTP	P2.D, P0, R4
	ADD	R4, R3, R3
	MOVD	R3, ret+32(FP)
	RET
none:
	MOVD	R1, ret+32(FP)
	RET

// func countLessSVE(fps []uint64, x uint64) int
//
// R0 = &fps[0], R1 = len, R2 = x, R3 = i, Z0 = x, Z2 = 1 per lane,
// Z3 = per-lane counts, P0 = active lanes, P1 = lanes with x > fps,
// P7 = all lanes (PWHILELO from 0 to 2^64-1: Go 1.27 has no PTRUE Pd).
TEXT ·countLessSVE(SB), NOSPLIT|NOFRAME, $0-40
	MOVD	fps_base+0(FP), R0
	MOVD	fps_len+8(FP), R1
	MOVD	x+24(FP), R2
	MOVD	$0, R3
	MOVD	$-1, R5
	ZDUP	R2, Z0.D
	ZDUP	$1, Z2.D
	ZDUP	$0, Z3.D
	PWHILELO	R5, R3, P7.D
	PWHILELO	R1, R3, P0.D
count:
	BEQ	counted
	ZLD1D	(R3<<3)(R0), P0.Z, [Z1.D]
	ZCMPHI	Z1.D, Z0.D, P0.Z, P1.D // P1 = x > fps[i+j]
	ZADD	Z2.D, Z3.D, P1.M, Z3.D // Z3 += 1 where P1
	PINCP	P0.D, R3
	PWHILELO	R1, R3, P0.D
	B	count
counted:
	ZUADDVD	Z3.D, P7, V4
	VMOV	V4.D[0], R4
	MOVD	R4, ret+32(FP)
	RET
