package cuda

import "fmt"

// elementwise launches a 1-D grid-stride kernel of elementwise.kern over n
// values (nothing for n = 0): args follow the buffers in the kernel's order.
func (o *Ops) elementwise(kernel string, n int64, bufs []Ptr, args ...any) error {
	if n < 0 {
		return fmt.Errorf("cuda: %s of %d values", kernel, n)
	}
	if n == 0 {
		return nil
	}
	all := make([]any, 0, len(bufs)+1+len(args))
	for _, b := range bufs {
		all = append(all, b)
	}
	all = append(all, uint64(n))
	return o.stride("elementwise.kern", kernel, n, append(all, args...)...)
}

// AddScale queues x[i] = (x[i] + y[i])·s for n f32 values, sum and product
// each rounded to f32. y may be x.
func (o *Ops) AddScale(x, y Ptr, n int64, s float32) error {
	return o.elementwise("add_scale_f32", n, []Ptr{x, y}, s)
}

// Scale queues x[i] = x[i]·s for n f32 values.
func (o *Ops) Scale(x Ptr, n int64, s float32) error {
	return o.elementwise("scale_f32", n, []Ptr{x}, s)
}

// GeluMul queues g[i] = gelu(g[i])·u[i] for n f32 values (PyTorch's tanh
// GELU rounded to f32, then the f32 product; a few ulp from the float64
// reference). u may be g.
func (o *Ops) GeluMul(g, u Ptr, n int64) error {
	return o.elementwise("gelu_mul_f32", n, []Ptr{g, u})
}

// Temper queues x[i] = x[i] / T for n f32 values (IEEE division).
func (o *Ops) Temper(x Ptr, n int64, T float32) error {
	return o.elementwise("temper_f32", n, []Ptr{x}, T)
}

// RoundBF16 queues the rounding of n f32 values to the nearest bfloat16
// (ties to even, NaN left as it is), kept as f32.
func (o *Ops) RoundBF16(x Ptr, n int64) error {
	return o.elementwise("round_bf16_f32", n, []Ptr{x})
}

// Softmax queues y[r] = softmax(x[r]) for rows r < rows of n f32 values
// (attention.kern's softmax_f32: exp(x − max), the reciprocal of the f32 sum
// times each). x must not be y.
func (o *Ops) Softmax(y, x Ptr, rows, n int) error {
	if rows <= 0 || n <= 0 || rows > 1<<31-1 || n > 1<<31-1 {
		return fmt.Errorf("cuda: Softmax of %d×%d", rows, n)
	}
	return o.perRow("attention.kern", "softmax_f32", uint32(min(rows, 1<<20)), n, x, y, uint32(rows), uint32(n))
}
