package codecs

// affineFast, when non-nil, is a SIMD implementation of the affine encoder
// that is bit-identical to the reference (affineGroup). It encodes the first
// groups of a block of rows in batches, merges their statistics into st in
// group order, and returns how many groups it did; the caller does the rest
// with the reference code.
var affineFast func(e *Encoder, codes, scales, biases, src []byte, r0, groups int64, st *Stats) (int64, error)
