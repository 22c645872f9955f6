// dgq kernel dialect: the common include. Every translation unit is a
// backend's prelude (which defines the dialect's names: docs/cuda.md, "The
// shared kernel dialect"), then this file, then one kernel file; so these
// helpers exist once and no kernel file copies them. Helpers only, no
// kernels: functions are dgq_*, macros DGQ_*.

// ---------------------------------------------------------------------------
// Group reductions. Every thread of the group calls them (they hold
// barriers); partial holds at least nsimd = LOCAL_SIZE_X / SIMD_WIDTH floats
// and is free again when they return.

// DGQ_GROUP_IDS declares, in a kernel body (the thread-geometry names are
// kernel parameters in Metal), the thread's place for these reductions:
// tid of nt threads in the group, its lane and SIMD group, and the nsimd
// SIMD groups.
#define DGQ_GROUP_IDS                                                                                              \
	u32 tid = LOCAL_ID_X;                                                                                      \
	u32 nt = LOCAL_SIZE_X;                                                                                     \
	u32 lane = LANE_ID;                                                                                        \
	u32 simd = SIMD_ID;                                                                                        \
	u32 nsimd = nt / SIMD_WIDTH

// dgq_group_sum returns the f32 sum of s over the group to every thread: a
// SIMD sum per SIMD group, then a SIMD sum of those partials.
INLINE float dgq_group_sum(float s, THREADGROUP_MEM float* partial, u32 lane, u32 simd, u32 nsimd) {
	s = SIMD_SUM(s);
	if (lane == 0) partial[simd] = s;
	BARRIER();
	s = lane < nsimd ? partial[lane] : 0.0f;
	s = SIMD_SUM(s);
	BARRIER();
	return s;
}

// dgq_group_max returns the max of s over the group to every thread (−∞ for
// an empty group).
INLINE float dgq_group_max(float s, THREADGROUP_MEM float* partial, u32 lane, u32 simd, u32 nsimd) {
	s = SIMD_MAX(s);
	if (lane == 0) partial[simd] = s;
	BARRIER();
	s = lane < nsimd ? partial[lane] : AS_FLOAT(0xff800000u);
	s = SIMD_MAX(s);
	BARRIER();
	return s;
}

// dgq_rms_inv returns 1/√(f32(Σx²)/n + eps) over the n values of row x, as
// the CPU runtime's RMSNorm (MODEL_SPEC §3.1.1) up to the f32 sum: each
// square rounded, summed per thread (tid, tid + nthreads, …), then over the
// group.
INLINE float dgq_rms_inv(const DEVICE_MEM float* x, u32 n, float eps, THREADGROUP_MEM float* partial, u32 tid,
                         u32 nthreads, u32 lane, u32 simd) {
	float s = 0.0f;
	for (u32 i = tid; i < n; i += nthreads) {
		float v = x[i];
		s += MUL_RN(v, v);
	}
	s = dgq_group_sum(s, partial, lane, simd, nthreads / SIMD_WIDTH);
	float ms = s / (float)n + eps;
	return 1.0f / SQRT(ms);
}

// ---------------------------------------------------------------------------
// Compensated f32 sums, every step rounded on its own.

// dgq_two_sum_err returns the rounding error of s = ADD_RN(a, b): a + b =
// s + err exactly (Knuth's two-sum).
INLINE float dgq_two_sum_err(float a, float b, float s) {
	float bb = ADD_RN(s, -a);
	return ADD_RN(ADD_RN(a, -ADD_RN(s, -bb)), ADD_RN(b, -bb));
}

// dgq_kahan is a Kahan sum: the running sum s and its compensation c.
typedef struct {
	float s;
	float c;
} dgq_kahan;

// dgq_kahan_zero is the empty sum.
INLINE dgq_kahan dgq_kahan_zero() {
	dgq_kahan k;
	k.s = 0.0f;
	k.c = 0.0f;
	return k;
}

// dgq_kahan_add returns k with x added.
INLINE dgq_kahan dgq_kahan_add(dgq_kahan k, float x) {
	float y = ADD_RN(x, -k.c);
	float t = ADD_RN(k.s, y);
	k.c = ADD_RN(ADD_RN(t, -k.s), -y);
	k.s = t;
	return k;
}

// dgq_kahan_total is the compensated value of k: s − c.
INLINE float dgq_kahan_total(dgq_kahan k) { return ADD_RN(k.s, -k.c); }

// ---------------------------------------------------------------------------
// Number formats, decoded exactly with integer operations (docs/codecs.md;
// bf16 is the prelude's BF16_TO_F32).

// dgq_f16_bits widens IEEE binary16 bits to f32, exact in every bit
// (subnormals, infinities and NaN payloads kept, as codecs.F16ToFloat32).
INLINE float dgq_f16_bits(u32 h) {
	u32 sign = (h & 0x8000u) << 16;
	u32 e = (h >> 10) & 31u;
	u32 m = h & 0x3ffu;
	if (e == 31u) return AS_FLOAT(sign | 0x7f800000u | (m << 13));
	if (e != 0u) return AS_FLOAT(sign | ((e + 112u) << 23) | (m << 13));
	// Subnormal or zero: m·2^-24, exact (and normal) in f32.
	return AS_FLOAT(sign | AS_UINT(MUL_RN((float)m, AS_FLOAT(0x33800000u))));
}

// dgq_e4m3 decodes an E4M3 ("fn") byte: 0x7F/0xFF NaN, exponent 0
// subnormal m·2^-9, else (1 + m/8)·2^(e−7); the sign applies to zero too.
INLINE float dgq_e4m3(u32 b) {
	u32 sign = (b & 0x80u) << 24;
	u32 e = (b >> 3) & 15u;
	u32 m = b & 7u;
	if (e == 15u && m == 7u) return AS_FLOAT(sign | 0x7fc00000u);
	if (e == 0u) return AS_FLOAT(sign | AS_UINT(MUL_RN((float)m, AS_FLOAT(118u << 23))));
	return AS_FLOAT(sign | ((e + 120u) << 23) | (m << 20));
}

// dgq_e2m1 decodes an E2M1 nibble: sign<<3 | index, index → {0, 0.5, 1,
// 1.5, 2, 3, 4, 6}; code 8 is −0.
INLINE float dgq_e2m1(u32 c) {
	u32 sign = (c & 8u) << 28;
	u32 m = c & 7u;
	u32 mag = 0u;
	if (m == 1u) mag = 126u << 23;
	else if (m >= 2u) mag = (((m >> 1) + 126u) << 23) | ((m & 1u) << 22);
	return AS_FLOAT(sign | mag);
}

// ---------------------------------------------------------------------------
// Stored formats: one decoder each, bit-exact with codecs.DecodeRows (every
// product and sum rounded on its own). The planes are the resident planar
// layout (relayout.kern; docs/cuda.md, "Weights on the device").

// dgq_q8 is a q8 element: the int8 code (a byte) times the f32 row scale.
INLINE float dgq_q8(u32 code, float scale) {
	i32 c = (i32)code;
	if (c > 127) c -= 256;
	return MUL_RN((float)c, scale);
}

// dgq_affine is a q4/q5/q6 element: f32(code·delta) + min, delta and min the
// group's bf16 parameters widened.
INLINE float dgq_affine(u32 code, float delta, float min) { return ADD_RN(MUL_RN((float)code, delta), min); }

// dgq_affine_code returns code j of a row of b-bit codes (b ≤ 8) stored as
// one LSB-first bit string (element j at bits [j·b, j·b+b)). A code spans at
// most two bytes; the second is read only when the code reaches into it, so
// no read passes the row.
INLINE u32 dgq_affine_code(const DEVICE_MEM u8* row, u32 j, u32 bits) {
	u64 pos = (u64)j * bits;
	u64 at = pos >> 3;
	u32 sh = (u32)(pos & 7u);
	u32 v = (u32)row[at] >> sh;
	if (sh + bits > 8u) v |= (u32)row[at + 1] << (8u - sh);
	return v & ((1u << bits) - 1u);
}

// dgq_nvfp4 is an nvfp4 element: f32(f32(e2m1·s8)·s2), s8 the block's E4M3
// scale decoded and s2 the matrix's f32 scale.
INLINE float dgq_nvfp4(u32 nibble, float s8, float s2) { return MUL_RN(MUL_RN(dgq_e2m1(nibble), s8), s2); }

// Element (row, j) of a [rows][k] tensor from its planes.

// dgq_dec_q8: codes [rows][k] int8, scales [rows] f32.
INLINE float dgq_dec_q8(const DEVICE_MEM u8* codes, const DEVICE_MEM float* scales, u64 row, u32 j, u32 k) {
	return dgq_q8(codes[row * k + j], scales[row]);
}

// dgq_dec_affine: codes [rows][k·b/8] (one bit string a row), deltas and
// mins [rows][k/32] bf16.
INLINE float dgq_dec_affine(const DEVICE_MEM u8* codes, const DEVICE_MEM u16* deltas, const DEVICE_MEM u16* mins,
                            u64 row, u32 j, u32 k, u32 bits) {
	u32 q = dgq_affine_code(codes + row * (((u64)k * bits) >> 3), j, bits);
	u64 g = row * (k >> 5) + (j >> 5);
	return dgq_affine(q, BF16_TO_F32(deltas[g]), BF16_TO_F32(mins[g]));
}

// dgq_dec_nvfp4: codes [rows][k/2] (element 2i the low nibble of byte i),
// E4M3 scales [rows][k/16], one f32 scale per matrix of mat_rows rows.
INLINE float dgq_dec_nvfp4(const DEVICE_MEM u8* codes, const DEVICE_MEM u8* scales, const DEVICE_MEM float* gscale,
                           u64 row, u32 j, u32 k, u32 mat_rows) {
	u64 i = row * k + j;
	u32 c = codes[i >> 1];
	c = (i & 1u) != 0u ? c >> 4 : c & 15u;
	return dgq_nvfp4(c, dgq_e4m3(scales[i >> 4]), gscale[row / mat_rows]);
}

// Format codes of dgq_decode (the Go side's fmt* constants, cuda/planar.go).
#define DGQ_FMT_F32 0u
#define DGQ_FMT_BF16 1u
#define DGQ_FMT_F16 2u
#define DGQ_FMT_Q8 3u
#define DGQ_FMT_AFFINE 4u
#define DGQ_FMT_NVFP4 5u

// dgq_decode returns element (row, j) of a [rows][k] tensor resident in
// format fmt with planes w0, w1, w2: raw f32/bf16/f16 (w0), q8 (codes, f32
// row scales), q4/q5/q6 with bits (codes, bf16 deltas, bf16 mins), nvfp4
// (codes, E4M3 block scales, one f32 scale per matrix of mat_rows rows).
INLINE float dgq_decode(const DEVICE_MEM u8* w0, const DEVICE_MEM u8* w1, const DEVICE_MEM u8* w2, u32 fmt, u32 bits,
                        u64 row, u32 j, u32 k, u32 mat_rows) {
	u64 i = row * k + j;
	if (fmt == DGQ_FMT_F32) return ((const DEVICE_MEM float*)w0)[i];
	if (fmt == DGQ_FMT_BF16) return BF16_TO_F32(((const DEVICE_MEM u16*)w0)[i]);
	if (fmt == DGQ_FMT_F16) return dgq_f16_bits(((const DEVICE_MEM u16*)w0)[i]);
	if (fmt == DGQ_FMT_Q8) return dgq_dec_q8(w0, (const DEVICE_MEM float*)w1, row, j, k);
	if (fmt == DGQ_FMT_AFFINE)
		return dgq_dec_affine(w0, (const DEVICE_MEM u16*)w1, (const DEVICE_MEM u16*)w2, row, j, k, bits);
	return dgq_dec_nvfp4(w0, w1, (const DEVICE_MEM float*)w2, row, j, k, mat_rows);
}

// ---------------------------------------------------------------------------
// Activations.

// dgq_moe_gelu_mul is the MoE's gelu(g)·u in plain f32: PyTorch's tanh GELU
// as 0.5·g·(1 + tanh(y)) = g / (1 + exp(−2y)), y = √(2/π)·(g + 0.044715·g³)
// (accurate where 1 + tanh(y) would cancel), then the f32 product. The
// elementwise GeluMul op carries y in two floats instead (elementwise.kern).
INLINE float dgq_moe_gelu_mul(float g, float u) {
	float g3 = MUL_RN(MUL_RN(MUL_RN(0.044715f, g), g), g);
	float y = MUL_RN(0.7978845608028654f, ADD_RN(g, g3));
	float gel = g / ADD_RN(1.0f, EXP(MUL_RN(-2.0f, y)));
	return MUL_RN(gel, u);
}
