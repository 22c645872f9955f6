package codecs

import (
	"encoding/binary"
	"sync"
)

// Importance-weighted searching encoders of q8 and nvfp4 rows (called by
// Encoder.encodeRowsWeighted). Both search exactly the candidates of the
// unweighted searching encoder, in the same order, and keep the first with
// the smallest weighted error; codes are chosen per element as without
// weights. See searchQ8RowW (search_q8.go) and nvfp4BlockW (nvfp4.go) for
// the error each one compares. Uniform weights (q8: equal over the row,
// nvfp4: over each block; all 1 in particular) give the unweighted encoder's
// bytes and plain statistics, bit for bit.
//
// Statistics, with err = float64(dec) − float64(x) and w the element's
// weight (as float32 for nvfp4; the same value for SetImportance's weights):
//
//   - the plain terms exactly as the unweighted searching encoder of the
//     format accounts them: q8 sums the row's float64(err²) and
//     float64(x²) in element order and adds the row sums (Stats.mergeGroup);
//     nvfp4 adds every element in element order (Stats.add);
//   - SumWSqErr and SumWSqRef per group (q8: the row, nvfp4: the block of
//     16): the terms float64(w·float64(err²)) and float64(w·float64(x²))
//     summed in element order, then the group sums added in group order.
//     (Per group rather than per element: the nvfp4 kernel sums a block in
//     one vector lane, and an exact element-by-element running sum would cost
//     it far more than the weighted search itself.)

// encodeQ8RowW encodes one row of finite values x with importance weights w
// (len(x) finite values > 0) into row, laid out as encodeQ8Row writes it:
// the bf16 scale, then the int8 codes.
func encodeQ8RowW(row []byte, x []float32, w []float64, sc *scratch, st *Stats) {
	codes := sc.int8s(len(x))
	s, se, sr, ma, swe, swr := searchQ8RowW(x, w, codes)
	st.mergeGroup(se, sr, ma, int64(len(x)))
	st.SumWSqErr += swe
	st.SumWSqRef += swr
	binary.LittleEndian.PutUint16(row, s)
	for i, c := range codes {
		row[q8ScaleBytes+i] = byte(c)
	}
}

// encodeNVFP4RowW encodes one row of finite values x of a matrix with
// stored scale g (chosen from the matrix amax as without weights) with
// importance weights w into row, laid out as encodeNVFP4Row writes it. Every
// block of 16 gets its scale and codes from nvfp4BlockW with the block's
// weights as float32 (SetImportance's weights are float32 values). The
// prepared forms of w are cached by its address (nvfp4Weights): w must not
// be modified between calls.
func encodeNVFP4RowW(g float32, row []byte, x []float32, w []float64, sc *scratch, st *Stats) {
	k := len(x)
	nb := k / 16
	if nb == 0 {
		return
	}
	codes, scales := row[:k/2], row[k/2:k/2+nb]
	pw := nvfp4WPool.Get().(*nvfp4Weights)
	defer nvfp4WPool.Put(pw)
	pw.of(w[:nb*16])
	var b0 int
	if nvfp4FastW != nil {
		b0 = nvfp4FastW(g, codes, scales, x, pw, st)
	}
	for b := b0; b < nb; b++ {
		var c [16]uint8
		blk := (*[16]float32)(x[b*16:])
		v := (*[16]float32)(pw.v[b*16:])
		if pw.uniform[b] {
			v = nil
		}
		s := nvfp4BlockSearch(blk, v, g, &c) // nvfp4BlockW
		scales[b] = s
		for j := 0; j < 16; j += 2 {
			codes[b*8+j/2] = c[j] | c[j+1]<<4
		}
		s8 := E4M3ToFloat32(s)
		var we, wr float64
		for j, u := range blk {
			dec := float32(e2m1Values[c[j]]*s8) * g
			st.add(dec, u)
			e, r, wj := float64(dec)-float64(u), float64(u), float64(pw.w32[b*16+j])
			we += float64(wj * float64(e*e))
			wr += float64(wj * float64(r*r))
		}
		st.SumWSqErr += we
		st.SumWSqRef += wr
	}
}

// nvfp4Weights holds a row's weights in the forms the weighted nvfp4
// search uses: as float32, and per block the normalized weights of
// nvfp4BlockW (nvfp4NormWeights) and whether the block's weights are all
// equal; the SIMD kernel may add its own layout (kern). They are made once
// for a weight vector and reused while the same vector comes back, as it
// does for the rows of a matrix: the cache key is the vector's first
// element's address and its length (an encoder's weight vectors are never
// modified, and the key keeps the vector alive, so no other vector can take
// its address while it is cached).
type nvfp4Weights struct {
	key     *float64
	n       int
	w32, v  []float32
	uniform []bool
	kern    []float32 // the kernel's layout, nil until made (nvfp4_amd64.go)
}

var nvfp4WPool = sync.Pool{New: func() any { return new(nvfp4Weights) }}

// of makes p the prepared form of w (len(w) a multiple of 16, > 0) unless
// it already is.
func (p *nvfp4Weights) of(w []float64) {
	if p.key == &w[0] && p.n == len(w) {
		return
	}
	n := len(w)
	if cap(p.w32) < n {
		p.w32, p.v, p.uniform = make([]float32, n), make([]float32, n), make([]bool, n/16)
	}
	p.w32, p.v, p.uniform = p.w32[:n], p.v[:n], p.uniform[:n/16]
	for i, u := range w {
		p.w32[i] = float32(u)
	}
	for b := range n / 16 {
		v, uni := nvfp4NormWeights((*[16]float32)(p.w32[b*16:]))
		if uni {
			for j := range v {
				v[j] = 1
			}
		}
		copy(p.v[b*16:], v[:])
		p.uniform[b] = uni
	}
	p.key, p.n, p.kern = &w[0], n, p.kern[:0]
}
