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
// and geometry mtx, resident at enc in its stored bytes (docs/codecs.md,
// "Byte layout"; the plane offsets are f.Planes'), into Rows·K f32 values at
// out, bit-exact with codecs.DecodeRows (NaN payloads aside: a NaN decodes to
// a NaN, raw f16/bf16/f32 keep every bit).
func (o *Ops) Dequant(out, enc Ptr, f codecs.Format, dt codecs.DType, mtx codecs.Matrix) error {
	if !CanDequant(f, dt) {
		return fmt.Errorf("cuda: no device decoder for %s %s", f, dt)
	}
	planes, err := f.Planes(dt, mtx)
	if err != nil {
		return err
	}
	if mtx.Rows > 1<<31 || mtx.K > 1<<31 {
		return fmt.Errorf("cuda: %s tensor %d×%d not supported", f, mtx.Rows, mtx.K)
	}
	n := mtx.Elements()
	if n == 0 {
		return nil
	}
	switch f {
	case codecs.Raw:
		switch dt {
		case codecs.BF16:
			return o.WidenBF16(out, enc, n)
		case codecs.F16:
			return o.WidenF16(out, enc, n)
		default:
			dst := &Buffer{d: o.d, ptr: out, size: 4 * n}
			src := &Buffer{d: o.d, ptr: enc, size: 4 * n}
			return dst.CopyFrom(0, src, 0, 4*n)
		}
	case codecs.Q4:
		return o.DequantQ4(out, enc, dt, mtx)
	}
	m, err := o.module("dequant.kern")
	if err != nil {
		return err
	}
	const block = 256
	rows, k := uint32(mtx.Rows), uint32(mtx.K)
	switch f {
	case codecs.Q8:
		return m.Launch("dequant_q8_f32", [3]uint32{o.gridFor(n, block), 1, 1}, [3]uint32{block, 1, 1}, 0,
			enc.Add(planes[0].Offset), enc.Add(planes[1].Offset), out, rows, k)
	case codecs.NVFP4: // one thread per code byte (two values)
		return m.Launch("dequant_nvfp4_f32", [3]uint32{o.gridFor(n/2, block), 1, 1}, [3]uint32{block, 1, 1}, 0,
			enc.Add(planes[0].Offset), enc.Add(planes[1].Offset), enc.Add(planes[2].Offset), out, rows, k)
	default: // Q5, Q6
		return m.Launch("dequant_affine_f32", [3]uint32{o.gridFor(n, block), 1, 1}, [3]uint32{block, 1, 1}, 0,
			enc.Add(planes[0].Offset), enc.Add(planes[1].Offset), enc.Add(planes[2].Offset), out,
			rows, k, uint32(f.Bits()))
	}
}

// WidenF16 queues dst[i] = f32(src[i]) for n IEEE binary16 values, exact in
// every bit (NaN payloads included).
func (o *Ops) WidenF16(dst, src Ptr, n int64) error {
	m, err := o.module("dequant.kern")
	if err != nil {
		return err
	}
	const block = 256
	return m.Launch("widen_f16_f32", [3]uint32{o.gridFor(n, block), 1, 1}, [3]uint32{block, 1, 1}, 0, src, dst, uint64(n))
}
