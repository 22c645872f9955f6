package conformance

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/dgq-dev/dgq/runtime/backend"
)

// oneMinus is the largest float64 below 1.
var oneMinus = math.Nextafter(1, 0)

func testCategorical(t T, b, ref backend.Backend, o Options, tol Tolerances) {
	rng := rand.New(rand.NewPCG(31, 32))
	inf := float32(math.Inf(-1))
	type rowGen func(row []float32)
	flat := func(sd float64) rowGen {
		return func(row []float32) {
			for i := range row {
				row[i] = float32(rng.NormFloat64() * sd)
			}
		}
	}
	// peaked: tempered softcapped logits (|z| ≤ 30/0.8) with a few
	// spikes, as the sampler sees them.
	peaked := func(row []float32) {
		for i := range row {
			row[i] = 30 * float32(math.Tanh(rng.NormFloat64()*0.3)) / 0.8
		}
		for range 3 {
			row[rng.IntN(len(row))] = 36 + float32(rng.Float64())
		}
	}
	masked := func(g rowGen) rowGen { // −∞ at the ends and here and there
		return func(row []float32) {
			g(row)
			row[0] = inf
			row[len(row)-1] = inf
			for i := 2; i < len(row)-1; i += 3 {
				row[i] = inf
			}
		}
	}
	oneHot := func(row []float32) {
		for i := range row {
			row[i] = inf
		}
		row[len(row)/2] = 3
	}
	us := []float64{0, oneMinus, 1 - 1e-9, 0.5, 0.999, 1e-9}
	cases := []struct {
		name string
		v    int
		gens []rowGen
	}{
		{"V=7", 7, []rowGen{flat(0), flat(1), flat(5), peaked, masked(flat(1)), masked(peaked), oneHot}},
		{"V=1000", 1000, []rowGen{flat(0.5), flat(3), peaked, masked(flat(2)), oneHot}},
		{"V=262144", 262144, []rowGen{flat(0.5), peaked}},
	}
	for _, c := range cases {
		if o.skip(c.v > 1<<16) {
			continue
		}
		t.Run(c.name, func(t T) {
			// Each generator with each special uniform and a random one;
			// at V=262144 only one row of each.
			var z []float32
			var u []float64
			for gi, g := range c.gens {
				ul := append(append([]float64(nil), us...), rng.Float64())
				if c.v > 1<<16 {
					ul = []float64{[]float64{rng.Float64(), 1 - 1e-9}[gi%2]}
				}
				for _, uu := range ul {
					row := make([]float32, c.v)
					g(row)
					z = append(z, row...)
					u = append(u, uu)
				}
			}
			rows := len(u)
			run := func(be backend.Backend) ([]float32, []float32) {
				out := withTail(make([]float32, rows), 2)
				res := runOp(t, be, "Categorical "+c.name, [][]float32{out, withTail(z, 1)}, func(bufs []backend.Buf) error {
					return be.Categorical(bufs[0], bufs[1], rows, c.v, u)
				})
				return res[0], res[1]
			}
			want, wz := run(ref)
			got, gz := run(b)
			r := newReport(t, "Categorical", c.name)
			tolerated := 0
			for row := range rows {
				if same(got[row], want[row]) {
					continue
				}
				ok, why := nearBoundary(z[row*c.v:(row+1)*c.v], u[row], got[row], want[row], tol.Categorical)
				if !ok {
					r.errorf("row %d (u=%.17g): drew %g, want %g: %s", row, u[row], got[row], want[row], why)
					continue
				}
				tolerated++
				t.Logf("Categorical %s: row %d (u=%.17g): drew %g, reference %g: %s", c.name, row, u[row], got[row], want[row], why)
			}
			for i := rows; i < len(want); i++ {
				r.exact(i, got[i], want[i])
			}
			r.exactAll(gz, wz) // logits unchanged
			r.done()
			t.Logf("Categorical %s: %d rows, %d draws off the reference's within the boundary tolerance", c.name, rows, tolerated)
		})
	}
}

// nearBoundary reports whether drawing g instead of the reference's w is
// tolerated for a row of logits z and uniform u (CategoricalRel plus the
// math term rel, Tolerances.Categorical), and why.
// The weights and their cumulative sums are float64, as the reference's.
func nearBoundary(z []float32, u float64, gf, wf float32, rel float64) (bool, string) {
	g, w := int(gf), int(wf)
	if float32(g) != gf || g < 0 || g >= len(z) {
		return false, "not an index of the row"
	}
	mx := math.Inf(-1)
	for _, v := range z {
		mx = max(mx, float64(v))
	}
	cum := make([]float64, len(z)) // cum[i] = w_0 + … + w_i
	var s float64
	for i, v := range z {
		s += math.Exp(float64(v) - mx)
		cum[i] = s
	}
	if math.Exp(float64(z[g])-mx) == 0 {
		return false, fmt.Sprintf("index %d has weight 0", g)
	}
	target := u * s
	// The boundaries between the two draws: cum[i] for min ≤ i < max. The
	// farthest from the target is the one at the far end.
	var c float64
	if g > w {
		c = cum[g-1]
	} else {
		c = cum[g]
	}
	e := math.Abs(target - c)
	why := fmt.Sprintf("target u·Σw = %.17g, cumulative weight at the far boundary %.17g (Σw %.17g): |target − c| = %.3g, bound %.3g", target, c, s, e, (CategoricalRel+rel)*c)
	return e <= (CategoricalRel+rel)*c, why
}
