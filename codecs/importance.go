package codecs

import (
	"errors"
	"fmt"
	"math"

	"github.com/dgq-dev/dgq/internal/errclass"
)

// Importance-weighted search. An importance vector gives every input column
// k of a matrix a weight w_k > 0 (for a linear layer: how much the column's
// input matters, e.g. the mean squared activation a calibration run saw).
// The searching encoder then picks, among exactly the candidates it scores
// without weights, the stored parameters that minimize Σ w_k·err_k² over
// each group (q4/q5/q6: 32 values, nvfp4: 16) or row (q8) instead of Σ err²;
// the format, layout and bytes per tensor are unchanged. A code is still the
// error-minimizing code of its element for the candidate's stored values
// (one element's weight does not change which code is nearest); only the
// choice between candidates, and the least-squares fits that propose them,
// see the weights. Uniform weights give exactly the unweighted result.

// ErrImportance: an importance vector of the wrong length or with a weight
// that is not a finite number > 0, or importance for an encoder that takes
// none.
var ErrImportance = errclass.New(errclass.Invalid, "codecs: bad importance")

// SetImportance sets the column weights of every matrix: w holds
// Matrices()·K values, matrix i's weights at w[i·K:(i+1)·K] (for a 3-D expert
// bank [E, N, K], one vector per expert). Every weight must be finite and
// > 0. Only the searching encoder of a quantized format takes importance
// (min/max reproduces the engine's bytes; raw stores the source). It must be
// called before EncodeRows; the encoder keeps its own copy.
func (e *Encoder) SetImportance(w []float32) error {
	if e.method != Search || !e.f.Quantized() {
		return fmt.Errorf("%w: the %s encoder of %s takes no importance (only the searching encoder of a quantized format does)", ErrImportance, e.method, e.f.Kind())
	}
	if want := e.m.Matrices() * e.m.K; int64(len(w)) != want {
		return fmt.Errorf("%w: %d weights for %d matrices of %d columns (want %d)", ErrImportance, len(w), e.m.Matrices(), e.m.K, want)
	}
	for i, v := range w {
		if !(v > 0) || v > math.MaxFloat32 {
			return fmt.Errorf("%w: weight %d (matrix %d, column %d) is %v, not a finite number > 0", ErrImportance, i, int64(i)/max(e.m.K, 1), int64(i)%max(e.m.K, 1), v)
		}
	}
	e.imp = make([]float64, len(w))
	for i, v := range w {
		e.imp[i] = float64(v)
	}
	return nil
}

// Weighted reports whether importance weights are set.
func (e *Encoder) Weighted() bool { return e.imp != nil }

// matWeights is the importance vector of the matrix holding row r.
func (e *Encoder) matWeights(r int64) []float64 {
	rowsPer := e.m.Rows / e.m.Matrices()
	mat := int64(0)
	if rowsPer > 0 {
		mat = r / rowsPer
	}
	return e.imp[mat*e.m.K : (mat+1)*e.m.K]
}

// encodeRowsWeighted is EncodeRows with importance (checks already done).
// Runs of rows of one matrix go to the format's weighted search.
func (e *Encoder) encodeRowsWeighted(dst, src []byte, r0, n int64) (Stats, error) {
	start, _ := e.l.Span(r0, n)
	srcRow := e.m.K * int64(e.dt.Size())
	rowsPer := e.m.Rows / e.m.Matrices()
	var st Stats
	switch e.f {
	case Q4, Q5, Q6:
		// no headers: rows are contiguous; split at matrix boundaries
		for r := r0; r < r0+n; {
			end := r0 + n
			if rowsPer > 0 {
				end = min(end, (r/rowsPer+1)*rowsPer)
			}
			off := e.l.RowOffset(r) - start
			searchAffineRowsWTo(&st, e.dt, e.f.Bits(), dst[off:off+(end-r)*e.l.RowBytes], src[(r-r0)*srcRow:(end-r0)*srcRow], e.matWeights(r))
			r = end
		}
		return st, nil
	case Q8, NVFP4:
		x := make([]float32, e.m.K)
		var sc scratch
		for r := r0; r < r0+n; r++ {
			if e.f == NVFP4 && r%e.l.MatRows == 0 {
				putNVFP4Header(dst[e.l.RowOffset(r)-start-nvfp4HeaderBytes:], e.matScale[r/e.l.MatRows])
			}
			off := e.l.RowOffset(r) - start
			row := dst[off : off+e.l.RowBytes]
			toFloat32(e.dt, src[(r-r0)*srcRow:(r-r0+1)*srcRow], x)
			if e.f == Q8 {
				encodeQ8RowW(row, x, e.matWeights(r), &sc, &st)
			} else {
				encodeNVFP4RowW(e.matScale[r/e.l.MatRows], row, x, e.matWeights(r), &sc, &st)
			}
		}
		return st, nil
	}
	return Stats{}, errors.New("codecs: internal: weighted encoding of an unweighted format")
}

// WeightedRelRMSE is sqrt(SumWSqErr/SumWSqRef), the relative error under the
// importance weights (0 for an encoding without importance).
func (s Stats) WeightedRelRMSE() float64 {
	if s.SumWSqRef == 0 {
		if s.SumWSqErr == 0 {
			return 0
		}
		return math.Inf(1)
	}
	return math.Sqrt(s.SumWSqErr / s.SumWSqRef)
}
