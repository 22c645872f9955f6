//go:build !amd64 || purego

package codecs

func searchAffineGroupsFast(bits int, x []float32, codes []uint8, res []affineResult) int { return 0 }

func searchAffineGroupsWFast(bits int, x []float32, w []float64, first int, codes []uint8, res []affineResultW) int {
	return 0
}
