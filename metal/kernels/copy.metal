// Copies and fills of the Metal backend (Backend.Copy, a MatMulNT over an
// empty reduction): 32-bit words moved as integers, so that no value —
// NaN payloads and subnormals included — passes through f32 arithmetic. 1-D,
// grid-stride: any grid is correct.

// copy_u32: dst[i] = src[i] for i < n (the ranges do not overlap).
KERNEL(copy_u32, BUF(u32, dst, 0), CBUF(u32, src, 1), SCALAR(u64, n, 2)) {
	for (u64 i = GLOBAL_ID_X; i < n; i += GLOBAL_SIZE_X) dst[i] = src[i];
}

// fill_u32: dst[i] = v for i < n.
KERNEL(fill_u32, BUF(u32, dst, 0), SCALAR(u32, v, 1), SCALAR(u64, n, 2)) {
	for (u64 i = GLOBAL_ID_X; i < n; i += GLOBAL_SIZE_X) dst[i] = v;
}
