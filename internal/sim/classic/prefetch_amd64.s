#include "textflag.h"

// func prefetchBlocks(bl *block, id *uint32, stride uintptr, n int)
TEXT ·prefetchBlocks(SB), NOSPLIT, $0-32
	MOVQ bl+0(FP), DI
	MOVQ id+8(FP), SI
	MOVQ stride+16(FP), DX
	MOVQ n+24(FP), CX
	TESTQ CX, CX
	JLE done
loop:
	MOVLQZX (SI), AX
	PREFETCHT0 (DI)(AX*8)
	ADDQ DX, SI
	DECQ CX
	JNZ loop
done:
	RET

