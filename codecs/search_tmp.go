package codecs

// TEMPORARY (replaced by search_affine.go / search_q8.go before commit).

func searchAffineGroup(bits int, x *[32]float32, codes *[32]uint8) (delta, min uint16, sumSqErr, sumSqRef, maxAbsErr float64) {
	nmax := float32(int(1)<<bits - 1)
	d, m := minmaxAffineGroup(nmax, x, codes)
	var st Stats
	affineStats(x, codes, d, m, &st)
	return d, m, st.SumSqErr, st.SumSqRef, st.MaxAbsErr
}

func searchQ8Row(x []float32, codes []int8) (scale uint16, sumSqErr, sumSqRef, maxAbsErr float64) {
	s := minmaxQ8Row(x, codes)
	var st Stats
	for i, v := range x {
		st.add(float32(codes[i])*BF16ToFloat32(s), v)
	}
	return s, st.SumSqErr, st.SumSqRef, st.MaxAbsErr
}
