//go:build amd64 && !purego

#include "textflag.h"

// func dotBF16x4AVX2(x *float32, w0, w1, w2, w3 *uint16, blocks int, acc *[4][8]float32)
TEXT ·dotBF16x4AVX2(SB), NOSPLIT, $0-56
	MOVQ x+0(FP), SI
	MOVQ w0+8(FP), R8
	MOVQ w1+16(FP), R9
	MOVQ w2+24(FP), R10
	MOVQ w3+32(FP), R11
	MOVQ blocks+40(FP), CX
	MOVQ acc+48(FP), DI
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	TESTQ CX, CX
	JZ done

loop:
	VMOVUPS (SI), Y4        // x[i:i+8]
	VPMOVZXWD (R8), Y5      // row 0: eight bf16 values zero-extended to 32 bits
	VPSLLD $16, Y5, Y5      // ... and shifted into float32 position
	VMULPS Y4, Y5, Y5
	VADDPS Y5, Y0, Y0
	VPMOVZXWD (R9), Y6      // row 1
	VPSLLD $16, Y6, Y6
	VMULPS Y4, Y6, Y6
	VADDPS Y6, Y1, Y1
	VPMOVZXWD (R10), Y7     // row 2
	VPSLLD $16, Y7, Y7
	VMULPS Y4, Y7, Y7
	VADDPS Y7, Y2, Y2
	VPMOVZXWD (R11), Y8     // row 3
	VPSLLD $16, Y8, Y8
	VMULPS Y4, Y8, Y8
	VADDPS Y8, Y3, Y3
	ADDQ $32, SI
	ADDQ $16, R8
	ADDQ $16, R9
	ADDQ $16, R10
	ADDQ $16, R11
	DECQ CX
	JNZ loop

done:
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	VZEROUPPER
	RET
