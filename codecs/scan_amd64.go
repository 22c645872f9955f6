//go:build amd64 && !purego

package codecs

// absMaxBits16 and absMaxBits32 (scan_amd64.s, generated) return the
// largest |x| bit pattern of n bytes (a multiple of 256) of 16- or 32-bit
// elements.

//go:noescape
func absMaxBits16(src *byte, n int) uint32

//go:noescape
func absMaxBits32(src *byte, n int) uint32

func init() {
	if hasAVX512 {
		scanFast = scanAVX512
	}
}

func scanAVX512(dt DType, src []byte) (uint32, int) {
	n := len(src) &^ 255
	if n == 0 {
		return 0, 0
	}
	if dt == F32 {
		return absMaxBits32(&src[0], n), n
	}
	return absMaxBits16(&src[0], n), n
}
