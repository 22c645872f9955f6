package codecs

import "math"

// Stats is the error of an encoding against its source. Every term is
// computed in float64 from the float32 decoded value and the float32 source
// value: err = float64(dec) − float64(src).
type Stats struct {
	SumSqErr  float64 // Σ err²
	SumSqRef  float64 // Σ src²
	MaxAbsErr float64 // max |err|
	N         int64   // number of elements
	// With importance weights w (Encoder.SetImportance): Σ w·err² and
	// Σ w·src², each term float64(w·float64(err²)), summed per group (32
	// values of q4/q5/q6, a q8 row, 16 values of nvfp4) and the groups in
	// order; 0 without.
	SumWSqErr float64
	SumWSqRef float64
}

// Merge adds o into s.
func (s *Stats) Merge(o Stats) {
	s.SumSqErr += o.SumSqErr
	s.SumSqRef += o.SumSqRef
	s.SumWSqErr += o.SumWSqErr
	s.SumWSqRef += o.SumWSqRef
	if o.MaxAbsErr > s.MaxAbsErr {
		s.MaxAbsErr = o.MaxAbsErr
	}
	s.N += o.N
}

// RelRMSE is sqrt(SumSqErr/SumSqRef): 0 when both are 0, +Inf when only the
// reference is 0.
func (s Stats) RelRMSE() float64 {
	if s.SumSqRef == 0 {
		if s.SumSqErr == 0 {
			return 0
		}
		return math.Inf(1)
	}
	return math.Sqrt(s.SumSqErr / s.SumSqRef)
}

// add accounts one element.
func (s *Stats) add(dec, src float32) {
	e := float64(dec) - float64(src)
	r := float64(src)
	s.SumSqErr += float64(e * e)
	s.SumSqRef += float64(r * r)
	if a := math.Abs(e); a > s.MaxAbsErr {
		s.MaxAbsErr = a
	}
	s.N++
}
