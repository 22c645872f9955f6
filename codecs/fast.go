package codecs

// nvfp4Fast, when non-nil, is a SIMD implementation of the searching nvfp4
// encoder that is bit-identical to the reference (nvfp4Block and the
// statistics of encodeNVFP4Row). It encodes the first blocks of one row of
// finite values x of a matrix with scale g into codes and scales, adds their
// statistics to st in block order and returns how many blocks it did; the
// caller does the rest.
var nvfp4Fast func(g float32, codes, scales []byte, x []float32, st *Stats) int

// scanFast, when non-nil, returns the largest |x| bit pattern (see
// absBits) of a prefix of whole elements of src, and the prefix's length in
// bytes.
var scanFast func(dt DType, src []byte) (bits uint32, n int)
