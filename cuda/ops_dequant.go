package cuda

import (
	"fmt"

	"github.com/dgq-dev/dgq/codecs"
)

// CanDequant reports whether Dequant decodes tensors of format f and dtype
// dt on the device: raw bf16/f16/f32, q8, q4, q5, q6 and nvfp4.
func CanDequant(f codecs.Format, dt codecs.DType) bool {
	switch f {
	case codecs.Raw:
		return dt == codecs.BF16 || dt == codecs.F16 || dt == codecs.F32
	case codecs.Q8, codecs.Q4, codecs.Q5, codecs.Q6, codecs.NVFP4:
		return dt.Valid()
	}
	return false
}

// Dequant queues the decoding of a whole stored tensor of format f, dtype dt
// and geometry mtx, resident at enc in its planar layout (UploadTensor;
// planar.go), into Rows·K f32 values at out, bit-exact with
// codecs.DecodeRows of its pack bytes (NaN payloads aside: a NaN decodes to a
// NaN, raw f16/bf16/f32 keep every bit).
func (o *Ops) Dequant(out, enc Ptr, f codecs.Format, dt codecs.DType, mtx codecs.Matrix) error {
	return o.DequantRows(out, enc, f, dt, mtx, 0, mtx.Rows)
}

// DequantRows queues the decoding of rows [r0, r0+n) of a resident tensor
// (as Dequant) into n·K f32 values at out, bit-exact with codecs.DecodeRows
// of those rows: every row plane is read from row r0 on, with the
// whole-tensor kernels.
func (o *Ops) DequantRows(out, enc Ptr, f codecs.Format, dt codecs.DType, mtx codecs.Matrix, r0, n int64) error {
	if !CanDequant(f, dt) {
		return fmt.Errorf("cuda: no device decoder for %s %s", f, dt)
	}
	pl, err := planarLayout(f, dt, mtx)
	if err != nil {
		return err
	}
	if r0 < 0 || n < 0 || r0 > mtx.Rows-n {
		return fmt.Errorf("cuda: rows %d…%d of a %d-row %s tensor", r0, r0+n-1, mtx.Rows, f)
	}
	if n > 1<<31 || mtx.K > 1<<31 || mtx.Rows > 1<<32-1 {
		return fmt.Errorf("cuda: %s tensor %d×%d not supported", f, n, mtx.K)
	}
	sub := codecs.Matrix{Rows: n, K: mtx.K}
	count := sub.Elements()
	if count == 0 {
		return nil
	}
	p := pl.ptrs(enc, r0)
	switch f {
	case codecs.Raw:
		switch dt {
		case codecs.BF16:
			return o.WidenBF16(out, p[0], count)
		case codecs.F16:
			return o.WidenF16(out, p[0], count)
		default:
			dst := &Buffer{d: o.d, ptr: out, size: 4 * count}
			src := &Buffer{d: o.d, ptr: p[0], size: 4 * count}
			return dst.CopyFrom(0, src, 0, 4*count)
		}
	case codecs.Q4:
		return o.dequantQ4(out, p[0], p[1], p[2], sub)
	}
	rows, k := uint32(sub.Rows), uint32(sub.K)
	switch f {
	case codecs.Q8:
		return o.stride("dequant.kern", "dequant_q8_f32", count, p[0], p[1], out, rows, k)
	case codecs.NVFP4: // one thread per code byte (two values); p[2] is the matrix scales' start
		return o.stride("dequant.kern", "dequant_nvfp4_f32", count/2, p[0], p[1], p[2], out, rows, k, uint32(r0), uint32(pl.MatRows))
	default: // Q5, Q6
		return o.stride("dequant.kern", "dequant_affine_f32", count, p[0], p[1], p[2], out, rows, k, uint32(f.Bits()))
	}
}

// Embed queues out[t] = row ids[t] of a stored tensor (format f, dtype dt,
// geometry mtx, resident at enc in its planar layout) decoded as DequantRows
// decodes it, times scale rounded to f32, for t < n (dequant.kern's
// embed_f32 over the dialect's dgq_decode). ids holds n row indices as f32
// values on the device; an id that is not an integer in [0, Rows) gives a
// row of NaN (nothing is read out of bounds). Raw f32 is also the format of
// a weight decoded to f32 at upload.
func (o *Ops) Embed(out, ids, enc Ptr, f codecs.Format, dt codecs.DType, mtx codecs.Matrix, n int, scale float32) error {
	if !CanDequant(f, dt) {
		return fmt.Errorf("cuda: no device decoder for %s %s", f, dt)
	}
	dec, err := decoderOf(f, dt, mtx, enc)
	if err != nil {
		return err
	}
	if mtx.Rows <= 0 || mtx.Rows > 1<<24 || mtx.K > 1<<31 || n < 0 || n > 1<<31 {
		return fmt.Errorf("cuda: Embed of %d rows from a %d×%d %s tensor", n, mtx.Rows, mtx.K, f)
	}
	total := int64(n) * mtx.K
	if total == 0 {
		return nil
	}
	return o.stride("dequant.kern", "embed_f32", total,
		dec.p[0], dec.p[1], dec.p[2], ids, out, dec.code, dec.bits, uint32(mtx.Rows), uint32(mtx.K), uint32(n), scale, dec.matRows)
}

// WidenF16 queues dst[i] = f32(src[i]) for n IEEE binary16 values, exact in
// every bit (NaN payloads included).
func (o *Ops) WidenF16(dst, src Ptr, n int64) error {
	return o.stride("dequant.kern", "widen_f16_f32", n, src, dst, uint64(n))
}
