#include "textflag.h"

// func Lines(addrs []uintptr)
TEXT ·Lines(SB), NOSPLIT, $0-24
	MOVQ addrs_base+0(FP), SI
	MOVQ addrs_len+8(FP), CX
	TESTQ CX, CX
	JEQ done
loop:
	MOVQ (SI), AX
	PREFETCHT0 (AX)
	ADDQ $8, SI
	DECQ CX
	JNZ loop
done:
	RET

// func Words(base unsafe.Pointer, ids *uint32, stride uintptr, n int)
TEXT ·Words(SB), NOSPLIT, $0-32
	MOVQ base+0(FP), DI
	MOVQ ids+8(FP), SI
	MOVQ stride+16(FP), DX
	MOVQ n+24(FP), CX
	TESTQ CX, CX
	JLE wdone
wloop:
	MOVLQZX (SI), AX
	PREFETCHT0 (DI)(AX*8)
	ADDQ DX, SI
	DECQ CX
	JNZ wloop
wdone:
	RET
