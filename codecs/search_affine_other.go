//go:build !amd64 || purego

package codecs

func searchAffineGroupsFast(bits int, x []float32, codes []uint8, res []affineResult) int { return 0 }
