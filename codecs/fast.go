package codecs

// affineFast, when non-nil, is a SIMD implementation of the affine encoder
// that is bit-identical to the reference (affineGroup). It encodes the first
// groups of a block of rows in batches, merges their statistics into st in
// group order, and returns how many groups it did; the caller does the rest
// with the reference code.
var affineFast func(e *Encoder, codes, scales, biases, src []byte, r0, groups int64, st *Stats) (int64, error)

// nvfp4Fast, when non-nil, is a SIMD implementation of the nvfp4 encoder
// that is bit-identical to the reference (nvfp4EncodeBlock). It encodes the
// first blocks of a run of finite rows, adds their statistics to st in block
// order and returns how many blocks it did; the caller does the rest.
var nvfp4Fast func(e *Encoder, codes, scales, src []byte, blocks int64, st *Stats) int64

// q8Fast, when non-nil, is a SIMD implementation of the q8 encoder of one
// finite row that is bit-identical to the reference (q8Scale and
// q8EncodeRow): it converts src into x, writes the codes, adds the row's
// statistics to st and returns the scale.
var q8Fast func(dt DType, src []byte, x []float32, codes []byte, st *Stats) float32

// scanFast, when non-nil, returns the largest |x| bit pattern (see
// absBits) of a prefix of whole elements of src, and the prefix's length in
// bytes.
var scanFast func(dt DType, src []byte) (bits uint32, n int)
