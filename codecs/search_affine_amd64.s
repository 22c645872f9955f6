//go:build amd64 && !purego

#include "textflag.h"

// AVX-512 version of searchAffineGroup for 8 groups at once, one group per
// float64 lane (see search_affine_amd64.go for the data layout and the
// argument that it is bit-identical to the Go reference). Lanes the kernel
// cannot decide exactly are reported in the returned mask and redone in Go.

// Offsets in sa8 (keep in sync with search_affine_amd64.go).
#define O_X_OFF 0
#define O_BEST 2048
#define O_CAND 4096
#define O_LO 6144
#define O_HI 6208
#define O_SX 6272
#define O_AX 6336
#define O_REF 6400
#define O_LX 6464
#define O_SSE 6528
#define O_BD 6592
#define O_BM 6656
#define O_MAXE 6720
#define O_SUMS 6784
#define O_CTRD 7360
#define O_CTRM 7424
#define O_NMAX 7488
#define O_CLIP 7496
#define O_ONEMC 7504
#define O_NMAX32 7512

DATA sa8gidx<>+0(SB)/4, $0
DATA sa8gidx<>+4(SB)/4, $32
DATA sa8gidx<>+8(SB)/4, $64
DATA sa8gidx<>+12(SB)/4, $96
DATA sa8gidx<>+16(SB)/4, $128
DATA sa8gidx<>+20(SB)/4, $160
DATA sa8gidx<>+24(SB)/4, $192
DATA sa8gidx<>+28(SB)/4, $224
GLOBL sa8gidx<>(SB), RODATA|NOPTR, $32
DATA sa8half<>+0(SB)/8, $0x3fe0000000000000
GLOBL sa8half<>(SB), RODATA|NOPTR, $8
DATA sa8one<>+0(SB)/8, $0x3ff0000000000000
GLOBL sa8one<>(SB), RODATA|NOPTR, $8
DATA sa8c32<>+0(SB)/8, $0x4040000000000000
GLOBL sa8c32<>(SB), RODATA|NOPTR, $8
DATA sa8inv32<>+0(SB)/8, $0x3fa0000000000000
GLOBL sa8inv32<>(SB), RODATA|NOPTR, $8
DATA sa8abs64<>+0(SB)/8, $0x7fffffffffffffff
GLOBL sa8abs64<>(SB), RODATA|NOPTR, $8
DATA sa8sign64<>+0(SB)/8, $0x8000000000000000
GLOBL sa8sign64<>(SB), RODATA|NOPTR, $8
DATA sa8inf<>+0(SB)/8, $0x7ff0000000000000
GLOBL sa8inf<>(SB), RODATA|NOPTR, $8
DATA sa8e24<>+0(SB)/8, $1047
GLOBL sa8e24<>(SB), RODATA|NOPTR, $8
DATA sa8e52<>+0(SB)/8, $1075
GLOBL sa8e52<>(SB), RODATA|NOPTR, $8

DATA sa8abs32<>+0(SB)/4, $0x7fffffff
GLOBL sa8abs32<>(SB), RODATA|NOPTR, $4
DATA sa8mant<>+0(SB)/4, $0x007fffff
GLOBL sa8mant<>(SB), RODATA|NOPTR, $4
DATA sa8impl<>+0(SB)/4, $0x00800000
GLOBL sa8impl<>(SB), RODATA|NOPTR, $4
DATA sa8m150<>+0(SB)/4, $-150
GLOBL sa8m150<>(SB), RODATA|NOPTR, $4
DATA sa8m149<>+0(SB)/4, $-149
GLOBL sa8m149<>(SB), RODATA|NOPTR, $4
DATA sa8i31<>+0(SB)/4, $31
GLOBL sa8i31<>(SB), RODATA|NOPTR, $4
DATA sa8nolsb<>+0(SB)/4, $0x00100000
GLOBL sa8nolsb<>(SB), RODATA|NOPTR, $4
DATA sa8i1<>+0(SB)/4, $1
GLOBL sa8i1<>(SB), RODATA|NOPTR, $4
DATA sa8r7fff<>+0(SB)/4, $0x7fff
GLOBL sa8r7fff<>(SB), RODATA|NOPTR, $4
DATA sa8b7f80<>+0(SB)/4, $0x7f80
GLOBL sa8b7f80<>(SB), RODATA|NOPTR, $4
DATA sa8b7f7f<>+0(SB)/4, $0x7f7f
GLOBL sa8b7f7f<>(SB), RODATA|NOPTR, $4
DATA sa8b8000<>+0(SB)/4, $0x8000
GLOBL sa8b8000<>(SB), RODATA|NOPTR, $4
DATA sa8bff7f<>+0(SB)/4, $0xff7f
GLOBL sa8bff7f<>(SB), RODATA|NOPTR, $4
DATA sa8b8001<>+0(SB)/4, $0x8001
GLOBL sa8b8001<>(SB), RODATA|NOPTR, $4
DATA sa8f1e8<>+0(SB)/4, $0x322bcc77
GLOBL sa8f1e8<>(SB), RODATA|NOPTR, $4
DATA sa8f1<>+0(SB)/4, $0x3f800000
GLOBL sa8f1<>(SB), RODATA|NOPTR, $4
DATA sa8fmax<>+0(SB)/4, $0x7f7fffff
GLOBL sa8fmax<>(SB), RODATA|NOPTR, $4

// Comparison predicates.
#define LT 0x11
#define LE 0x12
#define EQ 0x00
#define GT 0x1e
#define GE 0x1d
#define NEQ 0x0c

// LSB: out = lsbExp of the float32 bit patterns in `in` (sa8nolsb for ±0);
// t1, t2 scratch Y registers, kk a scratch mask.
#define LSB(in, out, t1, t2, kk) \
	VPANDD.BCST sa8abs32<>(SB), in, t1; \
	VPSRLD $23, t1, out; \
	VPTESTNMD out, out, kk; \
	VPANDD.BCST sa8mant<>(SB), t1, t2; \
	VPORD.BCST sa8impl<>(SB), t2, t2; \
	VMOVDQU32 t1, kk, t2; \
	VPADDD.BCST sa8m150<>(SB), out, out; \
	VPBLENDMD.BCST sa8m149<>(SB), out, kk, out; \
	VPXORD t1, t1, t1; \
	VPSUBD t2, t1, t1; \
	VPANDD t2, t1, t1; \
	VPLZCNTD t1, t1; \
	VPADDD.BCST sa8i31<>(SB), out, out; \
	VPSUBD t1, out, out; \
	VPTESTNMD.BCST sa8abs32<>(SB), in, kk; \
	VPBLENDMD.BCST sa8nolsb<>(SB), out, kk, out

// POW2(l, e, out): out = 2^(l + e − 1023) as float64 (l int32 lanes in a Y
// register, e a memory constant holding 1023 + k).
#define POW2(l, e, out) \
	VPMOVSXDQ l, out; \
	VPADDQ.BCST e, out, out; \
	VPSLLQ $52, out, out

// BF16SAT(v, out, t, kk): out = bf16Sat(v) for the float64 lanes of Z
// register v (finite), as uint32 lanes of Y register out.
#define BF16SAT(v, out, t, kk) \
	VCVTPD2PS v, out; \
	VPSRLD $16, out, t; \
	VPANDD.BCST sa8i1<>(SB), t, t; \
	VPADDD.BCST sa8r7fff<>(SB), t, t; \
	VPADDD t, out, out; \
	VPSRLD $16, out, out; \
	VPANDD.BCST sa8r7fff<>(SB), out, t; \
	VPCMPUD.BCST $5, sa8b7f80<>(SB), t, kk; \
	VPANDD.BCST sa8b8000<>(SB), out, kk, out; \
	VPORD.BCST sa8b7f7f<>(SB), out, kk, out

// VALID(d, m, t, u, kin, kout): kout = kin lanes where (d, m) decodes to
// finite values (d < 0x7f80, m finite, float32(float32(nmax·d) + m) finite).
#define VALID(d, m, t, u, kin, kout) \
	VPCMPUD.BCST $1, sa8b7f80<>(SB), d, kin, kout; \
	VPANDD.BCST sa8r7fff<>(SB), m, t; \
	VPCMPUD.BCST $1, sa8b7f80<>(SB), t, kout, kout; \
	VPSLLD $16, d, t; \
	VPSLLD $16, m, u; \
	VMULPS.BCST O_NMAX32(DI), t, t; \
	VADDPS u, t, t; \
	VCMPPS.BCST $LE, sa8fmax<>(SB), t, kout, kout

// UP(b, out, kk): out = bf16Up(b); DOWN likewise.
#define UP(b, out, kk) \
	VPADDD.BCST sa8i1<>(SB), b, out; \
	VPTESTMD.BCST sa8b8000<>(SB), b, kk; \
	VPSUBD.BCST sa8i1<>(SB), b, kk, out; \
	VPCMPUD.BCST $0, sa8b8000<>(SB), b, kk; \
	VPBLENDMD.BCST sa8i1<>(SB), out, kk, out; \
	VPCMPUD.BCST $0, sa8b7f7f<>(SB), b, kk; \
	VMOVDQU32 b, kk, out

#define DOWN(b, out, kk) \
	VPSUBD.BCST sa8i1<>(SB), b, out; \
	VPTESTMD.BCST sa8b8000<>(SB), b, kk; \
	VPADDD.BCST sa8i1<>(SB), b, kk, out; \
	VPTESTNMD b, b, kk; \
	VPBLENDMD.BCST sa8b8001<>(SB), out, kk, out; \
	VPCMPUD.BCST $0, sa8bff7f<>(SB), b, kk; \
	VMOVDQU32 b, kk, out

// Registers kept across the whole kernel: DI = *sa8, Z31 = best error
// (+Inf where none yet), Y30/Y29 = best d/m bits, Z28 = nmax (float64),
// Z27 = 0, K6 = lanes to redo in Go.

// func searchAffine8(b *sa8, src *float32, dst *byte) uint8
TEXT ·searchAffine8(SB), NOSPLIT, $0-25
	MOVQ b+0(FP), DI
	MOVQ src+8(FP), SI
	// Transpose: x[j] = element j of the 8 groups at src (32 floats each).
	VMOVDQU32 sa8gidx<>(SB), Y1
	XORQ CX, CX
gather:
	KXNORB K1, K1, K1
	VGATHERDPS (SI)(Y1*4), K1, Y2
	VCVTPS2PD Y2, Z2
	VMOVUPD Z2, O_X_OFF(DI)(CX*8)
	ADDQ $4, SI
	ADDQ $8, CX
	CMPQ CX, $256
	JLT gather
	VPXORQ Z27, Z27, Z27
	VBROADCASTSD O_NMAX(DI), Z28
	VBROADCASTSD sa8inf<>(SB), Z31
	VPXORD Y30, Y30, Y30
	VPXORD Y29, Y29, Y29
	KXORB K6, K6, K6

	// Stats: lo, hi (the first of equal values kept), Σx, Σx², lowest set
	// bit among the values.
	VMOVUPD O_X_OFF(DI), Z2
	VMOVAPD Z2, Z3
	VPXORQ Z4, Z4, Z4
	VPXORQ Z5, Z5, Z5
	VPBROADCASTD sa8nolsb<>(SB), Y6
	XORQ CX, CX
stats:
	VMOVUPD O_X_OFF(DI)(CX*1), Z7
	VCMPPD $LT, Z2, Z7, K1
	VMOVAPD Z7, K1, Z2
	VCMPPD $GT, Z3, Z7, K1
	VMOVAPD Z7, K1, Z3
	VADDPD Z7, Z4, Z4
	VMULPD Z7, Z7, Z8
	VADDPD Z8, Z5, Z5
	VCVTPD2PS Z7, Y9
	LSB(Y9, Y10, Y11, Y12, K2)
	VPMINSD Y10, Y6, Y6
	ADDQ $64, CX
	CMPQ CX, $2048
	JLT stats
	VMOVUPD Z2, O_LO(DI)
	VMOVUPD Z3, O_HI(DI)
	VMOVUPD Z4, O_SX(DI)
	VMOVUPD Z5, O_REF(DI)
	VMOVDQU32 Y6, O_LX(DI)
	VXORPD.BCST sa8sign64<>(SB), Z2, Z8
	VMAXPD Z3, Z8, Z8
	VMOVUPD Z8, O_AX(DI)

	// Grid sums: q_k = clamp(trunc((x − lo_k)·inv_k + 0.5), 0, nmax) for
	// (lo, s), (lo, s/(1−c)), (lo + c·rng, s/(1−c)), s = nmax/rng.
	VSUBPD Z2, Z3, Z9          // rng
	VDIVPD Z9, Z28, Z10        // s
	VDIVPD.BCST O_ONEMC(DI), Z10, Z11 // inv1
	VMULPD.BCST O_CLIP(DI), Z9, Z12
	VADDPD Z12, Z2, Z12        // lo2
	VBROADCASTSD sa8half<>(SB), Z13
	VPXORQ Z14, Z14, Z14
	VPXORQ Z15, Z15, Z15
	VPXORQ Z16, Z16, Z16
	VPXORQ Z17, Z17, Z17
	VPXORQ Z18, Z18, Z18
	VPXORQ Z19, Z19, Z19
	VPXORQ Z20, Z20, Z20
	VPXORQ Z21, Z21, Z21
	VPXORQ Z22, Z22, Z22
	XORQ CX, CX
grid:
	VMOVUPD O_X_OFF(DI)(CX*1), Z7
	VSUBPD Z2, Z7, Z23
	VMULPD Z10, Z23, Z24
	VADDPD Z13, Z24, Z24
	VRNDSCALEPD $0x0b, Z24, Z24
	VMAXPD Z27, Z24, Z24
	VMINPD Z28, Z24, Z24
	VADDPD Z24, Z14, Z14
	VMULPD Z24, Z24, Z25
	VADDPD Z25, Z15, Z15
	VMULPD Z7, Z24, Z25
	VADDPD Z25, Z16, Z16
	VMULPD Z11, Z23, Z24
	VADDPD Z13, Z24, Z24
	VRNDSCALEPD $0x0b, Z24, Z24
	VMAXPD Z27, Z24, Z24
	VMINPD Z28, Z24, Z24
	VADDPD Z24, Z17, Z17
	VMULPD Z24, Z24, Z25
	VADDPD Z25, Z18, Z18
	VMULPD Z7, Z24, Z25
	VADDPD Z25, Z19, Z19
	VSUBPD Z12, Z7, Z23
	VMULPD Z11, Z23, Z24
	VADDPD Z13, Z24, Z24
	VRNDSCALEPD $0x0b, Z24, Z24
	VMAXPD Z27, Z24, Z24
	VMINPD Z28, Z24, Z24
	VADDPD Z24, Z20, Z20
	VMULPD Z24, Z24, Z25
	VADDPD Z25, Z21, Z21
	VMULPD Z7, Z24, Z25
	VADDPD Z25, Z22, Z22
	ADDQ $64, CX
	CMPQ CX, $2048
	JLT grid
	VMOVUPD Z14, O_SUMS+0(DI)
	VMOVUPD Z15, O_SUMS+64(DI)
	VMOVUPD Z16, O_SUMS+128(DI)
	VMOVUPD Z17, O_SUMS+192(DI)
	VMOVUPD Z18, O_SUMS+256(DI)
	VMOVUPD Z19, O_SUMS+320(DI)
	VMOVUPD Z20, O_SUMS+384(DI)
	VMOVUPD Z21, O_SUMS+448(DI)
	VMOVUPD Z22, O_SUMS+512(DI)
	VCMPPD $GT, Z27, Z9, K5    // rng > 0
	KMOVB K5, R9

	// 1. The engine's pair.
	VCVTPD2PS Z2, Y2           // lo (float32, exact)
	VCVTPD2PS Z3, Y3           // hi
	VSUBPS Y2, Y3, Y4          // r = hi − lo
	VDIVPS.BCST O_NMAX32(DI), Y4, Y5
	VCMPPS.BCST $LT, sa8f1e8<>(SB), Y4, K1 // r < 1e-8
	VPBROADCASTD sa8f1<>(SB), Y6
	VMOVDQU32 Y6, K1, Y5
	VPSRLD $16, Y5, Y0
	VPSRLD $16, Y2, Y1
	KXNORB K2, K2, K2
	VALID(Y0, Y1, Y3, Y4, K2, K1)
	CALL sa8eval<>(SB)

	// 2. The least-squares fits to the grids.
	KMOVB R9, K1
	VMOVUPD O_SUMS+0(DI), Z2
	VMOVUPD O_SUMS+64(DI), Z3
	VMOVUPD O_SUMS+128(DI), Z4
	CALL sa8ls<>(SB)
	CALL sa8eval<>(SB)
	KMOVB R9, K1
	VMOVUPD O_SUMS+192(DI), Z2
	VMOVUPD O_SUMS+256(DI), Z3
	VMOVUPD O_SUMS+320(DI), Z4
	CALL sa8ls<>(SB)
	CALL sa8eval<>(SB)
	KMOVB R9, K1
	VMOVUPD O_SUMS+384(DI), Z2
	VMOVUPD O_SUMS+448(DI), Z3
	VMOVUPD O_SUMS+512(DI), Z4
	CALL sa8ls<>(SB)
	CALL sa8eval<>(SB)

	// Lanes without any candidate yet take the reference's safety net.
	VCMPPD.BCST $EQ, sa8inf<>(SB), Z31, K1
	KORB K1, K6, K6

	// 3. One refit to the codes of the best.
	VPXORQ Z2, Z2, Z2
	VPXORQ Z3, Z3, Z3
	VPXORQ Z4, Z4, Z4
	XORQ CX, CX
refit:
	VMOVUPD O_BEST(DI)(CX*1), Z5
	VMOVUPD O_X_OFF(DI)(CX*1), Z7
	VADDPD Z5, Z2, Z2
	VMULPD Z5, Z5, Z6
	VADDPD Z6, Z3, Z3
	VMULPD Z7, Z5, Z6
	VADDPD Z6, Z4, Z4
	ADDQ $64, CX
	CMPQ CX, $2048
	JLT refit
	KXNORB K1, K1, K1
	CALL sa8ls<>(SB)
	CALL sa8eval<>(SB)

	// 4. Two rounds of the local search over the bf16 neighbours; the
	// second only when the first moved some lane (else it repeats it).
	MOVQ $2, R10
	XORQ R11, R11
local:
	MOVQ R11, R12
	VMOVDQU32 Y30, O_CTRD(DI)
	VMOVDQU32 Y29, O_CTRM(DI)
	VMOVDQU32 O_CTRD(DI), Y0
	VMOVDQU32 O_CTRM(DI), Y2
	UP(Y2, Y1, K1)
	KXNORB K2, K2, K2
	VALID(Y0, Y1, Y3, Y4, K2, K1)
	CALL sa8eval<>(SB)
	VMOVDQU32 O_CTRD(DI), Y0
	VMOVDQU32 O_CTRM(DI), Y2
	DOWN(Y2, Y1, K1)
	KXNORB K2, K2, K2
	VALID(Y0, Y1, Y3, Y4, K2, K1)
	CALL sa8eval<>(SB)
	VMOVDQU32 O_CTRD(DI), Y2
	VMOVDQU32 O_CTRM(DI), Y1
	UP(Y2, Y0, K1)
	KXNORB K2, K2, K2
	VALID(Y0, Y1, Y3, Y4, K2, K1)
	CALL sa8eval<>(SB)
	VMOVDQU32 O_CTRD(DI), Y2
	VMOVDQU32 O_CTRM(DI), Y1
	DOWN(Y2, Y0, K1)
	KXNORB K2, K2, K2
	VALID(Y0, Y1, Y3, Y4, K2, K1)
	CALL sa8eval<>(SB)
	CMPQ R11, R12
	JEQ localdone
	DECQ R10
	JNZ local
localdone:

	// Results: best bits and error, and max |err| of the best codes.
	VMOVUPD Z31, O_SSE(DI)
	VMOVDQU32 Y30, O_BD(DI)
	VMOVDQU32 Y29, O_BM(DI)
	VPSLLD $16, Y30, Y2
	VCVTPS2PD Y2, Z2
	VPSLLD $16, Y29, Y3
	VCVTPS2PD Y3, Z3
	VPXORQ Z4, Z4, Z4
	XORQ CX, CX
maxe:
	VMOVUPD O_BEST(DI)(CX*1), Z5
	VMULPD Z2, Z5, Z5
	VADDPD Z3, Z5, Z5
	VSUBPD O_X_OFF(DI)(CX*1), Z5, Z5
	VANDPD.BCST sa8abs64<>(SB), Z5, Z5
	VMAXPD Z5, Z4, Z4
	ADDQ $64, CX
	CMPQ CX, $2048
	JLT maxe
	VMOVUPD Z4, O_MAXE(DI)
	// Codes as bytes at dst, 32 per group: for each block of 8 elements,
	// an 8×8 transpose of the float64 codes (rows: elements, columns:
	// lanes), then each lane's 8 codes converted and narrowed to bytes.
	MOVQ dst+16(FP), DX
	XORQ CX, CX
codesout:
	VMOVUPD O_BEST+0(DI)(CX*1), Z0
	VMOVUPD O_BEST+64(DI)(CX*1), Z1
	VMOVUPD O_BEST+128(DI)(CX*1), Z2
	VMOVUPD O_BEST+192(DI)(CX*1), Z3
	VMOVUPD O_BEST+256(DI)(CX*1), Z4
	VMOVUPD O_BEST+320(DI)(CX*1), Z5
	VMOVUPD O_BEST+384(DI)(CX*1), Z6
	VMOVUPD O_BEST+448(DI)(CX*1), Z7
	VUNPCKLPD Z1, Z0, Z8
	VUNPCKHPD Z1, Z0, Z9
	VUNPCKLPD Z3, Z2, Z10
	VUNPCKHPD Z3, Z2, Z11
	VUNPCKLPD Z5, Z4, Z12
	VUNPCKHPD Z5, Z4, Z13
	VUNPCKLPD Z7, Z6, Z14
	VUNPCKHPD Z7, Z6, Z15
	VSHUFF64X2 $0x88, Z10, Z8, Z16
	VSHUFF64X2 $0xdd, Z10, Z8, Z17
	VSHUFF64X2 $0x88, Z11, Z9, Z18
	VSHUFF64X2 $0xdd, Z11, Z9, Z19
	VSHUFF64X2 $0x88, Z14, Z12, Z20
	VSHUFF64X2 $0xdd, Z14, Z12, Z21
	VSHUFF64X2 $0x88, Z15, Z13, Z22
	VSHUFF64X2 $0xdd, Z15, Z13, Z23
	VSHUFF64X2 $0x88, Z20, Z16, Z0 // lane 0
	VSHUFF64X2 $0xdd, Z20, Z16, Z4 // lane 4
	VSHUFF64X2 $0x88, Z21, Z17, Z2 // lane 2
	VSHUFF64X2 $0xdd, Z21, Z17, Z6 // lane 6
	VSHUFF64X2 $0x88, Z22, Z18, Z1 // lane 1
	VSHUFF64X2 $0xdd, Z22, Z18, Z5 // lane 5
	VSHUFF64X2 $0x88, Z23, Z19, Z3 // lane 3
	VSHUFF64X2 $0xdd, Z23, Z19, Z7 // lane 7
	VCVTTPD2DQ Z0, Y0
	VPMOVDB Y0, 0(DX)
	VCVTTPD2DQ Z1, Y1
	VPMOVDB Y1, 32(DX)
	VCVTTPD2DQ Z2, Y2
	VPMOVDB Y2, 64(DX)
	VCVTTPD2DQ Z3, Y3
	VPMOVDB Y3, 96(DX)
	VCVTTPD2DQ Z4, Y4
	VPMOVDB Y4, 128(DX)
	VCVTTPD2DQ Z5, Y5
	VPMOVDB Y5, 160(DX)
	VCVTTPD2DQ Z6, Y6
	VPMOVDB Y6, 192(DX)
	VCVTTPD2DQ Z7, Y7
	VPMOVDB Y7, 224(DX)
	ADDQ $8, DX
	ADDQ $512, CX
	CMPQ CX, $2048
	JLT codesout
	KMOVB K6, AX
	MOVB AX, ret+24(FP)
	VZEROUPPER
	RET

// sa8ls: the least-squares candidate for the code sums Z2 = Σq, Z3 = Σq²,
// Z4 = Σq·x in the lanes K1: d = (32·Σqx − Σq·Σx)/(32·Σq² − (Σq)²) (at
// least 0) rounded to bf16, m = (Σx − d·Σq)/32 with the rounded d, rounded
// to bf16. Out: Y0 = d bits, Y1 = m bits, K1 = lanes to try (those with a
// nonzero denominator whose pair decodes finitely; where it does not, the
// reference would move the pair inside the range: those lanes go to K6).
TEXT sa8ls<>(SB), NOSPLIT|NOFRAME, $0-0
	VMULPD.BCST sa8c32<>(SB), Z3, Z5
	VMULPD Z2, Z2, Z6
	VSUBPD Z6, Z5, Z5          // den
	VCMPPD $NEQ, Z27, Z5, K1, K1
	VMULPD.BCST sa8c32<>(SB), Z4, Z6
	VMULPD O_SX(DI), Z2, Z7
	VSUBPD Z7, Z6, Z6
	VDIVPD Z5, Z6, Z6          // d
	VMAXPD Z27, Z6, Z6
	BF16SAT(Z6, Y0, Y8, K2)
	VPSLLD $16, Y0, Y10
	VCVTPS2PD Y10, Z11
	VMULPD Z2, Z11, Z11
	VBROADCASTSD sa8inv32<>(SB), Z12
	VMOVUPD O_SX(DI), Z13
	VSUBPD Z11, Z13, Z13
	VMULPD Z12, Z13, Z13       // m
	BF16SAT(Z13, Y1, Y8, K2)
	VALID(Y0, Y1, Y3, Y4, K1, K2)
	KANDNB K1, K2, K3          // K3 = ~K2 & K1
	KORB K3, K6, K6
	KMOVB K2, K1
	RET

// sa8eval: tries the pairs Y0 = d bits, Y1 = m bits in the lanes K1 (each
// decoding to finite values): computes the error-minimizing codes into CAND
// and the squared error, and makes the pair the best where it is smaller.
// Lanes where the fast method is not exact go to K6.
TEXT sa8eval<>(SB), NOSPLIT|NOFRAME, $0-0
	VCMPPD $NEQ, Z27, Z31, K1, K1 // nothing beats an error of 0
	KORTESTB K1, K1
	JZ evaldone
	VPSLLD $16, Y0, Y2
	VPSLLD $16, Y1, Y3
	VCVTPS2PD Y2, Z4           // d
	VCVTPS2PD Y3, Z5           // m
	VPTESTNMD Y0, Y0, K2       // d == 0
	VMULPD Z4, Z28, Z6
	VADDPD Z5, Z6, Z6          // top
	// fastOK: |m|, |top| < 2^(l+24) with l = min(lsb d, lsb m), and
	// max|x| + |m| + nmax·d < 2^(min(l, lx)+52).
	LSB(Y2, Y7, Y10, Y11, K3)
	LSB(Y3, Y8, Y10, Y11, K3)
	VPMINSD Y8, Y7, Y7
	POW2(Y7, sa8e24<>(SB), Z9)
	VANDPD.BCST sa8abs64<>(SB), Z5, Z10
	VCMPPD $LT, Z9, Z10, K3
	VANDPD.BCST sa8abs64<>(SB), Z6, Z11
	VCMPPD $LT, Z9, Z11, K3, K3
	VPMINSD O_LX(DI), Y7, Y7
	POW2(Y7, sa8e52<>(SB), Z9)
	VADDPD O_AX(DI), Z10, Z10
	VMULPD Z4, Z28, Z11
	VADDPD Z11, Z10, Z10
	VCMPPD $LT, Z9, Z10, K3, K3
	KORB K2, K3, K3            // d == 0 is always exact
	KANDNB K1, K3, K4          // K4 = ~K3 & K1: not exact
	KORB K4, K6, K6
	KANDB K3, K1, K1
	KMOVB K1, R8
	KNOTB K2, K3               // d != 0
	VBROADCASTSD sa8one<>(SB), Z7
	VDIVPD Z4, Z7, Z7          // inv
	VMOVAPD Z27, K2, Z7        // 0 where d == 0: then every guess is 0
	VMULPD.BCST sa8half<>(SB), Z4, Z8  // hd
	VXORPD.BCST sa8sign64<>(SB), Z8, Z9 // −hd
	VBROADCASTSD sa8one<>(SB), Z10
	VPXORQ Z11, Z11, Z11       // sse
	XORQ CX, CX
evalloop:
	VMOVUPD O_X_OFF+0(DI)(CX*1), Z12
	VSUBPD Z5, Z12, Z13
	VMULPD Z7, Z13, Z13
	VMAXPD Z27, Z13, Z13
	VMINPD Z28, Z13, Z13
	VRNDSCALEPD $0x08, Z13, Z13  // r
	VMULPD Z4, Z13, Z14
	VADDPD Z5, Z14, Z14
	VSUBPD Z12, Z14, Z14       // e
	VCMPPD $GT, Z27, Z13, K4
	VCMPPD $GE, Z8, Z14, K4, K4 // r > 0 && e ≥ hd: a lower code may be as good
	VCMPPD $LT, Z28, Z13, K3, K5
	VCMPPD $LT, Z9, Z14, K5, K5 // e < −hd && r < nmax: one code up
	KORTESTB K4, K5
	JNZ evalfix0
evalnext0:
	VMOVUPD Z13, O_CAND+0(DI)(CX*1)
	VMULPD Z14, Z14, Z14
	VADDPD Z14, Z11, Z11
	VMOVUPD O_X_OFF+64(DI)(CX*1), Z12
	VSUBPD Z5, Z12, Z13
	VMULPD Z7, Z13, Z13
	VMAXPD Z27, Z13, Z13
	VMINPD Z28, Z13, Z13
	VRNDSCALEPD $0x08, Z13, Z13  // r
	VMULPD Z4, Z13, Z14
	VADDPD Z5, Z14, Z14
	VSUBPD Z12, Z14, Z14       // e
	VCMPPD $GT, Z27, Z13, K4
	VCMPPD $GE, Z8, Z14, K4, K4 // r > 0 && e ≥ hd: a lower code may be as good
	VCMPPD $LT, Z28, Z13, K3, K5
	VCMPPD $LT, Z9, Z14, K5, K5 // e < −hd && r < nmax: one code up
	KORTESTB K4, K5
	JNZ evalfix1
evalnext1:
	VMOVUPD Z13, O_CAND+64(DI)(CX*1)
	VMULPD Z14, Z14, Z14
	VADDPD Z14, Z11, Z11
	ADDQ $128, CX
	CMPQ CX, $2048
	JLT evalloop
	JMP evalend
evalfix0:
	VCMPPD $GT, Z8, Z14, K4, K4 // e > hd: one code down
	VSUBPD Z10, Z13, K4, Z13
	VSUBPD Z4, Z14, K4, Z14
	VADDPD Z10, Z13, K5, Z13
	VADDPD Z4, Z14, K5, Z14
	VCMPPD $GT, Z27, Z13, K4
	VCMPPD $EQ, Z8, Z14, K4, K4 // e == hd && r > 0: the lower code
	VSUBPD Z10, Z13, K4, Z13
	VSUBPD Z4, Z14, K4, Z14
	JMP evalnext0
evalfix1:
	VCMPPD $GT, Z8, Z14, K4, K4 // e > hd: one code down
	VSUBPD Z10, Z13, K4, Z13
	VSUBPD Z4, Z14, K4, Z14
	VADDPD Z10, Z13, K5, Z13
	VADDPD Z4, Z14, K5, Z14
	VCMPPD $GT, Z27, Z13, K4
	VCMPPD $EQ, Z8, Z14, K4, K4 // e == hd && r > 0: the lower code
	VSUBPD Z10, Z13, K4, Z13
	VSUBPD Z4, Z14, K4, Z14
	JMP evalnext1
evalend:
	KMOVB R8, K1
	VCMPPD $LT, Z31, Z11, K1, K1 // better than the best
	KORTESTB K1, K1
	JZ evaldone
	INCQ R11
	VMOVAPD Z11, K1, Z31
	VMOVDQU32 Y0, K1, Y30
	VMOVDQU32 Y1, K1, Y29
	XORQ CX, CX
evalcopy:
	VMOVUPD O_CAND(DI)(CX*1), Z12
	VMOVUPD Z12, K1, O_BEST(DI)(CX*1)
	ADDQ $64, CX
	CMPQ CX, $2048
	JLT evalcopy
evaldone:
	RET

// The weighted kernel searchAffine8W: searchAffine8 with the weights of
// search_affine_w.go (see search_affine_amd64.go). Offsets in sa8w beyond
// sa8 (keep in sync):
#define O_W 7520
#define O_SW 9568
#define O_WREF 9632
#define O_PSSE 9696
#define O_WIDX 9760

// func searchAffine8W(b *sa8w, src *float32, w *float64, dst *byte) uint8
TEXT ·searchAffine8W(SB), NOSPLIT, $0-33
	MOVQ b+0(FP), DI
	MOVQ src+8(FP), SI
	// Transpose: x[j] = element j of the 8 groups at src (32 floats each).
	VMOVDQU32 sa8gidx<>(SB), Y1
	XORQ CX, CX
wgatherx:
	KXNORB K1, K1, K1
	VGATHERDPS (SI)(Y1*4), K1, Y2
	VCVTPS2PD Y2, Z2
	VMOVUPD Z2, O_X_OFF(DI)(CX*8)
	ADDQ $4, SI
	ADDQ $8, CX
	CMPQ CX, $256
	JLT wgatherx
	// Weights: w[j] of lane l = w[widx[l] + j].
	MOVQ w+16(FP), SI
	VMOVDQU32 O_WIDX(DI), Y1
	XORQ CX, CX
wgatherw:
	KXNORB K1, K1, K1
	VGATHERDPD (SI)(Y1*8), K1, Z2
	VMOVUPD Z2, O_W(DI)(CX*8)
	VPADDD.BCST sa8i1<>(SB), Y1, Y1
	ADDQ $8, CX
	CMPQ CX, $256
	JLT wgatherw
	VPXORQ Z27, Z27, Z27
	VBROADCASTSD O_NMAX(DI), Z28
	VBROADCASTSD sa8inf<>(SB), Z31
	VPXORD Y30, Y30, Y30
	VPXORD Y29, Y29, Y29
	KXORB K6, K6, K6

	// Stats: lo, hi, Σw, Σw·x (into O_SX), Σx², Σw·x², lowest set bit.
	VMOVUPD O_X_OFF(DI), Z2
	VMOVAPD Z2, Z3
	VPXORQ Z4, Z4, Z4
	VPXORQ Z5, Z5, Z5
	VPXORQ Z14, Z14, Z14
	VPXORQ Z15, Z15, Z15
	VPBROADCASTD sa8nolsb<>(SB), Y6
	XORQ CX, CX
wstats:
	VMOVUPD O_X_OFF(DI)(CX*1), Z7
	VMOVUPD O_W(DI)(CX*1), Z13
	VCMPPD $LT, Z2, Z7, K1
	VMOVAPD Z7, K1, Z2
	VCMPPD $GT, Z3, Z7, K1
	VMOVAPD Z7, K1, Z3
	VADDPD Z13, Z14, Z14
	VMULPD Z13, Z7, Z8
	VADDPD Z8, Z4, Z4
	VMULPD Z7, Z7, Z8
	VADDPD Z8, Z5, Z5
	VMULPD Z13, Z8, Z8
	VADDPD Z8, Z15, Z15
	VCVTPD2PS Z7, Y9
	LSB(Y9, Y10, Y11, Y12, K2)
	VPMINSD Y10, Y6, Y6
	ADDQ $64, CX
	CMPQ CX, $2048
	JLT wstats
	VMOVUPD Z2, O_LO(DI)
	VMOVUPD Z3, O_HI(DI)
	VMOVUPD Z4, O_SX(DI)
	VMOVUPD Z5, O_REF(DI)
	VMOVUPD Z14, O_SW(DI)
	VMOVUPD Z15, O_WREF(DI)
	VMOVDQU32 Y6, O_LX(DI)
	VXORPD.BCST sa8sign64<>(SB), Z2, Z8
	VMAXPD Z3, Z8, Z8
	VMOVUPD Z8, O_AX(DI)

	// Grid sums, weighted: with wq = w·q, Σwq, Σwq·q, Σwq·x for the three
	// grids of searchAffine8.
	VSUBPD Z2, Z3, Z9          // rng
	VDIVPD Z9, Z28, Z10        // s
	VDIVPD.BCST O_ONEMC(DI), Z10, Z11 // inv1
	VMULPD.BCST O_CLIP(DI), Z9, Z12
	VADDPD Z12, Z2, Z12        // lo2
	VBROADCASTSD sa8half<>(SB), Z13
	VPXORQ Z14, Z14, Z14
	VPXORQ Z15, Z15, Z15
	VPXORQ Z16, Z16, Z16
	VPXORQ Z17, Z17, Z17
	VPXORQ Z18, Z18, Z18
	VPXORQ Z19, Z19, Z19
	VPXORQ Z20, Z20, Z20
	VPXORQ Z21, Z21, Z21
	VPXORQ Z22, Z22, Z22
	XORQ CX, CX
wgrid:
	VMOVUPD O_X_OFF(DI)(CX*1), Z7
	VMOVUPD O_W(DI)(CX*1), Z0
	VSUBPD Z2, Z7, Z23
	VMULPD Z10, Z23, Z24
	VADDPD Z13, Z24, Z24
	VRNDSCALEPD $0x0b, Z24, Z24
	VMAXPD Z27, Z24, Z24
	VMINPD Z28, Z24, Z24
	VMULPD Z0, Z24, Z1
	VADDPD Z1, Z14, Z14
	VMULPD Z24, Z1, Z25
	VADDPD Z25, Z15, Z15
	VMULPD Z7, Z1, Z25
	VADDPD Z25, Z16, Z16
	VMULPD Z11, Z23, Z24
	VADDPD Z13, Z24, Z24
	VRNDSCALEPD $0x0b, Z24, Z24
	VMAXPD Z27, Z24, Z24
	VMINPD Z28, Z24, Z24
	VMULPD Z0, Z24, Z1
	VADDPD Z1, Z17, Z17
	VMULPD Z24, Z1, Z25
	VADDPD Z25, Z18, Z18
	VMULPD Z7, Z1, Z25
	VADDPD Z25, Z19, Z19
	VSUBPD Z12, Z7, Z23
	VMULPD Z11, Z23, Z24
	VADDPD Z13, Z24, Z24
	VRNDSCALEPD $0x0b, Z24, Z24
	VMAXPD Z27, Z24, Z24
	VMINPD Z28, Z24, Z24
	VMULPD Z0, Z24, Z1
	VADDPD Z1, Z20, Z20
	VMULPD Z24, Z1, Z25
	VADDPD Z25, Z21, Z21
	VMULPD Z7, Z1, Z25
	VADDPD Z25, Z22, Z22
	ADDQ $64, CX
	CMPQ CX, $2048
	JLT wgrid
	VMOVUPD Z14, O_SUMS+0(DI)
	VMOVUPD Z15, O_SUMS+64(DI)
	VMOVUPD Z16, O_SUMS+128(DI)
	VMOVUPD Z17, O_SUMS+192(DI)
	VMOVUPD Z18, O_SUMS+256(DI)
	VMOVUPD Z19, O_SUMS+320(DI)
	VMOVUPD Z20, O_SUMS+384(DI)
	VMOVUPD Z21, O_SUMS+448(DI)
	VMOVUPD Z22, O_SUMS+512(DI)
	VCMPPD $GT, Z27, Z9, K5    // rng > 0
	KMOVB K5, R9

	// 1. The engine's pair.
	VCVTPD2PS Z2, Y2
	VCVTPD2PS Z3, Y3
	VSUBPS Y2, Y3, Y4
	VDIVPS.BCST O_NMAX32(DI), Y4, Y5
	VCMPPS.BCST $LT, sa8f1e8<>(SB), Y4, K1
	VPBROADCASTD sa8f1<>(SB), Y6
	VMOVDQU32 Y6, K1, Y5
	VPSRLD $16, Y5, Y0
	VPSRLD $16, Y2, Y1
	KXNORB K2, K2, K2
	VALID(Y0, Y1, Y3, Y4, K2, K1)
	CALL sa8evalw<>(SB)

	// 2. The weighted least-squares fits to the grids.
	KMOVB R9, K1
	VMOVUPD O_SUMS+0(DI), Z2
	VMOVUPD O_SUMS+64(DI), Z3
	VMOVUPD O_SUMS+128(DI), Z4
	CALL sa8lsw<>(SB)
	CALL sa8evalw<>(SB)
	KMOVB R9, K1
	VMOVUPD O_SUMS+192(DI), Z2
	VMOVUPD O_SUMS+256(DI), Z3
	VMOVUPD O_SUMS+320(DI), Z4
	CALL sa8lsw<>(SB)
	CALL sa8evalw<>(SB)
	KMOVB R9, K1
	VMOVUPD O_SUMS+384(DI), Z2
	VMOVUPD O_SUMS+448(DI), Z3
	VMOVUPD O_SUMS+512(DI), Z4
	CALL sa8lsw<>(SB)
	CALL sa8evalw<>(SB)

	// Lanes without any candidate yet take the reference's safety net.
	VCMPPD.BCST $EQ, sa8inf<>(SB), Z31, K1
	KORB K1, K6, K6

	// 3. One refit to the codes of the best, weighted.
	VPXORQ Z2, Z2, Z2
	VPXORQ Z3, Z3, Z3
	VPXORQ Z4, Z4, Z4
	XORQ CX, CX
wrefit:
	VMOVUPD O_BEST(DI)(CX*1), Z5
	VMULPD O_W(DI)(CX*1), Z5, Z8
	VADDPD Z8, Z2, Z2
	VMULPD Z5, Z8, Z6
	VADDPD Z6, Z3, Z3
	VMULPD O_X_OFF(DI)(CX*1), Z8, Z6
	VADDPD Z6, Z4, Z4
	ADDQ $64, CX
	CMPQ CX, $2048
	JLT wrefit
	KXNORB K1, K1, K1
	CALL sa8lsw<>(SB)
	CALL sa8evalw<>(SB)

	// 4. Two rounds of the local search, as in searchAffine8.
	MOVQ $2, R10
	XORQ R11, R11
wlocal:
	MOVQ R11, R12
	VMOVDQU32 Y30, O_CTRD(DI)
	VMOVDQU32 Y29, O_CTRM(DI)
	VMOVDQU32 O_CTRD(DI), Y0
	VMOVDQU32 O_CTRM(DI), Y2
	UP(Y2, Y1, K1)
	KXNORB K2, K2, K2
	VALID(Y0, Y1, Y3, Y4, K2, K1)
	CALL sa8evalw<>(SB)
	VMOVDQU32 O_CTRD(DI), Y0
	VMOVDQU32 O_CTRM(DI), Y2
	DOWN(Y2, Y1, K1)
	KXNORB K2, K2, K2
	VALID(Y0, Y1, Y3, Y4, K2, K1)
	CALL sa8evalw<>(SB)
	VMOVDQU32 O_CTRD(DI), Y2
	VMOVDQU32 O_CTRM(DI), Y1
	UP(Y2, Y0, K1)
	KXNORB K2, K2, K2
	VALID(Y0, Y1, Y3, Y4, K2, K1)
	CALL sa8evalw<>(SB)
	VMOVDQU32 O_CTRD(DI), Y2
	VMOVDQU32 O_CTRM(DI), Y1
	DOWN(Y2, Y0, K1)
	KXNORB K2, K2, K2
	VALID(Y0, Y1, Y3, Y4, K2, K1)
	CALL sa8evalw<>(SB)
	CMPQ R11, R12
	JEQ wlocaldone
	DECQ R10
	JNZ wlocal
wlocaldone:

	// Results: best bits and weighted error; the plain error and max |err|
	// of the best codes.
	VMOVUPD Z31, O_SSE(DI)
	VMOVDQU32 Y30, O_BD(DI)
	VMOVDQU32 Y29, O_BM(DI)
	VPSLLD $16, Y30, Y2
	VCVTPS2PD Y2, Z2
	VPSLLD $16, Y29, Y3
	VCVTPS2PD Y3, Z3
	VPXORQ Z4, Z4, Z4
	VPXORQ Z6, Z6, Z6
	XORQ CX, CX
wmaxe:
	VMOVUPD O_BEST(DI)(CX*1), Z5
	VMULPD Z2, Z5, Z5
	VADDPD Z3, Z5, Z5
	VSUBPD O_X_OFF(DI)(CX*1), Z5, Z5
	VMULPD Z5, Z5, Z7
	VADDPD Z7, Z6, Z6
	VANDPD.BCST sa8abs64<>(SB), Z5, Z5
	VMAXPD Z5, Z4, Z4
	ADDQ $64, CX
	CMPQ CX, $2048
	JLT wmaxe
	VMOVUPD Z4, O_MAXE(DI)
	VMOVUPD Z6, O_PSSE(DI)
	// Codes as bytes at dst, as in searchAffine8.
	MOVQ dst+24(FP), DX
	XORQ CX, CX
wcodesout:
	VMOVUPD O_BEST+0(DI)(CX*1), Z0
	VMOVUPD O_BEST+64(DI)(CX*1), Z1
	VMOVUPD O_BEST+128(DI)(CX*1), Z2
	VMOVUPD O_BEST+192(DI)(CX*1), Z3
	VMOVUPD O_BEST+256(DI)(CX*1), Z4
	VMOVUPD O_BEST+320(DI)(CX*1), Z5
	VMOVUPD O_BEST+384(DI)(CX*1), Z6
	VMOVUPD O_BEST+448(DI)(CX*1), Z7
	VUNPCKLPD Z1, Z0, Z8
	VUNPCKHPD Z1, Z0, Z9
	VUNPCKLPD Z3, Z2, Z10
	VUNPCKHPD Z3, Z2, Z11
	VUNPCKLPD Z5, Z4, Z12
	VUNPCKHPD Z5, Z4, Z13
	VUNPCKLPD Z7, Z6, Z14
	VUNPCKHPD Z7, Z6, Z15
	VSHUFF64X2 $0x88, Z10, Z8, Z16
	VSHUFF64X2 $0xdd, Z10, Z8, Z17
	VSHUFF64X2 $0x88, Z11, Z9, Z18
	VSHUFF64X2 $0xdd, Z11, Z9, Z19
	VSHUFF64X2 $0x88, Z14, Z12, Z20
	VSHUFF64X2 $0xdd, Z14, Z12, Z21
	VSHUFF64X2 $0x88, Z15, Z13, Z22
	VSHUFF64X2 $0xdd, Z15, Z13, Z23
	VSHUFF64X2 $0x88, Z20, Z16, Z0
	VSHUFF64X2 $0xdd, Z20, Z16, Z4
	VSHUFF64X2 $0x88, Z21, Z17, Z2
	VSHUFF64X2 $0xdd, Z21, Z17, Z6
	VSHUFF64X2 $0x88, Z22, Z18, Z1
	VSHUFF64X2 $0xdd, Z22, Z18, Z5
	VSHUFF64X2 $0x88, Z23, Z19, Z3
	VSHUFF64X2 $0xdd, Z23, Z19, Z7
	VCVTTPD2DQ Z0, Y0
	VPMOVDB Y0, 0(DX)
	VCVTTPD2DQ Z1, Y1
	VPMOVDB Y1, 32(DX)
	VCVTTPD2DQ Z2, Y2
	VPMOVDB Y2, 64(DX)
	VCVTTPD2DQ Z3, Y3
	VPMOVDB Y3, 96(DX)
	VCVTTPD2DQ Z4, Y4
	VPMOVDB Y4, 128(DX)
	VCVTTPD2DQ Z5, Y5
	VPMOVDB Y5, 160(DX)
	VCVTTPD2DQ Z6, Y6
	VPMOVDB Y6, 192(DX)
	VCVTTPD2DQ Z7, Y7
	VPMOVDB Y7, 224(DX)
	ADDQ $8, DX
	ADDQ $512, CX
	CMPQ CX, $2048
	JLT wcodesout
	KMOVB K6, AX
	MOVB AX, ret+32(FP)
	VZEROUPPER
	RET

// sa8lsw: the weighted least-squares candidate for Z2 = Σwq, Z3 = Σwq·q,
// Z4 = Σwq·x in the lanes K1: den = S·Σwqq − (Σwq)² (tried only where
// > 0), d = (S·Σwqx − Σwq·Σwx)/den (at least 0) rounded to bf16,
// m = (Σwx − d·Σwq)/S with the rounded d, rounded to bf16 (S = Σw).
// Out as sa8ls.
TEXT sa8lsw<>(SB), NOSPLIT|NOFRAME, $0-0
	VMULPD O_SW(DI), Z3, Z5
	VMULPD Z2, Z2, Z6
	VSUBPD Z6, Z5, Z5          // den
	VCMPPD $GT, Z27, Z5, K1, K1
	VMULPD O_SW(DI), Z4, Z6
	VMULPD O_SX(DI), Z2, Z7
	VSUBPD Z7, Z6, Z6
	VDIVPD Z5, Z6, Z6          // d
	VMAXPD Z27, Z6, Z6
	BF16SAT(Z6, Y0, Y8, K2)
	VPSLLD $16, Y0, Y10
	VCVTPS2PD Y10, Z11
	VMULPD Z2, Z11, Z11
	VMOVUPD O_SX(DI), Z13
	VSUBPD Z11, Z13, Z13
	VDIVPD O_SW(DI), Z13, Z13  // m
	BF16SAT(Z13, Y1, Y8, K2)
	VALID(Y0, Y1, Y3, Y4, K1, K2)
	KANDNB K1, K2, K3
	KORB K3, K6, K6
	KMOVB K2, K1
	RET

// sa8evalw: sa8eval with the weighted error Σ w·(e·e).
TEXT sa8evalw<>(SB), NOSPLIT|NOFRAME, $0-0
	VCMPPD $NEQ, Z27, Z31, K1, K1 // nothing beats an error of 0
	KORTESTB K1, K1
	JZ wevaldone
	VPSLLD $16, Y0, Y2
	VPSLLD $16, Y1, Y3
	VCVTPS2PD Y2, Z4           // d
	VCVTPS2PD Y3, Z5           // m
	VPTESTNMD Y0, Y0, K2       // d == 0
	VMULPD Z4, Z28, Z6
	VADDPD Z5, Z6, Z6          // top
	LSB(Y2, Y7, Y10, Y11, K3)
	LSB(Y3, Y8, Y10, Y11, K3)
	VPMINSD Y8, Y7, Y7
	POW2(Y7, sa8e24<>(SB), Z9)
	VANDPD.BCST sa8abs64<>(SB), Z5, Z10
	VCMPPD $LT, Z9, Z10, K3
	VANDPD.BCST sa8abs64<>(SB), Z6, Z11
	VCMPPD $LT, Z9, Z11, K3, K3
	VPMINSD O_LX(DI), Y7, Y7
	POW2(Y7, sa8e52<>(SB), Z9)
	VADDPD O_AX(DI), Z10, Z10
	VMULPD Z4, Z28, Z11
	VADDPD Z11, Z10, Z10
	VCMPPD $LT, Z9, Z10, K3, K3
	KORB K2, K3, K3
	KANDNB K1, K3, K4
	KORB K4, K6, K6
	KANDB K3, K1, K1
	KMOVB K1, R8
	KNOTB K2, K3
	VBROADCASTSD sa8one<>(SB), Z7
	VDIVPD Z4, Z7, Z7          // inv
	VMOVAPD Z27, K2, Z7
	VMULPD.BCST sa8half<>(SB), Z4, Z8  // hd
	VXORPD.BCST sa8sign64<>(SB), Z8, Z9 // −hd
	VBROADCASTSD sa8one<>(SB), Z10
	VPXORQ Z11, Z11, Z11       // weighted sse
	XORQ CX, CX
wevalloop:
	VMOVUPD O_X_OFF+0(DI)(CX*1), Z12
	VSUBPD Z5, Z12, Z13
	VMULPD Z7, Z13, Z13
	VMAXPD Z27, Z13, Z13
	VMINPD Z28, Z13, Z13
	VRNDSCALEPD $0x08, Z13, Z13
	VMULPD Z4, Z13, Z14
	VADDPD Z5, Z14, Z14
	VSUBPD Z12, Z14, Z14
	VCMPPD $GT, Z27, Z13, K4
	VCMPPD $GE, Z8, Z14, K4, K4
	VCMPPD $LT, Z28, Z13, K3, K5
	VCMPPD $LT, Z9, Z14, K5, K5
	KORTESTB K4, K5
	JNZ wevalfix0
wevalnext0:
	VMOVUPD Z13, O_CAND+0(DI)(CX*1)
	VMULPD Z14, Z14, Z14
	VMULPD O_W+0(DI)(CX*1), Z14, Z14
	VADDPD Z14, Z11, Z11
	VMOVUPD O_X_OFF+64(DI)(CX*1), Z12
	VSUBPD Z5, Z12, Z13
	VMULPD Z7, Z13, Z13
	VMAXPD Z27, Z13, Z13
	VMINPD Z28, Z13, Z13
	VRNDSCALEPD $0x08, Z13, Z13
	VMULPD Z4, Z13, Z14
	VADDPD Z5, Z14, Z14
	VSUBPD Z12, Z14, Z14
	VCMPPD $GT, Z27, Z13, K4
	VCMPPD $GE, Z8, Z14, K4, K4
	VCMPPD $LT, Z28, Z13, K3, K5
	VCMPPD $LT, Z9, Z14, K5, K5
	KORTESTB K4, K5
	JNZ wevalfix1
wevalnext1:
	VMOVUPD Z13, O_CAND+64(DI)(CX*1)
	VMULPD Z14, Z14, Z14
	VMULPD O_W+64(DI)(CX*1), Z14, Z14
	VADDPD Z14, Z11, Z11
	ADDQ $128, CX
	CMPQ CX, $2048
	JLT wevalloop
	JMP wevalend
wevalfix0:
	VCMPPD $GT, Z8, Z14, K4, K4
	VSUBPD Z10, Z13, K4, Z13
	VSUBPD Z4, Z14, K4, Z14
	VADDPD Z10, Z13, K5, Z13
	VADDPD Z4, Z14, K5, Z14
	VCMPPD $GT, Z27, Z13, K4
	VCMPPD $EQ, Z8, Z14, K4, K4
	VSUBPD Z10, Z13, K4, Z13
	VSUBPD Z4, Z14, K4, Z14
	JMP wevalnext0
wevalfix1:
	VCMPPD $GT, Z8, Z14, K4, K4
	VSUBPD Z10, Z13, K4, Z13
	VSUBPD Z4, Z14, K4, Z14
	VADDPD Z10, Z13, K5, Z13
	VADDPD Z4, Z14, K5, Z14
	VCMPPD $GT, Z27, Z13, K4
	VCMPPD $EQ, Z8, Z14, K4, K4
	VSUBPD Z10, Z13, K4, Z13
	VSUBPD Z4, Z14, K4, Z14
	JMP wevalnext1
wevalend:
	KMOVB R8, K1
	VCMPPD $LT, Z31, Z11, K1, K1 // better than the best
	KORTESTB K1, K1
	JZ wevaldone
	INCQ R11
	VMOVAPD Z11, K1, Z31
	VMOVDQU32 Y0, K1, Y30
	VMOVDQU32 Y1, K1, Y29
	XORQ CX, CX
wevalcopy:
	VMOVUPD O_CAND(DI)(CX*1), Z12
	VMOVUPD Z12, K1, O_BEST(DI)(CX*1)
	ADDQ $64, CX
	CMPQ CX, $2048
	JLT wevalcopy
wevaldone:
	RET
