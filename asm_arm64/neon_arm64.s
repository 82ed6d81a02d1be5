//go:build arm64 && !purego && go1.27 && goexperiment.simd

// NEON kernels: mnemonic source of truth. Builds only with Go 1.27 and
// GOEXPERIMENT=simd; every other build uses neon_words_arm64.s, generated from
// this file by internal/tools/sve2word (go generate; scripts/check-asm.sh
// proves the two in sync). Leaf, NOSPLIT|NOFRAME, ABI0: arguments via FP.
// Go operand order: sources first, destination last.

#include "textflag.h"

// func countLessNEON(fps []uint64, x uint64) int
//
// R0 = &fps[i] (post-incremented), R1 = elements left, R2 = x,
// V0 = {x, x}, V4/V5 = per-lane counts (two chains), R6 = scalar tail count.
TEXT ·countLessNEON(SB), NOSPLIT|NOFRAME, $0-40
	MOVD	fps_base+0(FP), R0
	MOVD	fps_len+8(FP), R1
	MOVD	x+24(FP), R2
	VDUP	R2, V0.D2
	VEOR	V4.B16, V4.B16, V4.B16
	VEOR	V5.B16, V5.B16, V5.B16
	MOVD	$0, R6
loop4:
	CMP	$4, R1
	BLT	tail
	VLD1.P	32(R0), [V1.D2, V2.D2]
	VCMHI	V1.D2, V0.D2, V3.D2 // V3 = x > key ? ~0 : 0 (unsigned)
	VCMHI	V2.D2, V0.D2, V6.D2
	VSUB	V3.D2, V4.D2, V4.D2 // V4 -= -1 where x > key
	VSUB	V6.D2, V5.D2, V5.D2
	SUB	$4, R1, R1
	B	loop4
tail:
	CBZ	R1, done
	MOVD.P	8(R0), R3
	CMP	R2, R3              // flags of R3 - R2
	CINC	LO, R6, R6          // key < x (unsigned)
	SUB	$1, R1, R1
	B	tail
done:
	VADD	V5.D2, V4.D2, V4.D2
	VMOV	V4.D[0], R4
	VMOV	V4.D[1], R5
	ADD	R5, R4, R4
	ADD	R6, R4, R4
	MOVD	R4, ret+32(FP)
	RET

// func matchTag8NEON(ctrl uint64, tag byte) uint64
//
// R0 = ctrl, R1 = tag; V0.B8 = ctrl bytes, V1.B8 = tag in every byte.
TEXT ·matchTag8NEON(SB), NOSPLIT|NOFRAME, $0-24
	MOVD	ctrl+0(FP), R0
	MOVBU	tag+8(FP), R1
	VMOV	R0, V0.D[0]
	VDUP	R1, V1.B8
	VCMEQ	V0.B8, V1.B8, V2.B8 // 0xFF per equal byte
	VMOV	V2.D[0], R2
	AND	$0x8080808080808080, R2, R2
	MOVD	R2, ret+16(FP)
	RET
