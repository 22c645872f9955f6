// Dense f32 matrix products of the Metal backend on SIMD-group matrices
// (docs/metal.md, "The backend"): MatMulNT (c = a·wᵀ, a linear layer), the
// soft embedding's P·table and the MoE router's logits. A translation unit
// of its own: the Metal prelude, the common include, then this file.
//
// The weight stays in its stored format: each element is decoded with the
// common include's dgq_decode (bit-exact with codecs.DecodeRows) as it is
// staged, so no decoded copy of the weight is ever made.

#define GM_BM 32       // rows of a (and of c) per group
#define GM_BN 32       // columns of c per group
#define GM_BK 32       // the reduction's step
#define GM_THREADS 128 // four SIMD groups, each a 16×16 block of the tile

// gemm_f32: c[i][j] = Σ_l a[i][l]·W(j, l) for i < m, j < n, over l < k (k ≥ 1),
// a [m][k] and c [m][n] f32; W(j, l) = w[j][l] of a weight [n][k] when nt ≠ 0
// (c = a·wᵀ), w[l][j] of a weight [k][n] when nt = 0 (c = a·w). The weight is
// resident in format fmt (bits, mat_rows and the planes w0, w1, w2 as
// dgq_decode takes them). Groups of GM_THREADS threads, group (x, y) the
// tile of c at rows 32y, columns 32x.
//
// Each step of GM_BK stages the tile's rows of a and the decoded weight in
// group memory (zero outside the shapes), and each SIMD group multiplies its
// 2×2 blocks of 8×8 matrices (simdgroup_multiply_accumulate) into a fresh
// f32 partial; the partials go to group memory, and each thread adds its 8
// elements of the tile to its running sums, compensated (Kahan). So an
// output's error is that of one step's f32 sum of 32 products plus a few
// roundings of the total: about 34·2^-24 of Σ|a·W| whatever k, and whatever
// order the hardware sums each step's products in.
KERNEL(gemm_f32, CBUF(float, a, 0), CBUF(u8, w0, 1), CBUF(u8, w1, 2), CBUF(u8, w2, 3), BUF(float, c, 4),
       SCALAR(u32, m, 5), SCALAR(u32, n, 6), SCALAR(u32, k, 7), SCALAR(u32, fmt, 8), SCALAR(u32, bits, 9),
       SCALAR(u32, mat_rows, 10), SCALAR(u32, nt, 11)) {
	SHARED(float, as, GM_BM * GM_BK);
	SHARED(float, ws, GM_BK * GM_BN);
	SHARED(float, part, GM_BM * GM_BN);
	u32 tid = LOCAL_ID_X;
	u32 m0 = GROUP_ID_Y * GM_BM;
	u32 n0 = GROUP_ID_X * GM_BN;
	u32 sm = (SIMD_ID >> 1) * 16u; // the SIMD group's block of the tile
	u32 sn = (SIMD_ID & 1u) * 16u;
	dgq_kahan tot[8];
	for (u32 q = 0; q < 8u; q++) tot[q] = dgq_kahan_zero();
	for (u32 k0 = 0; k0 < k; k0 += GM_BK) {
		for (u32 q = 0; q < 8u; q++) {
			u32 e = tid + GM_THREADS * q;
			u32 r = e / GM_BK; // a: consecutive threads read consecutive l
			u32 l = e % GM_BK;
			as[r * GM_BK + l] = (m0 + r < m && k0 + l < k) ? a[(u64)(m0 + r) * k + k0 + l] : 0.0f;
			u32 j = nt != 0u ? e / GM_BK : e % GM_BN; // the weight: along its stored rows
			u32 lw = nt != 0u ? e % GM_BK : e / GM_BN;
			float v = 0.0f;
			if (n0 + j < n && k0 + lw < k) {
				v = nt != 0u ? dgq_decode(w0, w1, w2, fmt, bits, n0 + j, k0 + lw, k, mat_rows)
				             : dgq_decode(w0, w1, w2, fmt, bits, k0 + lw, n0 + j, n, mat_rows);
			}
			ws[lw * GM_BN + j] = v;
		}
		BARRIER();
		simdgroup_float8x8 acc[2][2];
		for (u32 i = 0; i < 2u; i++) {
			for (u32 jj = 0; jj < 2u; jj++) acc[i][jj] = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
		}
		for (u32 l = 0; l < GM_BK; l += 8u) {
			simdgroup_float8x8 fa[2];
			simdgroup_float8x8 fb[2];
			for (u32 i = 0; i < 2u; i++) simdgroup_load(fa[i], as + (sm + 8u * i) * GM_BK + l, GM_BK);
			for (u32 jj = 0; jj < 2u; jj++) simdgroup_load(fb[jj], ws + l * GM_BN + sn + 8u * jj, GM_BN);
			for (u32 i = 0; i < 2u; i++) {
				for (u32 jj = 0; jj < 2u; jj++) simdgroup_multiply_accumulate(acc[i][jj], fa[i], fb[jj], acc[i][jj]);
			}
		}
		for (u32 i = 0; i < 2u; i++) {
			for (u32 jj = 0; jj < 2u; jj++) simdgroup_store(acc[i][jj], part + (sm + 8u * i) * GM_BN + sn + 8u * jj, GM_BN);
		}
		BARRIER();
		for (u32 q = 0; q < 8u; q++) tot[q] = dgq_kahan_add(tot[q], part[tid + GM_THREADS * q]);
	}
	for (u32 q = 0; q < 8u; q++) {
		u32 e = tid + GM_THREADS * q;
		u32 r = e / GM_BN;
		u32 j = e % GM_BN;
		if (m0 + r < m && n0 + j < n) c[(u64)(m0 + r) * n + n0 + j] = dgq_kahan_total(tot[q]);
	}
}
