package cuda

import (
	"unsafe"
)

// blasAPI is libcublas's entry points, bound in the order of blasSymbols.
type blasAPI struct {
	create, destroy, setStream, sgemm, gemmEx, gemmStridedBatchedEx, statusName uintptr
}

// blasSymbols are the C names of blasAPI's fields, in order.
const blasSymbols = `cublasCreate_v2 cublasDestroy_v2 cublasSetStream_v2 cublasSgemm_v2 cublasGemmEx
	cublasGemmStridedBatchedEx cublasGetStatusName`

var (
	blasLib library
	blas    blasAPI
)

// loadBLAS loads libcublas once (at the first GEMM).
func loadBLAS() error {
	return load(&blasLib, []string{"libcublas.so", "libcublas.so.13", "libcublas.so.12"}, blasSymbols, &blas, nil)
}

// blasCheck turns a cublasStatus_t into an error naming call.
func blasCheck(call string, r uintptr) error {
	return libStatus(call, r, "cublasStatus", blas.statusName)
}

// blasDo runs call on the device's cuBLAS handle (inside d.do, the handle
// made at first use) and checks the status it returns; name is the C
// function.
func (d *Device) blasDo(name string, call func(h uintptr) uintptr) error {
	return d.do(func() error {
		h, err := d.blasHandle()
		if err != nil {
			return err
		}
		return blasCheck(name, call(h))
	})
}

// blasHandle returns the device's cuBLAS handle, bound to its stream,
// creating it at first use; called inside d.do.
func (d *Device) blasHandle() (uintptr, error) {
	if d.blas != 0 {
		return d.blas, nil
	}
	if err := loadBLAS(); err != nil {
		return 0, err
	}
	var h uintptr
	if err := blasCheck("cublasCreate_v2", ccall(blas.create, uintptr(unsafe.Pointer(&h)))); err != nil {
		return 0, err
	}
	if err := blasCheck("cublasSetStream_v2", ccall(blas.setStream, h, d.stream)); err != nil {
		ccall(blas.destroy, h)
		return 0, err
	}
	d.blas = h
	return h, nil
}

func op(t bool) uintptr {
	if t {
		return 1 // CUBLAS_OP_T
	}
	return 0 // CUBLAS_OP_N
}

// Sgemm queues C = alpha·op(A)·op(B) + beta·C on the device's stream, with
// cuBLAS's column-major conventions (cublasSgemm_v2): op(A) is m×k, op(B)
// k×n, C m×n with leading dimension ldc.
func (d *Device) Sgemm(transA, transB bool, m, n, k int, alpha float32, a Ptr, lda int, b Ptr, ldb int, beta float32, c Ptr, ldc int) error {
	return d.blasDo("cublasSgemm_v2", func(h uintptr) uintptr {
		return ccall(blas.sgemm, h, op(transA), op(transB),
			uintptr(m), uintptr(n), uintptr(k), uintptr(unsafe.Pointer(&alpha)),
			uintptr(a), uintptr(lda), uintptr(b), uintptr(ldb), uintptr(unsafe.Pointer(&beta)),
			uintptr(c), uintptr(ldc))
	})
}

// DataType is a cudaDataType for GemmEx.
type DataType int

// Data types for GemmEx.
const (
	R32F  DataType = 0  // CUDA_R_32F
	R16F  DataType = 2  // CUDA_R_16F
	R16BF DataType = 14 // CUDA_R_16BF
)

// GemmEx queues C = alpha·op(A)·op(B) + beta·C (cublasGemmEx, column-major)
// with element types ta, tb, tc, accumulating in f32 (CUBLAS_COMPUTE_32F)
// with the default algorithm. alpha and beta are f32.
func (d *Device) GemmEx(transA, transB bool, m, n, k int, alpha float32, a Ptr, ta DataType, lda int, b Ptr, tb DataType, ldb int, beta float32, c Ptr, tc DataType, ldc int) error {
	const algoDefault = ^uintptr(0)
	return d.blasDo("cublasGemmEx", func(h uintptr) uintptr {
		return ccall(blas.gemmEx, h, op(transA), op(transB),
			uintptr(m), uintptr(n), uintptr(k), uintptr(unsafe.Pointer(&alpha)),
			uintptr(a), uintptr(ta), uintptr(lda), uintptr(b), uintptr(tb), uintptr(ldb),
			uintptr(unsafe.Pointer(&beta)), uintptr(c), uintptr(tc), uintptr(ldc),
			compute32F, algoDefault)
	})
}

// Compute types of GemmStridedBatched.
const (
	compute32F         = 68 // CUBLAS_COMPUTE_32F: f32 arithmetic
	compute32FFastTF32 = 77 // CUBLAS_COMPUTE_32F_FAST_TF32: f32 inputs rounded to TF32 for the tensor cores
)

// GemmStridedBatched queues batch f32 products C_i = alpha·op(A_i)·op(B_i) +
// beta·C_i (cublasGemmStridedBatchedEx, column-major), A_i = a + i·strideA
// elements and so on; tf32 lets cuBLAS round the inputs to TF32.
func (d *Device) GemmStridedBatched(transA, transB bool, m, n, k int, alpha float32, a Ptr, lda int, strideA int64,
	b Ptr, ldb int, strideB int64, beta float32, c Ptr, ldc int, strideC int64, batch int, tf32 bool) error {
	const algoDefault = ^uintptr(0)
	compute := uintptr(compute32F)
	if tf32 {
		compute = compute32FFastTF32
	}
	return d.blasDo("cublasGemmStridedBatchedEx", func(h uintptr) uintptr {
		return ccall(blas.gemmStridedBatchedEx, h, op(transA), op(transB),
			uintptr(m), uintptr(n), uintptr(k), uintptr(unsafe.Pointer(&alpha)),
			uintptr(a), uintptr(R32F), uintptr(lda), uintptr(strideA),
			uintptr(b), uintptr(R32F), uintptr(ldb), uintptr(strideB),
			uintptr(unsafe.Pointer(&beta)), uintptr(c), uintptr(R32F), uintptr(ldc), uintptr(strideC),
			uintptr(batch), compute, algoDefault)
	})
}

// MatMulNT queues the row-major linear-layer product C = A·Bᵀ in f32, where
// A is [m][k], B is [n][k] (a weight in [out][in] order) and C is [m][n].
func (d *Device) MatMulNT(c, a, b Ptr, m, n, k int) error {
	// Row-major C[m][n] is column-major Cᵀ (n×m) = B·Aᵀ, where the row-major
	// B[n][k] is the column-major k×n matrix Bᵀ (so op T) and A[m][k] is the
	// column-major k×m matrix Aᵀ (op N).
	return d.Sgemm(true, false, n, m, k, 1, b, k, a, k, 0, c, n)
}
